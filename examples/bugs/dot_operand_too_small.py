"""Bug class: tl.dot operand with a dimension below 16 (a 16x8 by 8x16 product).
One program multiplies a 16x8 tile of A with an 8x16 tile of B (K=8 fits one tile).
Trigger: static (compile error: tl.dot needs every dimension >= 16).
Expected: KS503 at the tl.dot line; the fix pads K to 16 with a mask.
"""
import triton
import triton.language as tl


#@ tensor A = a_ptr[m: 16, k: 8]
#@ tensor B = b_ptr[k: 8, n: 16]
#@ tensor C = c_ptr[m: 16, n: 16]
#@ grid (1,)
#@ computes C[m, n] from A[m, :], B[:, n]
@triton.jit
def small_dot_kernel(a_ptr, b_ptr, c_ptr):
    rm = tl.arange(0, 16)
    rk = tl.arange(0, 8)
    rn = tl.arange(0, 16)
    a = tl.load(a_ptr + rm[:, None] * 8 + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * 16 + rn[None, :])
    c = tl.dot(a, b)  # BUG(KS503): K=8 < 16
    tl.store(c_ptr + rm[:, None] * 16 + rn[None, :], c)
