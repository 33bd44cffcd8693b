"""FlashAttention forward: O = softmax(Q K^T * sm_scale [+ causal mask]) V without
materialising the score matrix. One program per (BLOCK_M query rows, batch * head); key/value
tiles stream through an online softmax (running max m_i, running sum l_i, rescaled acc).
"""
import math

import torch
import triton
import triton.language as tl

BENCH = {
    "kernel": "attn_fwd_kernel",
    "launcher": "attention",
    "reference": "reference",
    "inputs": "make_inputs",
    "baseline": "baseline",
    "shapes": [{"Z": 1, "H": 2, "N_CTX": 100, "HEAD_DIM": 32, "CAUSAL": 0},
               {"Z": 2, "H": 1, "N_CTX": 77, "HEAD_DIM": 16, "CAUSAL": 1},
               {"Z": 1, "H": 1, "N_CTX": 64, "HEAD_DIM": 64, "CAUSAL": 1}],
    "bench_shapes": [{"Z": 4, "H": 32, "N_CTX": 4096, "HEAD_DIM": 128, "CAUSAL": 0},
                     {"Z": 4, "H": 32, "N_CTX": 4096, "HEAD_DIM": 128, "CAUSAL": 1},
                     {"Z": 16, "H": 16, "N_CTX": 1024, "HEAD_DIM": 64, "CAUSAL": 0}],
    "dtypes": ["float16"],
    "tolerance": {"float16": {"atol": 1e-2, "rtol": 1e-2},
                  "float32": {"atol": 1e-2, "rtol": 1e-2}},
    "flops": "4*Z*H*N_CTX*N_CTX*HEAD_DIM // (1 + CAUSAL)",
    "bytes": "4*Z*H*N_CTX*HEAD_DIM*elt",
    "config_space": {"BLOCK_M": [32, 64, 128], "BLOCK_N": [16, 32, 64, 128],
                     "num_warps": [4, 8], "num_stages": [1, 2, 3, 4]},
}


#@ tensor Q = q_ptr[z: Z, h: H, i: N_CTX, d: HEAD_DIM] strides(stride_qz, stride_qh, stride_qm, stride_qk)
#@ tensor K = k_ptr[z: Z, h: H, j: N_CTX, d: HEAD_DIM] strides(stride_kz, stride_kh, stride_kn, stride_kk)
#@ tensor V = v_ptr[z: Z, h: H, j: N_CTX, d: HEAD_DIM] strides(stride_vz, stride_vh, stride_vn, stride_vk)
#@ tensor O = o_ptr[z: Z, h: H, i: N_CTX, d: HEAD_DIM] strides(stride_oz, stride_oh, stride_om, stride_ok)
#@ grid (cdiv(N_CTX, BLOCK_M), Z * H)
#@ assume BLOCK_M >= 16, BLOCK_N >= 16, HEAD_DIM >= 16, 0 <= IS_CAUSAL <= 1
#@ computes O[z, h, i, d] from Q[z, h, i, :],
#@     K[z, h, 0:N_CTX - IS_CAUSAL * (N_CTX - 1 - i), :],
#@     V[z, h, 0:N_CTX - IS_CAUSAL * (N_CTX - 1 - i), d]
#@ bench BENCH
@triton.jit
def attn_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, sm_scale,
                    stride_qz, stride_qh, stride_qm, stride_qk,
                    stride_kz, stride_kh, stride_kn, stride_kk,
                    stride_vz, stride_vh, stride_vn, stride_vk,
                    stride_oz, stride_oh, stride_om, stride_ok,
                    H, N_CTX,
                    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    IS_CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = (off_hz // H).to(tl.int64)
    off_h = (off_hz % H).to(tl.int64)
    q_base = q_ptr + off_z * stride_qz + off_h * stride_qh
    k_base = k_ptr + off_z * stride_kz + off_h * stride_kh
    v_base = v_ptr + off_z * stride_vz + off_h * stride_vh
    o_base = o_ptr + off_z * stride_oz + off_h * stride_oh

    offs_m = (start_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)

    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qk,
                mask=offs_m[:, None] < N_CTX, other=0.0)
    # scores in base 2: exp(x) = exp2(x * log2(e)), folded into the scale once
    qk_scale = sm_scale * 1.4426950408889634

    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    #@ tag m_i.i = offs_m
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    #@ tag l_i.i = offs_m
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    #@ tag acc.i = offs_m
    #@ tag acc.d = offs_d
    #@ partners m_i: acc, l_i

    if IS_CAUSAL:
        # keys past the last query row of this block are masked for every row of it
        hi = tl.minimum((start_m + 1) * BLOCK_M, N_CTX)
    else:
        hi = N_CTX
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        # K^T tile [HEAD_DIM, BLOCK_N]
        k = tl.load(k_base + offs_d[:, None] * stride_kk + cols[None, :] * stride_kn,
                    mask=cols[None, :] < N_CTX, other=0.0)
        #@ assert q.d == k.d
        qk = tl.dot(q, k) * qk_scale
        valid = cols[None, :] < N_CTX
        if IS_CAUSAL:
            valid = valid & (offs_m[:, None] >= cols[None, :])
        qk = tl.where(valid, qk, float("-inf"))
        # every row sees key 0 in the first tile, so m_new is finite from then on
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vk,
                    mask=cols[:, None] < N_CTX, other=0.0)
        #@ assert p.j == v.j
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    acc = acc / l_i[:, None]
    tl.store(o_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_ok,
             acc.to(o_ptr.dtype.element_ty), mask=offs_m[:, None] < N_CTX)


