"""Bug class: unmasked store beside a masked load, plain code (the README's 30-second example
without annotations).
Trigger: n=1000 with BLOCK=256: the last program stores lanes 1000..1023, past the end of y.
Expected: KS101 at the tl.store: the launch site makes y a 1-D tensor of n elements
(`y = torch.empty_like(x)`, `n = x.numel()`), and lanes past n are written."""
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, x * 2)  # BUG(KS101): y has n elements; the store is not masked


def scale(x: torch.Tensor, BLOCK: int = 256) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    scale_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)
    return y
