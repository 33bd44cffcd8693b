"""LayerNorm forward: one program per row, statistics in fp32, looping over the row in
BLOCK-wide tiles (three passes: mean, variance, normalise). Also writes the per-row mean and
reciprocal standard deviation that a backward pass would reuse.
"""
import torch
import triton
import triton.language as tl

BENCH = {
    "kernel": "layernorm_fwd_kernel",
    "launcher": "layernorm",
    "reference": "reference",
    "inputs": "make_inputs",
    "baseline": "baseline",
    "shapes": [{"M": 5, "N": 300}, {"M": 8, "N": 1024}, {"M": 3, "N": 1}],
    "bench_shapes": [{"M": 32768, "N": 4096}, {"M": 8192, "N": 8192}],
    "dtypes": ["float16", "float32"],
    "tolerance": {"float16": {"atol": 1e-2, "rtol": 1e-2},
                  "float32": {"atol": 1e-4, "rtol": 1e-4}},
    "flops": "8*M*N",
    "bytes": "2*M*N*elt + 2*N*elt + 8*M",
    "config_space": {"BLOCK": [256, 512, 1024, 2048, 4096],
                     "num_warps": [2, 4, 8, 16], "num_stages": [1, 2]},
}


#@ tensor X = x_ptr[r: n_rows, c: N] strides(x_row_stride, 1)
#@ tensor Y = y_ptr[r: n_rows, c: N] strides(y_row_stride, 1)
#@ tensor W = w_ptr[c: N]
#@ tensor B = b_ptr[c: N]
#@ tensor Mean = mean_ptr[r: n_rows]
#@ tensor Rstd = rstd_ptr[r: n_rows]
#@ grid (n_rows,)
#@ assume N >= 1, eps > 0
#@ computes Y[r, c] from X[r, :], W[c], B[c]
#@ computes Mean[r] from X[r, :]
#@ computes Rstd[r] from X[r, :]
#@ bench BENCH
@triton.jit
def layernorm_fwd_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr,
                         x_row_stride, y_row_stride, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    # fp32 statistics: an fp16 running sum loses the mean of long rows
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
        acc += x
    mean = tl.sum(acc, axis=0) / N
    # two-pass variance: sum((x - mean)^2) is exact where E[x^2] - mean^2 cancels
    acc2 = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        acc2 += d * d
    var = tl.sum(acc2, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < N
        w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def layernorm(x, weight, bias, eps=1e-5, *, BLOCK=None, num_warps=4, num_stages=1):
    """LayerNorm over the last axis of x [M, N] with weight, bias [N].

    Returns (y [M, N] in x's dtype, mean [M] fp32, rstd [M] fp32). BLOCK defaults to
    min(next_power_of_2(N), 65536 // element size in bytes) so that a tile is at most 64 KiB.
    """
    if x.dim() != 2 or weight.shape != (x.shape[1],) or bias.shape != (x.shape[1],):
        raise ValueError(f"expected x [M, N], weight [N], bias [N]; got {tuple(x.shape)}, "
                         f"{tuple(weight.shape)}, {tuple(bias.shape)}")
    if x.stride(1) != 1:
        x = x.contiguous()
    weight, bias = weight.contiguous(), bias.contiguous()
    n_rows, n_cols = x.shape
    if BLOCK is None:
        BLOCK = min(triton.next_power_of_2(n_cols), 65536 // x.element_size())
    y = torch.empty_like(x)
    mean = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    layernorm_fwd_kernel[(n_rows,)](x, y, weight, bias, mean, rstd, x.stride(0), y.stride(0),
                                    n_cols, eps, BLOCK=BLOCK, num_warps=num_warps,
                                    num_stages=num_stages)
    return y, mean, rstd


def reference(x, weight, bias, eps=1e-5):
    """torch reference: (y, mean, rstd), statistics in fp32, y cast to x's dtype."""
    xf = x.float()
    mean = xf.mean(dim=1)
    var = xf.var(dim=1, unbiased=False)
    rstd = 1.0 / torch.sqrt(var + eps)
    y = torch.nn.functional.layer_norm(xf, (x.shape[1],), weight.float(), bias.float(), eps)
    return y.to(x.dtype), mean, rstd


def baseline(x, weight, bias, eps=1e-5):
    """The fastest known torch implementation, timed beside the kernel."""
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def make_inputs(shape: dict, dtype: torch.dtype, device: str, seed: int) -> tuple:
    """x [M, N] ~ 2 + N(0, 1) (a non-zero mean), weight ~ 1 + 0.1 N(0, 1), bias ~ 0.1 N(0, 1)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    m, n = shape["M"], shape["N"]
    x = 2.0 + torch.randn(m, n, generator=g)
    w = 1.0 + 0.1 * torch.randn(n, generator=g)
    b = 0.1 * torch.randn(n, generator=g)
    return tuple(t.to(device=device, dtype=dtype) for t in (x, w, b))
