"""Reference Triton solution for rocm_softmax_temperature: one program per row; an online (running max and
rescaled sum, per lane) pass, then a normalising pass. fp32 math on fp16 logits; the max is taken before
dividing by the temperature (see the kernel's comment)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_temp_kernel(x_ptr, t_ptr, o_ptr, V, stride_x, stride_o, BLOCK: tl.constexpr):
    # softmax(x / T) = exp((x - max x) / T) / sum(...) for T > 0. The max is taken over the raw fp16
    # logits and the difference x - max is exact in fp32, so the only rounding before exp is one
    # division of a small number. Dividing first (x / T, then subtracting the max of that) would
    # carry the division's rounding of |x / T| (hundreds at T = 0.1) into every exponent: measured
    # on an H200, 6e-6 relative error where eager PyTorch's is 2e-7.
    row = tl.program_id(0).to(tl.int64)
    inv_t = 1.0 / tl.load(t_ptr + row)
    m_vec = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
    l_vec = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        msk = cols < V
        x = tl.load(x_ptr + row * stride_x + cols, mask=msk, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m_vec, x)
        alpha = tl.where(m_vec == m_new, 1.0, tl.exp((m_vec - m_new) * inv_t))
        l_vec = l_vec * alpha + tl.where(msk, tl.exp((x - m_new) * inv_t), 0.0)
        m_vec = m_new
    row_max = tl.max(m_vec, axis=0)
    w = tl.where(m_vec == float("-inf"), 0.0, tl.exp((m_vec - row_max) * inv_t))
    inv = 1.0 / tl.sum(l_vec * w, axis=0)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        msk = cols < V
        x = tl.load(x_ptr + row * stride_x + cols, mask=msk, other=0.0).to(tl.float32)
        tl.store(o_ptr + row * stride_o + cols, tl.exp((x - row_max) * inv_t) * inv, mask=msk)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits, temperature):
        logits = logits.contiguous()
        temperature = temperature.contiguous()
        b, v = logits.shape
        out = torch.empty((b, v), dtype=temperature.dtype, device=logits.device)
        block = min(triton.next_power_of_2(v), 4096)
        _softmax_temp_kernel[(b,)](logits, temperature, out, v, logits.stride(0), out.stride(0), BLOCK=block,
                                   num_warps=8)
        return out
