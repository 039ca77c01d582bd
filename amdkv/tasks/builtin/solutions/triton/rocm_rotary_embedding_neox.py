"""Reference Triton solution for rocm_rotary_embedding_neox: one program per (token, q-or-k), all heads of the
token at once (one launch for q, one for k); rotary pairs in fp32 from the cos/sin cache, tail dimensions copied through."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rope_neox_kernel(pos_ptr, cache_ptr, x_ptr, out_ptr, NH, D, ROT, stride_cache, stride_x,
                      H_PAD: tl.constexpr, HALF_PAD: tl.constexpr, D_PAD: tl.constexpr):
    # One tensor (query or key) per launch: selecting between two base pointers inside the kernel
    # made Triton 3.6's AMD backend fail (PassManager) once pointers are range-specialised.
    tok = tl.program_id(0).to(tl.int64)
    half = ROT // 2
    pos = tl.load(pos_ptr + tok).to(tl.int64)
    i = tl.arange(0, HALF_PAD)
    im = i < half
    cos = tl.load(cache_ptr + pos * stride_cache + i, mask=im, other=0.0).to(tl.float32)
    sin = tl.load(cache_ptr + pos * stride_cache + half + i, mask=im, other=0.0).to(tl.float32)
    src = x_ptr + tok * stride_x
    dst = out_ptr + tok * stride_x
    h = tl.arange(0, H_PAD)
    hm = h < NH
    rot_m = hm[:, None] & im[None, :]
    off1 = h[:, None] * D + i[None, :]
    x1 = tl.load(src + off1, mask=rot_m, other=0.0).to(tl.float32)
    x2 = tl.load(src + off1 + half, mask=rot_m, other=0.0).to(tl.float32)
    o1 = x1 * cos[None, :] - x2 * sin[None, :]
    o2 = x2 * cos[None, :] + x1 * sin[None, :]
    tl.store(dst + off1, o1.to(out_ptr.dtype.element_ty), mask=rot_m)
    tl.store(dst + off1 + half, o2.to(out_ptr.dtype.element_ty), mask=rot_m)
    # Dimensions [ROT, D) are not rotated.
    d = tl.arange(0, D_PAD)
    pm = hm[:, None] & ((d[None, :] >= ROT) & (d[None, :] < D))
    offp = h[:, None] * D + d[None, :]
    xp = tl.load(src + offp, mask=pm, other=0.0)
    tl.store(dst + offp, xp, mask=pm)


class ModelNew(nn.Module):
    def __init__(self, head_size: int = 128, rotary_dim: int = 128, max_position: int = 8192,
                 base: float = 500000.0):
        super().__init__()
        self.head_size = head_size
        self.rotary_dim = rotary_dim
        inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim))
        t = torch.arange(max_position, dtype=torch.float64)
        freqs = torch.outer(t, inv_freq)
        cache = torch.cat([freqs.cos(), freqs.sin()], dim=-1).to(torch.float32)
        self.register_buffer("cos_sin_cache", cache)

    def forward(self, positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor):
        query = query.contiguous()
        key = key.contiguous()
        positions = positions.contiguous()
        cache = self.cos_sin_cache.contiguous()
        t = query.shape[0]
        d = self.head_size
        hq = query.shape[1] // d
        hk = key.shape[1] // d
        q_out = torch.empty_like(query)
        k_out = torch.empty_like(key)
        for x, out, nh in ((query, q_out, hq), (key, k_out, hk)):
            _rope_neox_kernel[(t,)](positions, cache, x, out, nh, d, self.rotary_dim,
                                    cache.stride(0), x.stride(0),
                                    H_PAD=triton.next_power_of_2(nh),
                                    HALF_PAD=triton.next_power_of_2(self.rotary_dim // 2),
                                    D_PAD=triton.next_power_of_2(d), num_warps=4)
        return q_out, k_out
