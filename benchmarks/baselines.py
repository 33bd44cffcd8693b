"""The fastest known torch implementation of each example, timed beside the Triton kernel.

Each function takes the example's ``make_inputs`` tuple and works in the inputs' own dtype, so
the comparison is like for like: cuBLAS through ``torch.matmul`` for the GEMM, PyTorch's
``scaled_dot_product_attention`` (its fused flash/efficient kernels on a GPU) for attention,
``torch.softmax`` and ``torch.nn.functional.layer_norm`` for the row kernels, the ``+`` kernel
for vector add, and a per-expert ``torch.matmul`` loop for the MoE GEMM (PyTorch has no fused
MoE operator). The examples' own ``reference`` functions compute in float32 for accuracy and
are therefore used for correctness, not for speed.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def vector_add(x, y):
    return x + y


def softmax(x):
    return torch.softmax(x, dim=-1)


def layernorm(x, weight, bias, eps=1e-5):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def matmul(a, b):
    return torch.matmul(a, b)


def flash_attention(q, k, v, causal=False, sm_scale=None):
    return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), scale=sm_scale)


def moe_gemm(a, w, topk_weights, topk_ids):
    num_tokens, top_k = topk_ids.shape
    out = torch.empty(num_tokens, top_k, w.shape[1], dtype=a.dtype, device=a.device)
    for e in range(w.shape[0]):
        t, j = torch.nonzero(topk_ids == e, as_tuple=True)
        if t.numel():
            out[t, j] = (a[t] @ w[e].T) * topk_weights[t, j][:, None]
    return out
