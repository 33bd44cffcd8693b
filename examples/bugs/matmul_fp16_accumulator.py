"""Bug class: low-precision accumulator across the K loop (fp16 instead of fp32).
Trigger: fp16 inputs with a long K, e.g. M=N=256, K=8192: each partial product is rounded to
fp16 before it is added, and the sum drifts by ~1e-2 relative (fp32 accumulation: ~1e-4).
Expected: KS402 at the accumulation `acc += ...` inside the loop (acc is fp16, loop-carried).
"""
import torch
import triton
import triton.language as tl

BENCH = {
    "kernel": "matmul_kernel",
    "launcher": "matmul",
    "reference": "reference",
    "inputs": "make_inputs",
    "shapes": [{"M": 100, "N": 72, "K": 50}, {"M": 64, "N": 64, "K": 64},
               {"M": 17, "N": 130, "K": 33}],
    "bench_shapes": [{"M": 4096, "N": 4096, "K": 4096}, {"M": 8192, "N": 8192, "K": 8192},
                     {"M": 16384, "N": 1024, "K": 4096}],
    "dtypes": ["float16"],
    "tolerance": {"float16": {"atol": 2e-2, "rtol": 2e-2},
                  "float32": {"atol": 2e-2, "rtol": 1e-2}},
    "flops": "2*M*N*K",
    "bytes": "(M*K + K*N + M*N)*elt",
    "config_space": {"BLOCK_M": [32, 64, 128, 256], "BLOCK_N": [32, 64, 128, 256],
                     "BLOCK_K": [32, 64, 128], "GROUP_M": [1, 4, 8, 16],
                     "num_warps": [2, 4, 8], "num_stages": [2, 3, 4, 5]},
}


#@ tensor A = a_ptr[m: M, k: K] strides(stride_am, stride_ak)
#@ tensor B = b_ptr[k: K, n: N] strides(stride_bk, stride_bn)
#@ tensor C = c_ptr[m: M, n: N] strides(stride_cm, stride_cn)
#@ grid (cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N),)
#@ assume BLOCK_M >= 16, BLOCK_N >= 16, BLOCK_K >= 16, GROUP_M >= 1
#@ computes C[m, n] from A[m, :], B[:, n]
#@ bench BENCH
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    # grouped ordering: consecutive programs walk down GROUP_M row-blocks of one column-block
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m

    # int64 row/column indices: offs * stride exceeds 2**31 for large operands
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    offs_k = tl.arange(0, BLOCK_K).to(tl.int64)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_remaining = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_am[:, None] < M) & (offs_k[None, :] < k_remaining), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_remaining) & (offs_bn[None, :] < N), other=0.0)
        #@ assert a.k == b.k
        acc += tl.dot(a, b).to(tl.float16)  # BUG(KS402): fp16 accumulator carried across the K loop
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c = acc.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None].to(tl.int64) * stride_cm + offs_cn[None, :].to(tl.int64) * stride_cn
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


def matmul(a, b, *, BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8, num_warps=4,
           num_stages=3):
    """C = A @ B for a [M, K] and b [K, N] of one dtype (any strides); returns c [M, N]."""
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"incompatible shapes {tuple(a.shape)} @ {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise ValueError(f"dtype mismatch: {a.dtype} vs {b.dtype}")
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                        BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, num_warps=num_warps,
                        num_stages=num_stages)
    return c


def reference(a, b):
    """torch reference: the product in fp32, cast to the input dtype."""
    return (a.float() @ b.float()).to(a.dtype)


def make_inputs(shape: dict, dtype: torch.dtype, device: str, seed: int) -> tuple:
    """a [M, K], b [K, N] ~ N(0, 1) / K**0.25 each, so that the entries of C are O(1)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    m, n, k = shape["M"], shape["N"], shape["K"]
    a = torch.randn(m, k, generator=g) / k ** 0.25
    b = torch.randn(k, n, generator=g) / k ** 0.25
    return a.to(device=device, dtype=dtype), b.to(device=device, dtype=dtype)
