"""The example kernels (examples/kernels, examples/tuning) are correct and carry a well-formed
bench spec; the bug examples (examples/bugs) each carry exactly one BUG marker.

Correctness runs each example under TRITON_INTERPRET=1 in its own subprocess (the variable must
be set before triton is imported), in float32, at every shape of its BENCH["shapes"], once with
the launcher's default configuration and once with the smallest candidate of each constexpr in
BENCH["config_space"] (small tiles exercise the loop tails and masks).
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bug_markers import bug_files, markers

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples" / "kernels").glob("*.py")) + sorted(
    (ROOT / "examples" / "tuning").glob("*.py"))
REQUIRED_KEYS = {"kernel", "launcher", "reference", "inputs", "shapes", "bench_shapes",
                 "dtypes", "flops", "bytes"}
OPTIONAL_KEYS = {"tolerance", "config_space", "baseline", "heldout_shapes", "description"}
TORCH_DTYPES = {"float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2"}


def _ids(paths):
    return [p.relative_to(ROOT / "examples").as_posix() for p in paths]


def bench_directive(text: str) -> str | None:
    """The name after ``#@ bench`` in a source text, or None."""
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#@"):
            words = s[2:].split()
            if len(words) >= 2 and words[0] == "bench":
                return words[1]
    return None


