"""KernelBench candidate for kb_task.py: the same model as one Triton kernel."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu2_bias_kernel(x_ptr, b_ptr, y_ptr, n, n_cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs % n_cols, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0) * 2 + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(n))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        relu2_bias_kernel[(triton.cdiv(n, 128),)](x, self.bias, y, n, x.shape[-1], BLOCK=128)
        return y