def attention(q, k, v, causal=False, sm_scale=None, *, BLOCK_M=64, BLOCK_N=64, num_warps=4,
              num_stages=2):
    """Scaled dot-product attention forward for q, k, v [Z, H, N_CTX, HEAD_DIM] (any strides).

    HEAD_DIM must be a power of two >= 16 (it is a tile dimension). sm_scale defaults to
    1 / sqrt(HEAD_DIM). Returns o [Z, H, N_CTX, HEAD_DIM] in q's dtype.
    """
    if q.dim() != 4 or q.shape != k.shape or q.shape != v.shape:
        raise ValueError(f"expected q, k, v of one shape [Z, H, N_CTX, HEAD_DIM], got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    Z, H, N_CTX, HEAD_DIM = q.shape
    if HEAD_DIM < 16 or HEAD_DIM & (HEAD_DIM - 1):
        raise ValueError(f"HEAD_DIM={HEAD_DIM} must be a power of two >= 16")
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(HEAD_DIM)
    o = torch.empty_like(q)
    grid = (triton.cdiv(N_CTX, BLOCK_M), Z * H)
    attn_fwd_kernel[grid](q, k, v, o, sm_scale,
                          q.stride(0), q.stride(1), q.stride(2), q.stride(3),
                          k.stride(0), k.stride(1), k.stride(2), k.stride(3),
                          v.stride(0), v.stride(1), v.stride(2), v.stride(3),
                          o.stride(0), o.stride(1), o.stride(2), o.stride(3),
                          H, N_CTX, HEAD_DIM=HEAD_DIM, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                          IS_CAUSAL=int(bool(causal)), num_warps=num_warps,
                          num_stages=num_stages)
    return o


def reference(q, k, v, causal=False, sm_scale=None):
    """torch reference in fp32: softmax(q k^T * sm_scale, causal mask) v, cast to q's dtype."""
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(q.shape[-1])
    s = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    if causal:
        n = q.shape[2]
        keep = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return (torch.softmax(s, dim=-1) @ v.float()).to(q.dtype)


def baseline(q, k, v, causal=False, sm_scale=None):
    """PyTorch's fused scaled_dot_product_attention, timed beside the kernel."""
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(causal),
                                                            scale=sm_scale)


def make_inputs(shape: dict, dtype: torch.dtype, device: str, seed: int) -> tuple:
    """q, k, v [Z, H, N_CTX, HEAD_DIM] ~ N(0, 1), plus the causal flag shape["CAUSAL"]."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    dims = (shape["Z"], shape["H"], shape["N_CTX"], shape["HEAD_DIM"])
    q, k, v = (torch.randn(dims, generator=g).to(device=device, dtype=dtype) for _ in range(3))
    return q, k, v, bool(shape.get("CAUSAL", 0))
