"""Bug class: mask against the wrong bound, plain code (the row softmax with its column mask
tested against the row count).
Trigger: more rows than columns and a column count that is not a power of two, e.g.
n_rows=5, n_cols=3 (BLOCK_SIZE=4): lane 3 passes `cols < n_rows` although the row has 3
entries, so each program reads the first element of the next row (past the end of x on the
last row) into its softmax and writes it back there.
Expected: KS101 at the tl.load (and the tl.store): the launch site makes x and y
[n_rows, n_cols] tensors with row strides, the mask bounds the column coordinate by n_rows,
the size of the other dimension; the related line names n_cols and the quick fix puts it in
place of n_rows."""
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_rows
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))  # BUG(KS101): the columns are bounded by n_rows, not n_cols
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, num / den, mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_rows, n_cols,
                              BLOCK_SIZE=BLOCK_SIZE)
    return y
