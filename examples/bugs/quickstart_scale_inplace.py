"""Bug class: unmasked store beside a masked load of the same pointer (the README's example).
Trigger: n=1000 with BLOCK=256: the last program stores lanes 1000..1023, past the end of x.
Expected: KS103 at the tl.store (the load of the same offsets is masked)."""
import torch
import triton
import triton.language as tl


@triton.jit
def scale_inplace_kernel(x_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, x * alpha)  # BUG(KS103): the store is not masked like the load


def scale_inplace(x: torch.Tensor, alpha: float, BLOCK: int = 256) -> torch.Tensor:
    n = x.numel()
    scale_inplace_kernel[(triton.cdiv(n, BLOCK),)](x, n, alpha, BLOCK=BLOCK)
    return x
