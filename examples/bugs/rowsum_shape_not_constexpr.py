"""Bug class: a parameter used as a tile shape is not tl.constexpr (ACC_LEN in tl.zeros).
A row sum accumulates BLOCK-wide partial sums in a vector of length ACC_LEN (launched with
ACC_LEN == BLOCK) and reduces it once at the end.
Trigger: static (compile error: shape elements must be constexpr).
Expected: KS504 at the tl.zeros line.
"""
import triton
import triton.language as tl


#@ tensor X = x_ptr[r: n_rows, c: n_cols] strides(row_stride, 1)
#@ tensor S = s_ptr[r: n_rows]
#@ grid (n_rows,)
#@ assume ACC_LEN == BLOCK
#@ computes S[r] from X[r, :]
@triton.jit
def rowsum_kernel(x_ptr, s_ptr, row_stride, n_cols, ACC_LEN, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros((ACC_LEN,), dtype=tl.float32)  # BUG(KS504): ACC_LEN is not tl.constexpr
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * row_stride + cols, mask=cols < n_cols, other=0.0)
    tl.store(s_ptr + row, tl.sum(acc, axis=0))
