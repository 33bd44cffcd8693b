"""Fused mixture-of-experts GEMM: every token slot s = token * top_k + j is multiplied by the
weights of its routed expert and scaled by its routing weight, C[s] = w_s * A[s // top_k] @
W[expert(s)]^T, in one launch.

The host sorts token slots by expert and pads each expert's group to a multiple of BLOCK_M
(padding slots hold the value num_valid_tokens), so every BLOCK_M-row block of the sorted list
belongs to one expert, named by expert_ids[block].
"""
import torch
import triton
import triton.language as tl

BENCH = {
    "kernel": "moe_gemm_kernel",
    "launcher": "moe_gemm",
    "reference": "reference",
    "inputs": "make_inputs",
    "baseline": "baseline",
    "shapes": [{"num_tokens": 37, "K": 48, "N": 80, "E": 4, "top_k": 2},
               {"num_tokens": 5, "K": 32, "N": 32, "E": 8, "top_k": 2},
               {"num_tokens": 64, "K": 64, "N": 96, "E": 3, "top_k": 1}],
    "bench_shapes": [{"num_tokens": 4096, "K": 4096, "N": 14336, "E": 8, "top_k": 2},
                     {"num_tokens": 256, "K": 2048, "N": 1408, "E": 64, "top_k": 6}],
    "dtypes": ["float16"],
    "tolerance": {"float16": {"atol": 2e-2, "rtol": 2e-2},
                  "float32": {"atol": 2e-2, "rtol": 1e-2}},
    "flops": "2*num_tokens*top_k*N*K",
    "bytes": "(num_tokens*K + E*N*K + num_tokens*top_k*N)*elt + 8*num_tokens*top_k",
    "config_space": {"BLOCK_M": [16, 32, 64, 128], "BLOCK_N": [32, 64, 128, 256],
                     "BLOCK_K": [32, 64, 128], "GROUP_M": [1, 8, 16],
                     "num_warps": [4, 8], "num_stages": [2, 3, 4]},
}


