"""The evaluation harness on a CPU-only machine: spec reading, compile report, interpreter
correctness (pass, unwritten output, right only for multiples of the block), isolation
(segfault, hang, unbounded allocation, secrets), the cache, and ``kernelsight bench``."""
from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from kernelsight.agent.benchspec import SpecError, load_spec  # noqa: E402
from kernelsight.agent.evaluate import Evaluator  # noqa: E402
from kernelsight.agent.records import Candidate  # noqa: E402

DATA = Path(__file__).parent / "data" / "agent"
ADD = DATA / "add.py"
ADD_SRC = ADD.read_text()
LAUNCH_LINE = "    add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK, num_warps=num_warps,"
LAUNCHER_BODY = "    out = torch.empty_like(x)\n"


def variant(old: str, new: str, source: str = ADD_SRC) -> str:
    assert old in source, old
    return source.replace(old, new, 1)


def in_launcher(code: str) -> str:
    """add.py with ``code`` run at the start of the launcher (4-space indented lines)."""
    return variant(LAUNCHER_BODY, "".join(f"    {l}\n" for l in code.splitlines()) + LAUNCHER_BODY)


@pytest.fixture
def evaluator(tmp_path):
    def make(path=ADD, **kw):
        kw.setdefault("device", "cpu")
        kw.setdefault("cache_dir", tmp_path / "cache")
        kw.setdefault("use_cache", False)
        return Evaluator(load_spec(path), **kw)
    return make


def cand(source: str, kernel: str = "add_kernel", **kw) -> Candidate:
    return Candidate(id="c0001", source=source, kernel=kernel, **kw)


# --- spec -------------------------------------------------------------------------------------

def test_load_spec_reads_bench_dict_without_running_the_file():
    spec = load_spec(ADD)
    assert spec.kernel == "add_kernel" and spec.launcher == "add" and spec.format == "bench"
    assert spec.shapes[2] == {"N": 37}
    assert spec.directive_line == ADD_SRC.splitlines().index("#@ bench BENCH") + 1
    assert spec.flops_for({"N": 10}, "float32") == 10.0
    assert spec.bytes_for({"N": 10}, "float16") == 60.0


@pytest.mark.parametrize("edit, message", [
    (('"launcher": "add",', '"launcher": "nope",'), "names 'nope'"),
    (('    "inputs": "make_inputs",\n', ''), "lacks key(s) inputs"),
    (('"flops": "N",', '"flops": "N * Q",'), "unknown name 'Q'"),
    (('"flops": "N",', '"flops": "__import__(1)",'), "may be called"),
    (('"dtypes": ["float32"],', '"dtypes": ["float13"],'), "unknown dtype"),
    (('"shapes": [{"N": 256}', '"shapes": [{"N": "big"}'), "shapes[0]"),
])
def test_spec_errors_name_file_and_line(tmp_path, edit, message):
    bad = tmp_path / "bad.py"
    bad.write_text(variant(*edit))
    with pytest.raises(SpecError) as info:
        load_spec(bad)
    text = str(info.value)
    assert message in text
    assert re.match(rf"{re.escape(str(bad))}:\d+: ", text), text


def test_spec_error_for_a_file_without_spec(tmp_path):
    plain = tmp_path / "plain.py"
    plain.write_text("x = 1\n")
    with pytest.raises(SpecError, match="no bench spec"):
        load_spec(plain)


def test_load_spec_reads_kernelbench_task():
    spec = load_spec(DATA / "kb_task.py")
    assert spec.format == "kernelbench" and spec.kernel == "ModelNew"
    assert spec.reference == "Model" and spec.inputs == "get_inputs"


def test_every_example_kernel_has_a_readable_spec():
    examples = sorted((Path(__file__).parent.parent / "examples" / "kernels").glob("*.py"))
    if not examples:
        pytest.skip("no examples yet")
    for path in examples:
        spec = load_spec(path)
        assert any(s != b for s in spec.shapes for b in spec.bench_shapes), path
        assert spec.flops or spec.bytes, path


# --- compile ----------------------------------------------------------------------------------

