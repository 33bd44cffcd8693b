"""Counterexamples are real: each one is replayed under TRITON_INTERPRET=1 at the sizes (and
constexprs) it names, and the failure it describes is observed.

One child process (the variable must be set before triton is imported) runs every replay. It
records, per program id, the addresses each ``tl.load``/``tl.store`` touched (by wrapping the
interpreter's masked load/store), poisons fresh allocations (``torch.empty``/``empty_like``)
with NaN, and answers queries: which programs wrote / read an element, its value, the error
against the torch reference, whether a guard region past an allocation was written.

* KS301: the element named is written by no program and stays NaN.
* KS302 / KS306: the element named is written by both program ids named.
* KS303: the program named writes the element, never reads the input element named, and the
  element differs from the torch reference.
* KS304: the output differs from the torch reference (another expert's weights).
* KS101 (engine core): the store lands in a NaN guard region past the output; also on plain
  code whose mask bounds the columns by the row count (tensors inferred from the launch).
* KS401 (engine core): the output differs from the torch reference.
Bounds/overflow counterexamples at 2^31 elements are not replayed (too large for the CPU).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernelsight.analysis import analyze_source, engine
from kernelsight.analysis.config import Config

ROOT = Path(__file__).resolve().parent.parent
BUGS = ROOT / "examples" / "bugs"
CASES = ROOT / "tests" / "data" / "cases"

CHILD = r'''
import importlib.util, inspect, json, math, os, sys
assert os.environ.get("TRITON_INTERPRET") == "1"
import numpy as np
import torch
import triton
from triton.runtime import interpreter as I

LOG = {"writes": [], "reads": [], "args": {}}
_store = I.InterpreterBuilder.create_masked_store
_load = I.InterpreterBuilder.create_masked_load


def _addrs(ptrs, mask):
    p = np.asarray(ptrs.data)
    m = np.broadcast_to(np.asarray(mask.data).astype(bool), p.shape)
    return p[m].astype(np.uint64).ravel().copy()


def store(self, ptrs, value, mask, cache_policy):
    LOG["writes"].append((tuple(self.grid_idx), _addrs(ptrs, mask)))
    return _store(self, ptrs, value, mask, cache_policy)


def load(self, ptrs, mask, other, cache_policy, is_volatile):
    LOG["reads"].append((tuple(self.grid_idx), _addrs(ptrs, mask)))
    return _load(self, ptrs, mask, other, cache_policy, is_volatile)


I.InterpreterBuilder.create_masked_store = store
I.InterpreterBuilder.create_masked_load = load
_init = I.GridExecutor._init_args_hst


def init_args(self, args_dev, kwargs):
    args_hst, kwargs_hst = _init(self, args_dev, kwargs)
    bound = inspect.getcallargs(self.fn, *args_hst, **kwargs_hst)
    LOG["args"] = {k: v for k, v in bound.items() if isinstance(v, torch.Tensor)}
    return args_hst, kwargs_hst


I.GridExecutor._init_args_hst = init_args
_empty, _empty_like = torch.empty, torch.empty_like


def _poison(t):
    if t.is_floating_point():
        t.fill_(float("nan"))
    return t


torch.empty = lambda *a, **k: _poison(_empty(*a, **k))
torch.empty_like = lambda *a, **k: _poison(_empty_like(*a, **k))


def addr(param, index):
    t = LOG["args"][param]
    off = sum(i * s for i, s in zip(index, t.stride()))
    return t.data_ptr() + off * t.element_size(), t.reshape(-1) if t.is_contiguous() else t


def programs(kind, a):
    return sorted({list(g) and tuple(g) for g, arr in LOG[kind] if (arr == a).any()})


def run(job):
    LOG["writes"].clear(); LOG["reads"].clear()
    spec = importlib.util.spec_from_file_location("m_" + job["id"], job["path"])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    dtype = getattr(torch, job.get("dtype", "float32"))
    keep = {}
    out = ref = None
    if job["mode"] == "launcher":
        bench = getattr(mod, job.get("bench", "BENCH"))
        inputs = getattr(mod, bench["inputs"])(job["shape"], dtype, "cpu", job.get("seed", 0))
        out = getattr(mod, bench["launcher"])(*inputs, **job.get("kwargs", {}))
        ref = getattr(mod, bench["reference"])(*inputs)
    else:
        g = torch.Generator().manual_seed(job.get("seed", 0))
        args = []
        for a in job["args"]:
            if "int" in a:
                args.append(a["int"])
            elif a["t"] == "randn":
                args.append(torch.randn(a["n"], generator=g, dtype=dtype))
            elif a["t"] == "nan":
                args.append(torch.full((a["n"],), float("nan"), dtype=dtype))
            elif a["t"] == "guard":
                buf = torch.full((a["n"] + a["guard"],), float("nan"), dtype=dtype)
                keep[a["name"]] = (buf, a["n"])
                args.append(buf[: a["n"]])
        kern = getattr(mod, job["kernel"])
        kern[tuple(job["grid"])](*args, **job.get("kwargs", {}))
    answers = []
    for q in job["queries"]:
        k = q["kind"]
        if k in ("writers", "readers"):
            a, _ = addr(q["param"], q["index"])
            answers.append([list(p) for p in programs("writes" if k == "writers" else "reads", a)])
        elif k == "value":
            t = LOG["args"][q["param"]]
            v = t[tuple(q["index"])].item() if t.dim() == len(q["index"]) else \
                t.reshape(-1)[q["index"][0]].item()
            answers.append(None if math.isnan(v) else v)
        elif k == "ref_error":
            o, r = out.float(), ref.float()
            if "index" in q:
                o, r = o[tuple(q["index"])], r[tuple(q["index"])]
            d = (o - r).abs()
            answers.append(float(d.nan_to_num(float("inf")).max()))
        elif k == "guard_written":
            buf, n = keep[q["name"]]
            answers.append(int((~buf[n:].isnan()).sum()))
    return answers


jobs = json.loads(open(sys.argv[1]).read())
for job in jobs:
    # one line per job, flushed: a job that crashes the interpreter is named by its absence
    try:
        r = {"ok": True, "answers": run(job)}
    except Exception as e:  # reported per job by the parent
        r = {"ok": False, "error": repr(e)[:2000]}
    print("RESULT " + json.dumps({"id": job["id"], **r}), flush=True)
'''


def _finding(path: Path, code: str):
    engine._CACHE.clear()
    text = path.read_text(encoding="utf-8")
    found = [f for f in analyze_source(text, str(path), Config()).report.findings
             if f.code == code and f.counterexample is not None]
    assert found, f"{path.name}: no {code} finding with a counterexample"
    return found[0].counterexample


def _index(text: str) -> list[int]:
    """``C[0, 384]`` -> [0, 384]."""
    inner = re.search(r"\[(.*)\]", text).group(1)
    return [int(x) for x in inner.split(",")]


def _pid3(p) -> list[int]:
    p = list(p)
    return p + [0] * (3 - len(p))


def _pick(sizes: dict, names) -> dict:
    return {n: sizes[n] for n in names if n in sizes}


def _jobs() -> tuple[list[dict], dict]:
    """Replay jobs built from the analysis' counterexamples, and per job the check."""
    jobs, checks = [], {}

    def add(job, check):
        jobs.append(job)
        checks[job["id"]] = check

    # KS301: grid one block short
    p = BUGS / "vector_add_grid_floor.py"
    c = _finding(p, "KS301")
    e = _index(c.values["element"])
    add({"id": "ks301_floor", "path": str(p), "mode": "launcher", "shape": {"N": c.sizes["N"]},
         "kwargs": {"BLOCK": c.sizes["BLOCK"]},
         "queries": [{"kind": "writers", "param": "z_ptr", "index": e},
                     {"kind": "value", "param": "z_ptr", "index": e}]},
        lambda a: a[0] == [] and a[1] is None)

    # KS301: swapped program ids on a non-square grid
    p = BUGS / "matmul_swapped_program_ids.py"
    c = _finding(p, "KS301")
    e = _index(c.values["element"])
    add({"id": "ks301_swapped", "path": str(p), "mode": "launcher",
         "shape": _pick(c.sizes, "MNK"),
         "kwargs": _pick(c.sizes, ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"]),
         "queries": [{"kind": "writers", "param": "c_ptr", "index": e},
                     {"kind": "value", "param": "c_ptr", "index": e}]},
        lambda a: a[0] == [] and a[1] is None)

    # KS302: overlapping tiles
    p = BUGS / "vector_add_overlap_race.py"
    c = _finding(p, "KS302")
    e = _index(c.values["element"])
    both = [_pid3(c.program_id), _pid3(c.values["other program_id"])]
    add({"id": "ks302_overlap", "path": str(p), "mode": "launcher",
         "shape": {"N": c.sizes["N"]}, "kwargs": {"BLOCK": c.sizes["BLOCK"]},
         "queries": [{"kind": "writers", "param": "z_ptr", "index": e}]},
        lambda a, both=both: all(p in a[0] for p in both))

    # KS303: K loop one block short, BLOCK smaller than the row
    # tolerances: the examples' own float32 BENCH tolerances (atol)
    for name, shape_of, kw, tol in (
            ("matmul_k_loop_short.py", lambda s: _pick(s, "MNK"),
             ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"], 2e-2),
            ("softmax_block_too_small.py", lambda s: {"M": s["n_rows"], "N": s["n_cols"]},
             ["BLOCK"], 1e-5)):
        p = BUGS / name
        c = _finding(p, "KS303")
        out_e, in_e = _index(c.values["element"]), _index(c.values["unread"])
        out_param = "c_ptr" if "matmul" in name else "y_ptr"
        in_param = "a_ptr" if "matmul" in name else "x_ptr"
        pid = _pid3(c.program_id)
        add({"id": "ks303_" + name[:-3], "path": str(p), "mode": "launcher",
             "shape": shape_of(c.sizes), "kwargs": _pick(c.sizes, kw),
             "queries": [{"kind": "writers", "param": out_param, "index": out_e},
                         {"kind": "readers", "param": in_param, "index": in_e},
                         {"kind": "ref_error", "index": out_e}]},
            lambda a, pid=pid, tol=tol: pid in a[0] and pid not in a[1] and a[2] > tol)

    # KS304: another expert's weights. Sizes: the counterexample's E and blocks; the token
    # count is the example's trigger shape (EM comes from the host-side routing), and N is
    # one and a quarter n-blocks: program pid_n = 1 exists, and stays below the number of
    # m-blocks, so the wrong ExpertIds[pid_n] read is in bounds (past them it reads garbage,
    # the KS101 of the same file, and the interpreter may crash).
    p = BUGS / "moe_gemm_wrong_expert.py"
    c = _finding(p, "KS304")
    bn = c.sizes.get("BLOCK_N", 64)
    shape = {"num_tokens": 37, "K": 48, "N": bn + bn // 4,
             "E": max(2, min(c.sizes.get("E", 2), 4)), "top_k": 2}
    add({"id": "ks304_moe", "path": str(p), "mode": "launcher", "shape": shape,
         "kwargs": _pick(c.sizes, ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"]),
         "queries": [{"kind": "ref_error"}]},
        lambda a: a[0] > 1e-2)

    # KS306: R13, the store ignores program_id(0)
    p = CASES / "R13_bug.py"
    c = _finding(p, "KS306")
    T, V, BT, BV = c.sizes["T"], c.sizes["V"], c.sizes["BT"], c.sizes["BV"]
    B = 2
    pa, pb = _pid3(c.program_id), _pid3(c.values["program_id (second)"])
    elem = int(re.search(r"\[(-?\d+)\]", c.values["element"]).group(1))
    add({"id": "ks306_r13", "path": str(p), "mode": "kernel", "kernel": "split_v_decode_kernel",
         "grid": [-(-V // BV), B],
         "args": [{"t": "randn", "n": B * T}, {"t": "randn", "n": B * T * V},
                  {"t": "nan", "n": B * V}, {"int": T}, {"int": V}],
         "kwargs": {"BT": BT, "BV": BV},
         "queries": [{"kind": "writers", "param": "o_ptr", "index": [elem]},
                     {"kind": "writers", "param": "o_ptr", "index": [pa[1] * V + BV]},
                     {"kind": "value", "param": "o_ptr", "index": [pa[1] * V + BV]}]},
        lambda a, pa=pa, pb=pb: pa in a[0] and pb in a[0] and a[1] == [] and a[2] is None)

    # KS101 (engine core): the unmasked store writes past z into a guard region
    p = BUGS / "vector_add_missing_mask.py"
    c = _finding(p, "KS101")
    n, block = c.sizes["N"], c.sizes["BLOCK"]
    add({"id": "ks101_guard", "path": str(p), "mode": "kernel", "kernel": "add_kernel",
         "grid": [-(-n // block)],
         "args": [{"t": "randn", "n": n}, {"t": "randn", "n": n},
                  {"t": "guard", "n": n, "guard": block, "name": "z"}, {"int": n}],
         "kwargs": {"BLOCK": block},
         "queries": [{"kind": "guard_written", "name": "z"}]},
        lambda a: a[0] > 0)

    # KS101 (plain code, inferred tensors): the column mask tested against n_rows lets the
    # last program write past the end of y (the lane n_cols <= i < n_rows the
    # counterexample names); x has finite values past its rows (read the same way), so the
    # values written into y's NaN guard are finite
    p = BUGS / "softmax_mask_wrong_bound.py"
    c = _finding(p, "KS101")
    rows, cols, block = c.sizes["n_rows"], c.sizes["n_cols"], c.sizes["BLOCK_SIZE"]
    add({"id": "ks101_wrong_bound", "path": str(p), "mode": "kernel",
         "kernel": "softmax_kernel", "grid": [rows],
         "args": [{"t": "guard", "n": rows * cols, "guard": block, "name": "y"},
                  {"t": "randn", "n": rows * cols + block},
                  {"int": cols}, {"int": cols}, {"int": rows}, {"int": cols}],
         "kwargs": {"BLOCK_SIZE": block},
         "queries": [{"kind": "guard_written", "name": "y"}]},
        lambda a: a[0] > 0)

    # KS401 (engine core): 0.0 padding under tl.max gives wrong values
    p = BUGS / "softmax_other_zero_max.py"
    c = _finding(p, "KS401")
    add({"id": "ks401_softmax", "path": str(p), "mode": "launcher",
         "shape": {"M": 2, "N": c.sizes.get("n_cols", 1)},
         "kwargs": {"BLOCK": c.sizes["BLOCK"]},
         "queries": [{"kind": "ref_error"}]},
        lambda a: a[0] > 1e-3)
    return jobs, checks


@pytest.fixture(scope="module")
def replays(tmp_path_factory):
    jobs, checks = _jobs()
    d = tmp_path_factory.mktemp("replay")
    (d / "child.py").write_text(CHILD)
    (d / "jobs.json").write_text(json.dumps(jobs))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC"))}
    env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run([sys.executable, str(d / "child.py"), str(d / "jobs.json")],
                          capture_output=True, text=True, timeout=240, env=env, cwd=str(d))
    results = {}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[len("RESULT "):])
            results[r.pop("id")] = r
    for j in jobs:
        if j["id"] not in results:
            results[j["id"]] = {"ok": False, "error": f"child died (rc {proc.returncode}) "
                                f"during this replay: {proc.stderr[-2000:]}"}
            break
    return results, checks, {j["id"]: j for j in jobs}


REPLAYS = ["ks301_floor", "ks301_swapped", "ks302_overlap", "ks303_matmul_k_loop_short",
           "ks303_softmax_block_too_small", "ks304_moe", "ks306_r13", "ks101_guard",
           "ks101_wrong_bound", "ks401_softmax"]


@pytest.mark.parametrize("job_id", REPLAYS)
def test_counterexample_replays_under_the_interpreter(replays, job_id):
    results, checks, jobs = replays
    r = results.get(job_id, {"ok": False, "error": "not run: an earlier replay crashed"})
    assert r["ok"], r.get("error")
    assert checks[job_id](r["answers"]), (jobs[job_id], r["answers"])