def read_bench(path: Path) -> tuple[dict, ast.Module]:
    """The module-level dict named by the file's ``#@ bench`` directive, via ast.literal_eval."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    name = bench_directive(text)
    assert name, f"{path.name}: no `#@ bench NAME` directive"
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name):
            return ast.literal_eval(node.value), tree
    raise AssertionError(f"{path.name}: `#@ bench {name}` names no module-level assignment")


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def _is_jit(fn: ast.FunctionDef) -> bool:
    return any(ast.unparse(d).startswith("triton.jit") for d in fn.decorator_list)


@pytest.mark.parametrize("path", EXAMPLES, ids=_ids(EXAMPLES))
def test_bench_spec_is_a_literal_with_required_keys(path):
    bench, tree = read_bench(path)
    assert isinstance(bench, dict)
    missing = REQUIRED_KEYS - bench.keys()
    assert not missing, f"missing keys {sorted(missing)}"
    assert not bench.keys() - REQUIRED_KEYS - OPTIONAL_KEYS, "unknown keys"
    fns = _functions(tree)
    kernel = fns.get(bench["kernel"])
    assert kernel is not None and _is_jit(kernel), f"{bench['kernel']} is not a @triton.jit"
    for role in ("launcher", "reference", "inputs"):
        assert bench[role] in fns and not _is_jit(fns[bench[role]]), f"{role} {bench[role]}"
    inputs_args = [a.arg for a in fns[bench["inputs"]].args.args]
    assert inputs_args == ["shape", "dtype", "device", "seed"]


@pytest.mark.parametrize("path", EXAMPLES, ids=_ids(EXAMPLES))
def test_bench_shapes_are_sizes_and_include_a_ragged_one(path):
    bench, _ = read_bench(path)
    for key in ("shapes", "bench_shapes"):
        assert bench[key] and all(isinstance(s, dict) for s in bench[key]), key
        for s in bench[key]:
            assert all(isinstance(k, str) and isinstance(v, int) and v >= 0
                       for k, v in s.items()), s
    # a ragged size (not a multiple of 16) makes the masks and tails matter
    assert any(v % 16 for s in bench["shapes"] for v in s.values() if v > 1)
    names = {k for s in bench["shapes"] + bench["bench_shapes"] for k in s}
    assert all(set(s) == names for s in bench["shapes"] + bench["bench_shapes"])


@pytest.mark.parametrize("path", EXAMPLES, ids=_ids(EXAMPLES))
def test_bench_flops_and_bytes_evaluate_to_positive_numbers(path):
    bench, _ = read_bench(path)
    for s in bench["shapes"] + bench["bench_shapes"]:
        for key in ("flops", "bytes"):
            value = eval(bench[key], {"__builtins__": {}}, {**s, "elt": 2})  # noqa: S307
            assert isinstance(value, int | float) and value > 0, (key, s, value)


@pytest.mark.parametrize("path", EXAMPLES, ids=_ids(EXAMPLES))
def test_bench_dtypes_tolerances_and_config_space_are_consistent(path):
    bench, tree = read_bench(path)
    assert bench["dtypes"] and set(bench["dtypes"]) <= TORCH_DTYPES
    for dt, tol in bench.get("tolerance", {}).items():
        assert dt in TORCH_DTYPES and set(tol) == {"atol", "rtol"}, (dt, tol)
    fns = _functions(tree)
    kernel = fns[bench["kernel"]]
    constexprs = {a.arg for a in kernel.args.args
                  if a.annotation is not None and ast.unparse(a.annotation).endswith("constexpr")}
    launcher_kw = {a.arg for a in fns[bench["launcher"]].args.kwonlyargs}
    assert {"num_warps", "num_stages"} <= launcher_kw
    # the launcher's config keywords are named after the kernel's constexprs
    assert launcher_kw - {"num_warps", "num_stages"} <= constexprs, launcher_kw - constexprs
    for key, values in bench.get("config_space", {}).items():
        assert key in constexprs | {"num_warps", "num_stages"}, key
        assert key in launcher_kw, f"launcher cannot override {key}"
        assert values and all(isinstance(v, int) and v > 0 for v in values), (key, values)


RUNNER = r"""
import importlib.util, json, os, sys
assert os.environ.get("TRITON_INTERPRET") == "1"
import torch
spec = importlib.util.spec_from_file_location("example_under_test", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
bench = getattr(mod, sys.argv[2])
launch, ref, inputs = (getattr(mod, bench[k]) for k in ("launcher", "reference", "inputs"))
tol = bench.get("tolerance", {}).get("float32", {"atol": 1e-4, "rtol": 1e-4})
space = bench.get("config_space", {})
small = {k: min(v) for k, v in space.items() if k not in ("num_warps", "num_stages")}
results = []

def flat(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]

for shape in bench["shapes"]:
    args = inputs(shape, torch.float32, "cpu", 0)
    again = inputs(shape, torch.float32, "cpu", 0)
    other = inputs(shape, torch.float32, "cpu", 1)
    floats = [(a, b, c) for a, b, c in zip(args, again, other)
              if torch.is_tensor(a) and a.is_floating_point()]
    assert floats, "make_inputs returned no float tensor"
    for a, b, c in floats:
        assert torch.equal(a, b), "make_inputs is not deterministic for one seed"
        assert a.numel() == 0 or a.abs().sum() > 0, "make_inputs returned zeros"
    assert any(not torch.equal(a, c) for a, _, c in floats if a.numel() > 1) or all(
        a.numel() <= 1 for a, _, _ in floats), "make_inputs ignores the seed"
    expected = flat(ref(*args))
    for config in ({}, small):
        got = flat(launch(*args, **config))
        assert len(got) == len(expected), (len(got), len(expected))
        err = 0.0
        for g, e in zip(got, expected):
            torch.testing.assert_close(g, e, atol=tol["atol"], rtol=tol["rtol"],
                                       msg=lambda m: f"shape={shape} config={config}: {m}")
            err = max(err, (g.float() - e.float()).abs().max().item() if g.numel() else 0.0)
        results.append({"shape": shape, "config": config, "max_abs_err": err})
print(json.dumps(results))
"""


@pytest.mark.interpret
@pytest.mark.parametrize("path", EXAMPLES, ids=_ids(EXAMPLES))
def test_example_matches_torch_reference_under_interpreter(path):
    name = bench_directive(path.read_text(encoding="utf-8"))
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(path), name], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    bench, _ = read_bench(path)
    assert len(results) == 2 * len(bench["shapes"])


BUGS = bug_files()


def test_bug_examples_exist():
    assert len(BUGS) >= 30


@pytest.mark.parametrize("path", BUGS, ids=_ids(BUGS))
def test_bug_example_has_one_registered_marker_and_a_docstring(path):
    from kernelsight.analysis.codes import CODES

    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    doc = ast.get_docstring(tree)
    assert doc and "Expected" in doc, "module docstring must say what the analysis reports"
    found = markers(path)
    assert len(found) == 1, f"expected exactly one BUG marker, found {found}"
    code, line, reason = found[0]
    assert code in CODES, f"{code} is not in analysis/codes.py"
    assert code in doc, f"docstring does not name {code}"
    assert reason
    jit = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and _is_jit(n)]
    assert jit, "no @triton.jit kernel"
    lines = text.splitlines()
    assert lines[line - 1].split("#")[0].strip() or lines[line - 1].lstrip().startswith("#@"), \
        "the marker must trail code or a directive"