#@ tensor TokenIds = sorted_token_ids_ptr[p: EM]
#@ tensor ExpertIds = expert_ids_ptr[blk: cdiv(EM, BLOCK_M)]
#@ tensor A = a_ptr[t: num_tokens, k: K] strides(stride_am, stride_ak)
#@ tensor W = b_ptr[e: E, n: N, k: K] strides(stride_be, stride_bn, stride_bk)
#@ tensor C = c_ptr[s: num_valid_tokens, n: N] strides(stride_cm, stride_cn)
#@ tensor TopkW = topk_weights_ptr[s: num_valid_tokens]
#@ grid (cdiv(EM, BLOCK_M) * cdiv(N, BLOCK_N),)
#@ assume BLOCK_M >= 16, BLOCK_N >= 16, BLOCK_K >= 16, GROUP_M >= 1, top_k >= 1
#@ assume num_valid_tokens == num_tokens * top_k, EM % BLOCK_M == 0
#@ assume 0 <= TokenIds[p] <= num_valid_tokens, 0 <= ExpertIds[blk] < E
#@ assume TokenIds[p] < num_valid_tokens implies ExpertIds[p // BLOCK_M] == expert(TokenIds[p])
#@ assume TokenIds[p] < num_valid_tokens and TokenIds[p] == TokenIds[p2] implies p == p2
#@ computes C[s, n] from A[s // top_k, :], W[expert(s), n, :], TopkW[s]
#@ bench BENCH
@triton.jit
def moe_gemm_kernel(a_ptr, b_ptr, c_ptr, topk_weights_ptr, sorted_token_ids_ptr,
                    expert_ids_ptr, EM, N, K, num_valid_tokens, top_k,
                    stride_am, stride_ak, stride_be, stride_bn, stride_bk,
                    stride_cm, stride_cn,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                    GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(EM, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m

    # EM is a multiple of BLOCK_M, so the sorted list needs no mask
    offs_token_id = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_token = tl.load(sorted_token_ids_ptr + offs_token_id).to(tl.int64)
    token_mask = offs_token < num_valid_tokens
    off_expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)

    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    offs_k = tl.arange(0, BLOCK_K).to(tl.int64)
    # slot s reads activation row s // top_k: the top_k slots of a token share its row
    a_ptrs = a_ptr + (offs_token[:, None] // top_k) * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = (b_ptr + off_expert * stride_be + offs_k[:, None] * stride_bk
              + offs_bn[None, :] * stride_bn)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_remaining = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=token_mask[:, None] & (offs_k[None, :] < k_remaining), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_remaining) & (offs_bn[None, :] < N), other=0.0)
        #@ assert a.k == b.k
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    moe_weight = tl.load(topk_weights_ptr + offs_token, mask=token_mask, other=0.0)
    acc = acc * moe_weight.to(tl.float32)[:, None]

    c_ptrs = c_ptr + offs_token[:, None] * stride_cm + offs_bn[None, :] * stride_cn
    c_mask = token_mask[:, None] & (offs_bn[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


def align_tokens(topk_ids, block_m, num_experts):
    """Sort token slots by expert and pad each expert's group to a multiple of block_m.

    Args:
        topk_ids: int tensor [num_tokens, top_k], the expert of each slot, in [0, num_experts).
        block_m: the kernel's BLOCK_M.
        num_experts: E.
    Returns:
        (sorted_token_ids int32 [EM], expert_ids int32 [EM // block_m]) on topk_ids' device.
        Slot s = token * top_k + j; padding entries hold num_valid_tokens = topk_ids.numel().
        Experts without tokens get no block; EM is a multiple of block_m.
    Raises:
        ValueError: an expert id outside [0, num_experts).
    """
    flat = topk_ids.flatten().to(torch.int64)
    num_valid = flat.numel()
    if num_valid and (int(flat.min()) < 0 or int(flat.max()) >= num_experts):
        raise ValueError(f"expert ids must lie in [0, {num_experts}), got "
                         f"[{int(flat.min())}, {int(flat.max())}]")
    # stable sort keeps the slots of one expert in token order
    order = torch.sort(flat, stable=True).indices
    counts = torch.bincount(flat, minlength=num_experts)
    padded = (counts + block_m - 1) // block_m * block_m
    em = int(padded.sum())
    sorted_ids = torch.full((em,), num_valid, dtype=torch.int64, device=flat.device)
    # destination of the r-th slot of expert e: start of e's padded group + r
    group_start = torch.cumsum(padded, 0) - padded
    count_start = torch.cumsum(counts, 0) - counts
    sorted_experts = flat[order]
    rank = torch.arange(num_valid, device=flat.device) - count_start[sorted_experts]
    sorted_ids[group_start[sorted_experts] + rank] = order
    expert_ids = torch.repeat_interleave(torch.arange(num_experts, device=flat.device),
                                         padded // block_m)
    return sorted_ids.to(torch.int32), expert_ids.to(torch.int32)


def moe_gemm(a, w, topk_weights, topk_ids, *, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8,
             num_warps=4, num_stages=3):
    """Routed expert GEMM.

    Args:
        a: activations [num_tokens, K].
        w: expert weights [E, N, K] (row n of expert e is an output feature).
        topk_weights: routing weights [num_tokens, top_k].
        topk_ids: routed experts [num_tokens, top_k], ints in [0, E).
    Returns:
        c [num_tokens, top_k, N] in a's dtype: c[t, j] = topk_weights[t, j] * w[topk_ids[t, j]] @ a[t].
    """
    num_tokens, K = a.shape
    E, N, K_w = w.shape
    if K_w != K or topk_ids.shape != topk_weights.shape or topk_ids.shape[0] != num_tokens:
        raise ValueError(f"shape mismatch: a {tuple(a.shape)}, w {tuple(w.shape)}, topk_ids "
                         f"{tuple(topk_ids.shape)}, topk_weights {tuple(topk_weights.shape)}")
    top_k = topk_ids.shape[1]
    sorted_token_ids, expert_ids = align_tokens(topk_ids, BLOCK_M, E)
    em = sorted_token_ids.numel()
    c = torch.empty((num_tokens, top_k, N), device=a.device, dtype=a.dtype)
    c2 = c.view(num_tokens * top_k, N)
    weights = topk_weights.contiguous().view(-1)
    grid = (triton.cdiv(em, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    moe_gemm_kernel[grid](a, w, c2, weights, sorted_token_ids, expert_ids, em, N, K,
                          num_tokens * top_k, top_k, a.stride(0), a.stride(1),
                          w.stride(0), w.stride(1), w.stride(2), c2.stride(0), c2.stride(1),
                          BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,
                          num_warps=num_warps, num_stages=num_stages)
    return c


def reference(a, w, topk_weights, topk_ids):
    """torch reference in fp32: loops over experts, cast to a's dtype."""
    num_tokens, top_k = topk_ids.shape
    out = torch.zeros(num_tokens, top_k, w.shape[1], dtype=torch.float32, device=a.device)
    af = a.float()
    for e in range(w.shape[0]):
        t, j = torch.nonzero(topk_ids == e, as_tuple=True)
        if t.numel():
            out[t, j] = (af[t] @ w[e].float().T) * topk_weights[t, j].float()[:, None]
    return out.to(a.dtype)


def baseline(a, w, topk_weights, topk_ids):
    """A per-expert torch.matmul loop (PyTorch has no fused MoE GEMM), timed beside the kernel."""
    num_tokens, top_k = topk_ids.shape
    out = torch.empty(num_tokens, top_k, w.shape[1], dtype=a.dtype, device=a.device)
    for e in range(w.shape[0]):
        t, j = torch.nonzero(topk_ids == e, as_tuple=True)
        if t.numel():
            out[t, j] = (a[t] @ w[e].T) * topk_weights[t, j][:, None].to(a.dtype)
    return out


def make_inputs(shape: dict, dtype: torch.dtype, device: str, seed: int) -> tuple:
    """a [num_tokens, K], w [E, N, K], topk_weights [num_tokens, top_k] (softmax of random
    logits), topk_ids [num_tokens, top_k] (distinct experts per token, random)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    t, k, n, e, top_k = (shape[x] for x in ("num_tokens", "K", "N", "E", "top_k"))
    if top_k > e:
        raise ValueError(f"top_k={top_k} > E={e}")
    a = torch.randn(t, k, generator=g) / k ** 0.25
    w = torch.randn(e, n, k, generator=g) / k ** 0.25
    logits = torch.randn(t, e, generator=g)
    topk_weights, topk_ids = torch.softmax(logits, dim=-1).topk(top_k, dim=-1)
    return (a.to(device=device, dtype=dtype), w.to(device=device, dtype=dtype),
            topk_weights.to(device=device, dtype=dtype), topk_ids.to(device=device))
