"""Counterexamples of the per-program checks are real: each is replayed under
TRITON_INTERPRET=1 (one child process; the variable must be set before triton is imported) at
the sizes and constexprs it names, and the failure it describes is observed.

* KS104 (R02): the unmasked store writes into a NaN guard region past the output.
* KS105 (R22): the load reads the element just before the tensor (address log).
* KS401 (R08): the logsumexp differs from torch for all-negative logits.
* KS201 (matmul, B advanced by BLOCK_N): the product differs from torch.
* KS203 (matmul, transposed store): the product differs from torch.
* KS110 (R04): 2^31 elements do not fit a CPU test, so the replay is the int32 arithmetic
  itself (numpy int32, as the kernel computes it) at the program id and stride named.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kernelsight.analysis import analyze_source
from kernelsight.analysis.config import Config

pytestmark = pytest.mark.interpret

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "data" / "cases"
BUGS = ROOT / "examples" / "bugs"
CFG = Config(kernel_budget_ms=60000, solver_timeout_ms=5000)

CHILD = r'''
import importlib.util, json, math, os, sys
assert os.environ.get("TRITON_INTERPRET") == "1"
import numpy as np
import torch
import triton
from triton.runtime import interpreter as I

READS = []
_load = I.InterpreterBuilder.create_masked_load


def load(self, ptrs, mask, other, *rest, **kw):
    p = np.asarray(ptrs.data)
    m = np.broadcast_to(np.asarray(mask.data).astype(bool), p.shape) if mask is not None \
        else np.ones(p.shape, bool)
    READS.append(p[m].astype(np.int64).ravel().copy())
    return _load(self, ptrs, mask, other, *rest, **kw)


I.InterpreterBuilder.create_masked_load = load


def module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def r02(job):
    s = job["sizes"]
    mod = module(job["path"], "r02")
    # K does not take part in the violation (the solver left it free): any K reproduces it
    M, N, K = s["M"], s["N"], s.get("K", 16)
    BM, BN, BK = s["BLOCK_M"], s["BLOCK_N"], s["BLOCK_K"]
    a = torch.randn(M, K)
    b = torch.randn(K, N)
    # c is the top-left M x N corner of a NaN buffer with BLOCK_M extra rows and BLOCK_N extra
    # columns: any store outside C lands in that guard region
    big = torch.full((M + BM, N + BN), float("nan"))
    c = big[:M, :N]
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    mod.linear_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                            b.stride(1), c.stride(0), c.stride(1),
                            BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK)
    guard = torch.ones_like(big, dtype=torch.bool)
    guard[:M, :N] = False
    return {"guard_written": int((~torch.isnan(big[guard])).sum())}


def r22(job):
    s = job["sizes"]
    mod = module(job["path"], "r22")
    n, B = s["n"], s["BLOCK"]
    cu = torch.arange(1, n + 1, dtype=torch.int32)
    out = torch.zeros(2 * n, dtype=torch.int32)
    READS.clear()
    mod.segment_start_kernel[(triton.cdiv(n, B),)](cu, out, n, BLOCK=B)
    addrs = np.concatenate(READS) if READS else np.zeros(0, np.int64)
    base = cu.data_ptr()
    return {"read_before": int((addrs < base).sum()),
            "first_before": int((base - addrs[addrs < base].max()) // 4) if (addrs < base).any()
            else 0}


def r08(job):
    s = job["sizes"]
    mod = module(job["path"], "r08")
    V, B = s["V"], s["BLOCK_V"]
    x = -5.0 - torch.rand(1, V)
    lse = torch.empty(1)
    mod.row_logsumexp_kernel[(1,)](x, lse, x.stride(0), V, BLOCK_V=B)
    return {"err": float((lse - torch.logsumexp(x, dim=1)).abs().max())}


def matmul(job):
    s = job["sizes"]
    mod = module(job["path"], job["id"])
    g = torch.Generator().manual_seed(0)
    # sizes the violation does not constrain are left out of the counterexample: any value
    M, N, K = s.get("M", 32), s.get("N", 32), s.get("K", 16)
    a = torch.randn(M, K, generator=g)
    b = torch.randn(K, N, generator=g)
    c = mod.matmul(a, b, BLOCK_M=s["BLOCK_M"], BLOCK_N=s["BLOCK_N"], BLOCK_K=s["BLOCK_K"],
                   GROUP_M=s["GROUP_M"])
    return {"err": float((c - a @ b).abs().max())}


RUN = {"r02": r02, "r22": r22, "r08": r08, "ks201": matmul, "ks203": matmul}
out = {}
for job in json.loads(open(sys.argv[1]).read()):
    try:
        out[job["id"]] = {"ok": True, **RUN[job["id"]](job)}
    except Exception as e:
        out[job["id"]] = {"ok": False, "error": repr(e)[:1500]}
print("RESULTS " + json.dumps(out))
'''


def _finding(path: Path, code: str):
    a = analyze_source(path.read_text(), str(path), CFG)
    return next(f for f in a.report.findings if f.code == code)


def _jobs() -> tuple[list[dict], dict]:
    jobs = []
    cex = {}
    for job_id, path, code in [("r02", CASES / "R02_bug.py", "KS104"),
                               ("r22", CASES / "R22_bug.py", "KS105"),
                               ("r08", CASES / "R08_bug.py", "KS401"),
                               ("ks201", BUGS / "matmul_b_wrong_stride.py", "KS201"),
                               ("ks203", BUGS / "matmul_transposed_store.py", "KS203")]:
        f = _finding(path, code)
        cex[job_id] = f.counterexample
        jobs.append({"id": job_id, "path": str(path), "sizes": f.counterexample.sizes})
    return jobs, cex


@pytest.fixture(scope="module")
def replays(tmp_path_factory):
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    jobs, cex = _jobs()
    d = tmp_path_factory.mktemp("engine_replay")
    (d / "child.py").write_text(CHILD)
    (d / "jobs.json").write_text(json.dumps(jobs))
    env = {k: v for k, v in os.environ.items() if not k.endswith(("KEY", "TOKEN"))}
    env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run([sys.executable, str(d / "child.py"), str(d / "jobs.json")],
                          capture_output=True, text=True, timeout=600, env=env)
    line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULTS ")), None)
    assert line is not None, proc.stderr[-3000:]
    return json.loads(line[len("RESULTS "):]), cex


def test_r02_unmasked_store_writes_into_the_guard_region(replays):
    results, cex = replays
    r = results["r02"]
    assert r["ok"], r
    assert r["guard_written"] > 0


def test_r22_load_reads_the_element_before_the_tensor(replays):
    results, cex = replays
    r = results["r22"]
    assert r["ok"], r
    assert r["read_before"] >= 1
    assert r["first_before"] == -cex["r22"].values["offset"] == 1


def test_r08_zero_padding_under_max_gives_a_wrong_logsumexp(replays):
    results, _ = replays
    r = results["r08"]
    assert r["ok"], r
    assert not r["err"] <= 1e-2  # wrong, or NaN


@pytest.mark.parametrize("job_id", ["ks201", "ks203"])
def test_matmul_tag_violation_gives_wrong_products(replays, job_id):
    results, _ = replays
    r = results[job_id]
    assert r["ok"], r
    assert not r["err"] <= 1e-2  # wrong, or NaN (reads past B)


def test_r04_int32_product_wraps_at_the_named_program_id():
    f = _finding(CASES / "R04_bug.py", "KS110")
    pid = np.int32(f.counterexample.program_id[0])
    stride = np.int32(f.counterexample.sizes["row_stride"])
    with np.errstate(over="ignore"):
        wrapped = pid * stride  # what the kernel computes in int32
    assert int(wrapped) < 0 or int(wrapped) != int(pid) * int(stride)
    assert int(pid) * int(stride) > 2 ** 31 - 1
