"""Element-wise vector addition, z = x + y: the smallest annotated Triton kernel.

One program per BLOCK consecutive elements; the last program is partial and masked.
"""
import torch
import triton
import triton.language as tl

BENCH = {
    "kernel": "add_kernel",
    "launcher": "vector_add",
    "reference": "reference",
    "inputs": "make_inputs",
    "baseline": "baseline",
    "shapes": [{"N": 1000}, {"N": 4096}, {"N": 1}],
    "bench_shapes": [{"N": 16777216}, {"N": 268435456}],
    "dtypes": ["float16", "float32"],
    "tolerance": {"float16": {"atol": 1e-3, "rtol": 1e-3},
                  "float32": {"atol": 1e-6, "rtol": 1e-6}},
    "flops": "N",
    "bytes": "3*N*elt",
    "config_space": {"BLOCK": [256, 512, 1024, 2048, 4096],
                     "num_warps": [2, 4, 8], "num_stages": [1, 2]},
}


#@ tensor X = x_ptr[i: N]
#@ tensor Y = y_ptr[i: N]
#@ tensor Z = z_ptr[i: N]
#@ grid (cdiv(N, BLOCK),)
#@ computes Z[i] from X[i], Y[i]
#@ bench BENCH
@triton.jit
def add_kernel(x_ptr, y_ptr, z_ptr, N, BLOCK: tl.constexpr):
    # int64 so that pid * BLOCK cannot wrap for vectors of more than 2**31 elements
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(z_ptr + offs, x + y, mask=mask)


def vector_add(x, y, *, BLOCK=1024, num_warps=4, num_stages=1):
    """z = x + y for two 1-D tensors of equal length N and dtype; returns a new tensor [N]."""
    if x.shape != y.shape or x.dim() != 1:
        raise ValueError(f"expected two 1-D tensors of equal shape, got {tuple(x.shape)} "
                         f"and {tuple(y.shape)}")
    x, y = x.contiguous(), y.contiguous()
    z = torch.empty_like(x)
    n = x.numel()
    grid = (triton.cdiv(n, BLOCK),)
    add_kernel[grid](x, y, z, n, BLOCK=BLOCK, num_warps=num_warps, num_stages=num_stages)
    return z


def reference(x, y):
    """torch reference of :func:`vector_add`."""
    return x + y


def baseline(x, y):
    """The fastest known torch implementation, timed beside the kernel: the `+` kernel."""
    return x + y


def make_inputs(shape: dict, dtype: torch.dtype, device: str, seed: int) -> tuple:
    """Two random vectors of length shape["N"] (standard normal)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    n = shape["N"]
    x = torch.randn(n, generator=g).to(device=device, dtype=dtype)
    y = torch.randn(n, generator=g).to(device=device, dtype=dtype)
    return x, y
