"""Bug class: tl.arange over a non-power-of-two range (the row length, 100, used directly).
Trigger: static (compile error: arange's range must be a power of 2).
Expected: KS501 at the tl.arange(0, 100) line; the fix is tl.arange(0, 128) with a mask
cols < 100.
"""
import triton
import triton.language as tl


#@ tensor X = x_ptr[r: n_rows, c: 100]
#@ tensor S = s_ptr[r: n_rows]
#@ grid (n_rows,)
#@ computes S[r] from X[r, :]
@triton.jit
def rowsum_kernel(x_ptr, s_ptr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, 100)  # BUG(KS501): 100 is not a power of two
    x = tl.load(x_ptr + row * 100 + cols)
    tl.store(s_ptr + row, tl.sum(x, axis=0))