def test_compile_reports_registers_shared_memory_warps_and_stages(evaluator):
    ev = evaluator().evaluate(cand(ADD_SRC, launch={"num_warps": 2, "BLOCK": 128}),
                              stages=("compile",))
    st = ev.stage("compile")
    assert st.ok, st.feedback
    assert st.data["target"] == "cuda:90"
    assert st.data["num_warps"] == 2 and st.data["num_stages"] == 1
    assert isinstance(st.data["registers"], int) and 0 < st.data["registers"] <= 255
    assert st.data["shared"] >= 0 and st.data["spills"] == 0
    assert "registers" in st.summary


def test_compile_error_points_at_the_candidates_line(evaluator):
    src = variant("tl.store(out_ptr + offs, x + y, mask=mask)",
                  "tl.store(out_ptr + offs, tl.dot(x, y), mask=mask)")
    line = next(i for i, l in enumerate(src.splitlines(), 1) if "tl.dot" in l)
    ev = evaluator().evaluate(cand(src), stages=("compile",))
    st = ev.stage("compile")
    assert not st.ok and st.status == "failed"
    assert f"add.py:{line}:" in st.feedback, st.feedback
    assert st.data["errors"][-1]["line"] == line


# --- correctness ------------------------------------------------------------------------------

def test_correct_kernel_passes_under_the_interpreter_with_held_out_shape(evaluator):
    ev = evaluator().evaluate(cand(ADD_SRC), stages=("correctness",))
    st = ev.stage("correctness")
    assert st.ok, st.feedback
    checks = st.data["checks"]
    assert [c["shape"] for c in checks[:3]] == load_spec(ADD).shapes
    assert any(c["heldout"] for c in checks) and st.data["interpreted"]
    assert len({c["seed"] for c in checks}) == len(checks)


def test_fresh_inputs_for_every_evaluation(evaluator):
    e = evaluator()
    seeds = {e.evaluate(cand(ADD_SRC), stages=("correctness",)).stage("correctness").data["seed"]
             for _ in range(2)}
    assert len(seeds) == 2


def test_output_left_partly_unwritten_fails_with_location(evaluator):
    # The grid covers only half of the blocks: the second half keeps the NaN poison.
    src = variant("add_kernel[(triton.cdiv(n, BLOCK),)]", "add_kernel[(triton.cdiv(n, 2 * BLOCK),)]")
    ev = evaluator().evaluate(cand(src), stages=("correctness",))
    st = ev.stage("correctness")
    assert not st.ok and st.status == "failed"
    assert "never written" in st.summary
    assert "first at index (128,)" in st.feedback  # N=256, BLOCK=64: blocks 2 and 3 missing
    assert "got nan" in st.feedback


def test_kernel_right_only_for_multiples_of_its_block_fails(evaluator, tmp_path):
    # floor division in the grid: N=256 is a multiple of BLOCK=64 and passes, N=1000 loses its tail
    src = variant("add_kernel[(triton.cdiv(n, BLOCK),)]", "add_kernel[(max(1, n // BLOCK),)]")
    ev = evaluator().evaluate(cand(src), stages=("correctness",))
    st = ev.stage("correctness")
    assert not st.ok
    assert "N=1000" in st.summary and "never written" in st.summary
    assert "first at index (960,)" in st.feedback
    passed = [c for c in st.data["checks"] if c["ok"]]
    assert [c["shape"] for c in passed] == [{"N": 256}]


def test_wrong_padding_value_fails_with_largest_error(evaluator):
    # other=0.0 instead of -inf: exact when the row fills the block (N=64), wrong for N=50
    src = (DATA / "softmax_pad.py").read_text()
    ev = evaluator(DATA / "softmax_pad.py").evaluate(cand(src, "softmax_kernel"), stages=("correctness",))
    st = ev.stage("correctness")
    assert not st.ok
    assert "N=50" in st.summary and "outside tolerance" in st.summary
    assert re.search(r"worst at \(\d+, \d+\): got [-\d.e]+, expected [-\d.e]+", st.feedback), st.feedback
    assert st.data["checks"][0]["ok"] and st.data["checks"][0]["shape"] == {"M": 3, "N": 64}


def test_launcher_that_skips_the_kernel_fails(evaluator):
    ev = evaluator().evaluate(cand(in_launcher("return x + y")), stages=("correctness",))
    st = ev.stage("correctness")
    assert not st.ok and "no Triton kernel was launched" in st.summary


