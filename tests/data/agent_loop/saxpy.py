"""z = alpha * x + y over a vector: the tiny kernel of the optimization-loop tests.

One program per BLOCK consecutive elements; the last program is partial and masked.
"""
import torch
import triton
import triton.language as tl

BENCH = {
    "kernel": "saxpy_kernel",
    "launcher": "saxpy",
    "reference": "reference",
    "inputs": "make_inputs",
    "shapes": [{"N": 100}, {"N": 1000}, {"N": 37}],
    "bench_shapes": [{"N": 16777216}],
    "dtypes": ["float32"],
    "tolerance": {"float32": {"atol": 1e-5, "rtol": 1e-5}},
    "flops": "2*N",
    "bytes": "3*N*elt",
    "config_space": {"BLOCK": [128, 256, 512, 1024], "num_warps": [1, 2, 4]},
}


#@ tensor X = x_ptr[i: N]
#@ tensor Y = y_ptr[i: N]
#@ tensor Z = z_ptr[i: N]
#@ grid (cdiv(N, BLOCK),)
#@ computes Z[i] from X[i], Y[i]
#@ bench BENCH
@triton.jit
def saxpy_kernel(x_ptr, y_ptr, z_ptr, alpha, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(z_ptr + offs, alpha * x + y, mask=mask)


def saxpy(x, y, *, BLOCK=128, num_warps=1, num_stages=1):
    """z = 2 * x + y for two 1-D float tensors of length N; returns z [N]."""
    z = torch.empty_like(x)
    n = x.numel()
    saxpy_kernel[(triton.cdiv(n, BLOCK),)](x, y, z, 2.0, n, BLOCK=BLOCK, num_warps=num_warps,
                                           num_stages=num_stages)
    return z


def reference(x, y):
    """torch reference of :func:`saxpy`."""
    return 2.0 * x + y


def make_inputs(shape: dict, dtype: torch.dtype, device: str, seed: int) -> tuple:
    """Two standard-normal vectors of length shape["N"]."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(shape["N"], generator=g).to(device=device, dtype=dtype)
    y = torch.randn(shape["N"], generator=g).to(device=device, dtype=dtype)
    return x, y
