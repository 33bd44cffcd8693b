"""Fused row softmax: one program per row, the whole row in one tile.

BLOCK is the next power of two >= n_cols, so a single tile covers the row; padded lanes are
loaded as -inf, the identity of max, and become exp(-inf) = 0, the identity of the sum.
"""
import torch
import triton
import triton.language as tl

BENCH = {
    "kernel": "softmax_kernel",
    "launcher": "softmax",
    "reference": "reference",
    "inputs": "make_inputs",
    "baseline": "baseline",
    "shapes": [{"M": 7, "N": 100}, {"M": 33, "N": 257}, {"M": 4, "N": 1}, {"M": 16, "N": 512}],
    "bench_shapes": [{"M": 32768, "N": 4096}, {"M": 4096, "N": 32768}, {"M": 65536, "N": 1024}],
    "dtypes": ["float16", "float32"],
    "tolerance": {"float16": {"atol": 2e-3, "rtol": 2e-3},
                  "float32": {"atol": 1e-5, "rtol": 1e-5}},
    "flops": "5*M*N",
    "bytes": "2*M*N*elt",
    "config_space": {"num_warps": [1, 2, 4, 8, 16], "num_stages": [1, 2]},
}


#@ tensor X = x_ptr[r: n_rows, c: n_cols] strides(x_row_stride, 1)
#@ tensor Y = y_ptr[r: n_rows, c: n_cols] strides(y_row_stride, 1)
#@ grid (n_rows,)
#@ assume 1 <= n_cols <= BLOCK
#@ computes Y[r, c] from X[r, :]
#@ bench BENCH
@triton.jit
def softmax_kernel(y_ptr, x_ptr, x_row_stride, y_row_stride, n_cols, BLOCK: tl.constexpr):
    # int64: row * row_stride exceeds 2**31 for inputs of more than 2**31 elements
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=float("-inf"))
    x = x.to(tl.float32)
    x_max = tl.max(x, axis=0)
    num = tl.exp(x - x_max)
    den = tl.sum(num, axis=0)
    y = num / den
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x, *, BLOCK=None, num_warps=4, num_stages=1):
    """Row softmax of a 2-D tensor x [M, N] (last stride 1 required); returns y [M, N].

    BLOCK defaults to triton.next_power_of_2(N); a smaller BLOCK is rejected (ValueError)
    because one tile must hold the whole row.
    """
    if x.dim() != 2:
        raise ValueError(f"expected a 2-D tensor, got shape {tuple(x.shape)}")
    if x.stride(1) != 1:
        x = x.contiguous()
    n_rows, n_cols = x.shape
    if BLOCK is None:
        BLOCK = triton.next_power_of_2(n_cols)
    if BLOCK < n_cols:
        raise ValueError(f"BLOCK={BLOCK} < n_cols={n_cols}: one tile must cover a row")
    y = torch.empty_like(x)
    softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols, BLOCK=BLOCK,
                              num_warps=num_warps, num_stages=num_stages)
    return y


def reference(x):
    """torch reference: softmax over the last axis, computed in fp32, cast back."""
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def baseline(x):
    """The fastest known torch implementation, timed beside the kernel."""
    return torch.softmax(x, dim=-1)


def make_inputs(shape: dict, dtype: torch.dtype, device: str, seed: int) -> tuple:
    """x [M, N] with entries ~ 3 * N(0, 1), so that the row maximum matters."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = 3.0 * torch.randn(shape["M"], shape["N"], generator=g)
    return (x.to(device=device, dtype=dtype),)