def test_candidate_cannot_replace_the_reference(evaluator):
    src = variant("x + y, mask=mask)", "x - y, mask=mask)")
    src = variant("    return x + y\n", "    return x - y\n", src)
    ev = evaluator().evaluate(cand(src), stages=("correctness",))
    assert not ev.stage("correctness").ok


def test_kernelbench_candidate_is_checked_against_model(evaluator):
    e = evaluator(DATA / "kb_task.py")
    ok = e.evaluate(Candidate(id="kb", source=(DATA / "kb_candidate.py").read_text(), kernel="ModelNew"),
                    stages=("correctness",))
    assert ok.stage("correctness").ok, ok.feedback()
    wrong = (DATA / "kb_candidate.py").read_text().replace("* 2 + b", "* 3 + b")
    bad = e.evaluate(Candidate(id="kb2", source=wrong, kernel="ModelNew"), stages=("correctness",))
    assert not bad.stage("correctness").ok


# --- the whole gate on the CPU ----------------------------------------------------------------

def test_full_gate_on_cpu_skips_timing_clearly(evaluator):
    ev = evaluator().evaluate(cand(ADD_SRC))
    assert [s.stage for s in ev.stages] == ["static", "compile", "correctness", "timing"]
    assert ev.ok and ev.score is None
    timing = ev.stage("timing")
    assert timing.status == "skipped" and "no GPU" in timing.summary
    assert "[timing: passed]" in ev.feedback()


def test_gate_stops_at_first_failure(evaluator):
    src = variant("tl.store(out_ptr + offs, x + y, mask=mask)",
                  "tl.store(out_ptr + offs, tl.dot(x, y), mask=mask)")
    ev = evaluator().evaluate(cand(src))
    assert ev.failed_stage == "compile"
    assert [s.stage for s in ev.stages] == ["static", "compile"]


# --- isolation --------------------------------------------------------------------------------

def test_segfaulting_candidate_is_reported_as_crashed(evaluator):
    ev = evaluator().evaluate(cand(in_launcher("import ctypes\nctypes.string_at(0)")),
                              stages=("correctness",))
    st = ev.stage("correctness")
    assert not st.ok and st.status == "crashed"
    assert "SIGSEGV" in st.summary


def test_candidate_that_loops_forever_times_out(evaluator):
    e = evaluator(timeouts={"correctness": 3, "startup": 60})
    t0 = time.monotonic()
    ev = e.evaluate(cand(in_launcher("while True:\n    pass")), stages=("correctness",))
    st = ev.stage("correctness")
    assert not st.ok and st.status == "timeout"
    assert "correctness" in st.summary
    assert time.monotonic() - t0 < 60


def test_candidate_that_allocates_without_bound_is_out_of_memory(evaluator):
    e = evaluator(memory_limit=3 << 30)
    ev = e.evaluate(cand(in_launcher("hog = []\nwhile True:\n    hog.append(bytearray(64 << 20))")),
                    stages=("correctness",))
    st = ev.stage("correctness")
    assert not st.ok and st.status == "oom", (st.status, st.summary, st.feedback)


def test_candidate_cannot_read_secrets_from_the_environment(evaluator, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-harness-test-secret")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-harness-test-secret")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIA-harness-test")
    monkeypatch.setenv("KS_HARMLESS_SETTING", "visible")
    code = ("import os\nraise RuntimeError('env: ' + repr(sorted((k, v) for k, v in os.environ.items()"
            " if 'harness' in v or k.startswith('KS_HARMLESS'))))")
    ev = evaluator().evaluate(cand(in_launcher(code)), stages=("correctness",))
    st = ev.stage("correctness")
    assert not st.ok and st.status == "failed"
    assert "KS_HARMLESS_SETTING" in st.feedback  # the candidate did run and report
    assert "harness-test" not in st.feedback


def test_caller_survives_candidate_exiting_the_worker(evaluator):
    ev = evaluator().evaluate(cand(in_launcher("import os\nos._exit(0)")), stages=("correctness",))
    st = ev.stage("correctness")
    assert not st.ok and st.status == "lost"


# --- cache ------------------------------------------------------------------------------------

