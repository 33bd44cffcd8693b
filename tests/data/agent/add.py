"""Vector add with a bench spec: the seed kernel for the harness tests."""
import torch
import triton
import triton.language as tl

BENCH = {
    "kernel": "add_kernel",
    "launcher": "add",
    "reference": "reference",
    "inputs": "make_inputs",
    "shapes": [{"N": 256}, {"N": 1000}, {"N": 37}],
    "bench_shapes": [{"N": 16777216}],
    "dtypes": ["float32"],
    "tolerance": {"float32": {"atol": 1e-6, "rtol": 1e-6}},
    "flops": "N",
    "bytes": "3*N*elt",
}


#@ tensor X = x_ptr[i: n]
#@ tensor Y = y_ptr[i: n]
#@ tensor OUT = out_ptr[i: n]
#@ grid (cdiv(n, BLOCK),)
#@ computes OUT[i] from X[i], Y[i]
#@ bench BENCH
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def add(x, y, *, BLOCK=64, num_warps=4, num_stages=1):
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK, num_warps=num_warps,
                                         num_stages=num_stages)
    return out


def reference(x, y):
    return x + y


def make_inputs(shape, dtype, device, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape["N"], generator=g)
    y = torch.randn(shape["N"], generator=g)
    return x.to(device=device, dtype=dtype), y.to(device=device, dtype=dtype)
