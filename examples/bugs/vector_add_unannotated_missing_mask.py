"""Bug class: missing mask on a store, in a kernel without annotations: an in-place scale whose
load is masked (`offs < n`) and whose store through the same pointer is not. The extent of
x_ptr is inferred from the load's mask.
Trigger: n not a multiple of BLOCK, e.g. n=1000, BLOCK=256: program 3 writes x[1000:1024].
Expected: KS103 at the tl.store (unmasked access beside a masked access of the same pointer).
"""
import triton
import triton.language as tl


@triton.jit
def scale_inplace_kernel(x_ptr, alpha, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, alpha * x)  # BUG(KS103): the store through x_ptr drops the load's mask