def test_cache_returns_stored_result_and_misses_on_change(evaluator, tmp_path):
    events = []
    e = evaluator(use_cache=True, seed=1234, progress=events.append)
    first = e.evaluate(cand(ADD_SRC), stages=("compile",))
    assert first.ok and not any(ev["event"] == "cached" for ev in events)
    t0 = time.monotonic()
    again = e.evaluate(Candidate(id="c0002", source=ADD_SRC, kernel="add_kernel"), stages=("compile",))
    assert time.monotonic() - t0 < 1.0
    assert any(ev["event"] == "cached" for ev in events)
    assert again.candidate_id == "c0002" and again.stage("compile").data == first.stage("compile").data
    events.clear()
    e.evaluate(cand(ADD_SRC, launch={"num_warps": 2}), stages=("compile",))
    assert not any(ev["event"] == "cached" for ev in events)
    assert list((tmp_path / "cache" / "evals").rglob("*.json"))


def test_timeouts_are_not_cached(evaluator, tmp_path):
    e = evaluator(use_cache=True, timeouts={"correctness": 2})
    src = in_launcher("while True:\n    pass")
    e.evaluate(cand(src), stages=("correctness",))
    assert not list((tmp_path / "cache" / "evals").rglob("*.json"))


# --- command ----------------------------------------------------------------------------------

def test_bench_command_prints_table_and_writes_json(tmp_path, capsys, monkeypatch):
    from kernelsight.cli import main

    monkeypatch.setenv("KERNELSIGHT_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "result.json"
    rc = main(["bench", f"{ADD}::add_kernel", "--device", "cpu", "--json", str(out)])
    captured = capsys.readouterr()
    assert rc == 0, captured.out + captured.err
    assert "timing skipped" in captured.out
    assert "N=1000" in captured.out and "max err" in captured.out
    data = json.loads(out.read_text())
    assert data["spec"]["kernel"] == "add_kernel"
    assert [s["stage"] for s in data["evaluation"]["stages"]] == ["static", "compile", "correctness", "timing"]


def test_bench_command_reports_spec_error_with_location(tmp_path, capsys):
    from kernelsight.cli import main

    bad = tmp_path / "bad.py"
    bad.write_text(variant('"launcher": "add",', '"launcher": "nope",'))
    rc = main(["bench", str(bad), "--device", "cpu"])
    err = capsys.readouterr().err
    assert rc == 2 and f"{bad}:" in err


# --- timing arithmetic and the GPU table (no GPU needed) --------------------------------------

def test_roofline_percentage_is_of_the_attainable_rate():
    from kernelsight.agent.timing import roofline

    peaks = {"copy_gbs": 4000.0, "gemm_tflops": {"float16": 800.0}}
    compute = roofline(2e12, 1e9, 5.0, peaks, "float16")  # 400 TFLOP/s at 2000 FLOP/byte
    assert compute["bound"] == "compute" and compute["tflops"] == pytest.approx(400.0)
    assert compute["pct_peak"] == pytest.approx(50.0)
    memory = roofline(1e9, 4e9, 2.0, peaks, "float16")  # 2000 GB/s at 0.25 FLOP/byte
    assert memory["bound"] == "memory" and memory["gbs"] == pytest.approx(2000.0)
    assert memory["pct_peak"] == pytest.approx(50.0)
    no_formula = roofline(None, None, 1.0, peaks, "float16")
    assert no_formula["pct_peak"] is None and no_formula["tflops"] is None


def test_bench_table_lists_timed_shapes_with_speedup():
    from kernelsight.agent.records import Evaluation, StageResult
    from kernelsight.commands.bench import render_table

    row = {"shape": {"N": 16777216}, "dtype": "float32", "ms": 0.05, "ref_ms": 0.06, "speedup": 1.2,
           "tflops": 0.34, "gbs": 4027.0, "pct_peak": 93.6, "max_abs_err": 0.0}
    ev = Evaluation("c", stages=[StageResult("timing", True, data={"rows": [row]})])
    table = render_table(ev, load_spec(ADD))
    assert "N=16777216" in table and "1.20x" in table and "4027" in table and "94" in table


def test_spec_baseline_must_name_a_function(tmp_path):
    good = tmp_path / "good.py"
    good.write_text(variant('"flops": "N",', '"flops": "N",\n    "baseline": "reference",'))
    assert load_spec(good).baseline == "reference"
    bad = tmp_path / "bad.py"
    bad.write_text(variant('"flops": "N",', '"flops": "N",\n    "baseline": "fast_add",'))
    with pytest.raises(SpecError, match="fast_add"):
        load_spec(bad)
