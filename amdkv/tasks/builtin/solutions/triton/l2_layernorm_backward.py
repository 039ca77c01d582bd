"""Reference Triton solution for l2_layernorm_backward: row kernel for grad_x with per-program partial column sums, then a column-reduction kernel."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _ln_bwd_rows_kernel(x_ptr, dy_ptr, w_ptr, dx_ptr, pw_ptr, pb_ptr, M, N, eps,
                        ROWS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    cmask = cols < N
    w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    db = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(ROWS):
        row = pid * ROWS + i
        if row < M:
            off = row.to(tl.int64) * N + cols
            x = tl.load(x_ptr + off, mask=cmask, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + off, mask=cmask, other=0.0).to(tl.float32)
            mean = tl.sum(x, axis=0) / N
            xc = tl.where(cmask, x - mean, 0.0)
            rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / N + eps)
            xhat = xc * rstd
            g = dy * w
            c1 = tl.sum(g, axis=0) / N
            c2 = tl.sum(g * xhat, axis=0) / N
            dx = rstd * (g - c1 - xhat * c2)
            tl.store(dx_ptr + off, dx.to(dx_ptr.dtype.element_ty), mask=cmask)
            dw += dy * xhat
            db += dy
    tl.store(pw_ptr + pid * N + cols, dw, mask=cmask)
    tl.store(pb_ptr + pid * N + cols, db, mask=cmask)


@triton.jit
def _col_sum2_kernel(pw_ptr, pb_ptr, dw_ptr, db_ptr, P, N, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cmask = cols < N
    aw = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
    ab = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
    for p0 in range(0, P, BLOCK_P):
        rows = p0 + tl.arange(0, BLOCK_P)
        m = (rows[:, None] < P) & cmask[None, :]
        off = rows[:, None] * N + cols[None, :]
        aw += tl.load(pw_ptr + off, mask=m, other=0.0)
        ab += tl.load(pb_ptr + off, mask=m, other=0.0)
    tl.store(dw_ptr + cols, tl.sum(aw, axis=0).to(dw_ptr.dtype.element_ty), mask=cmask)
    tl.store(db_ptr + cols, tl.sum(ab, axis=0).to(db_ptr.dtype.element_ty), mask=cmask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x: torch.Tensor, grad_out: torch.Tensor):
        x = x.contiguous()
        dy = grad_out.contiguous()
        M, N = x.shape
        ROWS = 32
        P = triton.cdiv(M, ROWS)
        BLOCK = triton.next_power_of_2(N)
        dx = torch.empty_like(x)
        pw = torch.empty((P, N), dtype=torch.float32, device=x.device)
        pb = torch.empty((P, N), dtype=torch.float32, device=x.device)
        num_warps = 4 if BLOCK <= 1024 else (8 if BLOCK <= 4096 else 16)
        _ln_bwd_rows_kernel[(P,)](x, dy, self.weight, dx, pw, pb, M, N, self.eps, ROWS=ROWS, BLOCK=BLOCK,
                                  num_warps=num_warps)
        dw = torch.empty(N, dtype=x.dtype, device=x.device)
        db = torch.empty(N, dtype=x.dtype, device=x.device)
        BLOCK_N = 128
        _col_sum2_kernel[(triton.cdiv(N, BLOCK_N),)](pw, pb, dw, db, P, N, BLOCK_P=32, BLOCK_N=BLOCK_N, num_warps=4)
        return dx, dw, db
