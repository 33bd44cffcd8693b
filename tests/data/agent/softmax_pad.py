"""Row softmax whose padded lanes load 0.0 instead of -inf: right only when the row length is
a multiple of (here: equal to) BLOCK. The spec pins one multiple and one non-multiple shape."""
import torch
import triton
import triton.language as tl

BENCH = {
    "kernel": "softmax_kernel",
    "launcher": "softmax",
    "reference": "reference",
    "inputs": "make_inputs",
    "shapes": [{"M": 3, "N": 64}, {"M": 3, "N": 50}],
    "heldout_shapes": [{"M": 2, "N": 32}],
    "dtypes": ["float32"],
    "flops": "5*M*N",
    "bytes": "2*M*N*elt",
}


#@ bench BENCH
@triton.jit
def softmax_kernel(y_ptr, x_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride + cols, y, mask=mask)


def softmax(x, *, BLOCK=None, num_warps=4, num_stages=1):
    n_rows, n_cols = x.shape
    BLOCK = BLOCK or triton.next_power_of_2(n_cols)
    y = torch.empty_like(x)
    softmax_kernel[(n_rows,)](y, x, x.stride(0), n_cols, BLOCK=BLOCK, num_warps=num_warps,
                              num_stages=num_stages)
    return y


def reference(x):
    return torch.softmax(x, dim=-1)


def make_inputs(shape, dtype, device, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape["M"], shape["N"], generator=g).to(device=device, dtype=dtype),)
