"""Bug class: grid one block short (floor division instead of cdiv).
Trigger: N=1000 with BLOCK=256: grid (3,) covers z[0:768]; z[768:1000] is never written.
Expected: KS301 at the tl.store of Z (elements 768..999 have no writer; the cause is the
`#@ grid` line); the launcher's `n // BLOCK` also matches KS305 at the launch line.
"""
import torch
import triton
import triton.language as tl

BENCH = {
    "kernel": "add_kernel",
    "launcher": "vector_add",
    "reference": "reference",
    "inputs": "make_inputs",
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
#@ grid (N // BLOCK,)
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
    tl.store(z_ptr + offs, x + y, mask=mask)  # BUG(KS301): grid N // BLOCK leaves the tail of Z unwritten


def vector_add(x, y, *, BLOCK=1024, num_warps=4, num_stages=1):
    """z = x + y for two 1-D tensors of equal length N and dtype; returns a new tensor [N]."""
    if x.shape != y.shape or x.dim() != 1:
        raise ValueError(f"expected two 1-D tensors of equal shape, got {tuple(x.shape)} "
                         f"and {tuple(y.shape)}")
    x, y = x.contiguous(), y.contiguous()
    z = torch.empty_like(x)
    n = x.numel()
    grid = (n // BLOCK,)
    add_kernel[grid](x, y, z, n, BLOCK=BLOCK, num_warps=num_warps, num_stages=num_stages)
    return z


def reference(x, y):
    """torch reference of :func:`vector_add`."""
    return x + y


def make_inputs(shape: dict, dtype: torch.dtype, device: str, seed: int) -> tuple:
    """Two random vectors of length shape["N"] (standard normal)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    n = shape["N"]
    x = torch.randn(n, generator=g).to(device=device, dtype=dtype)
    y = torch.randn(n, generator=g).to(device=device, dtype=dtype)
    return x, y
