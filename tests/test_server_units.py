"""Unit tests of the server's pure parts: pipeline equivalence and caching, position
conversion, the suppress edit, carried findings, settings."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kernelsight.analysis import analyze_source
from kernelsight.analysis.config import Config, ConfigError
from kernelsight.analysis.model import Finding, Span
from kernelsight.server.convert import LineIndex
from kernelsight.server.features.code_actions import suppress_edit
from kernelsight.server.pipeline import Cancelled, KernelCache, run_analysis
from kernelsight.server.session import DocState
from kernelsight.server.settings import Settings

from server_harness import EXAMPLES, many_kernels_text

FILES = sorted((EXAMPLES / "kernels").glob("*.py")) + sorted((EXAMPLES / "bugs").glob("*.py"))


def _key(f: Finding) -> tuple:
    return (f.code, f.span, f.message, f.severity, tuple(x.title for x in f.fixes))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_server_pipeline_reports_what_analyze_source_reports(path: Path):
    text = path.read_text(encoding="utf-8")
    expected = analyze_source(text, str(path), Config())
    got = run_analysis(text, str(path), Config(), fast=False, cache=KernelCache())
    assert [_key(f) for f in got.analysis.report.findings] == \
        [_key(f) for f in expected.report.findings]
    assert [(k.name, k.status) for k in got.analysis.report.kernels] == \
        [(k.name, k.status) for k in expected.report.kernels]


def test_editing_one_kernel_reanalyses_only_that_kernel():
    text = many_kernels_text(5)
    cache = KernelCache()
    first = run_analysis(text, "k.py", Config(), fast=False, cache=cache)
    assert (first.stats.analysed, first.stats.cached) == (5, 0)
    edited = text.replace("def add_kernel_3(x_ptr, y_ptr, z_ptr, N, BLOCK: tl.constexpr):",
                          "def add_kernel_3(x_ptr, y_ptr, z_ptr, N, BLOCK: tl.constexpr):  # e")
    assert edited != text
    second = run_analysis(edited, "k.py", Config(), fast=False, cache=cache)
    assert (second.stats.analysed, second.stats.cached) == (1, 4)
    other = run_analysis(edited, "k.py", Config(ignore=("KS101",)), fast=False, cache=cache)
    assert other.stats.analysed == 5, "settings are part of the cache key"


def test_a_set_cancel_event_stops_the_run():
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        run_analysis(many_kernels_text(3), "k.py", Config(), fast=False, cancel=cancel)


def test_positions_count_utf16_units_and_clamp():
    index = LineIndex("a = '😋é' + x\nshort\n", "utf-16")
    # code point column 7 (the closing quote) is UTF-16 unit 8 (the emoji takes 2) and
    # UTF-8 byte 11 (4 + 2 bytes for the emoji and the é)
    assert index.position(0, 7).character == 8
    assert index.offset_col(index.position(0, 7)) == (0, 7)
    assert LineIndex("a = '😋é' + x", "utf-8").position(0, 7).character == 11
    assert LineIndex("a = '😋é' + x", "utf-32").position(0, 7).character == 7
    assert index.position(1, 99).character == 5
    far = index.position(50, 3)
    assert (far.line, far.character) == (2, 0)


def test_suppress_merges_with_an_existing_noqa_list():
    index = LineIndex("x = 1  # noqa: KS101\ny = 2\nz = 3  # noqa\n", "utf-16")
    merged = suppress_edit("x = 1  # noqa: KS101", 0, "KS203", index)
    assert merged.new_text == ", KS203" and merged.range.start.character == 20
    fresh = suppress_edit("y = 2", 1, "KS203", index)
    assert fresh.new_text == "  # noqa: KS203" and fresh.range.start.character == 5
    assert suppress_edit("z = 3  # noqa", 2, "KS203", index) is None


def test_carried_findings_move_with_edits_and_vanish_when_touched():
    state = DocState(uri="file:///k.py", path="/k.py")
    state.carried_findings = [
        Finding("KS101", "above", Span(2, 0, 2, 5)),
        Finding("KS201", "edited", Span(5, 0, 5, 5)),
        Finding("KS301", "below", Span(9, 4, 9, 8)),
    ]
    state.apply_edit(5, 5, "new line\nanother\n")  # two lines inserted at line 5
    assert [(f.message, f.span.line) for f in state.carried_findings] == \
        [("above", 2), ("below", 11)]
    state.apply_edit(None, None, "whole text")
    assert state.carried_findings == []


def test_settings_merge_sources_and_name_the_bad_key():
    s = Settings().merged({"maxElements": 1024, "inlayHints": True,
                           "agent": {"model": "m", "budget": 3}}, "init")
    assert s.config.max_elements == 1024 and s.inlay_hints and s.agent_model == "m"
    assert s.agent_budget == 3
    with pytest.raises(ConfigError, match="debounce_ms"):
        Settings().merged({"debounceMs": "soon"}, "init")
    with pytest.raises(ConfigError, match="max_elements"):
        Settings().merged({"max-elements": "many"}, "init")


def test_initialize_keeps_every_capability_the_server_reads():
    """The server structures only part of the client's capabilities (server/protocol.py);
    each ``client_supports`` path in server/ must be in that part, or it would read False."""
    import re

    from kernelsight.server.protocol import READ_CAPABILITIES, keep_read_capabilities

    def camel(name: str) -> str:
        head, *rest = name.split("_")
        return head + "".join(p.title() for p in rest)

    server_dir = Path(__file__).resolve().parent.parent / "server"
    paths = {m for f in server_dir.rglob("*.py")
             for m in re.findall(r'client_supports\(\s*"([a-z_.]+)"', f.read_text())}
    assert len(paths) >= 8, paths
    for dotted in paths:
        raw: dict = {}
        node = raw
        parts = [camel(p) for p in dotted.split(".")]
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = True
        kept = keep_read_capabilities(raw)
        for p in parts:
            assert isinstance(kept, dict) and p in kept, f"{dotted} is not kept"
            kept = kept[p]
        assert kept is True
    # something the server never reads is dropped
    assert keep_read_capabilities({"textDocument": {"hover": {"contentFormat": []}}}) == {
        "textDocument": {}}
    assert "experimental" not in keep_read_capabilities({"experimental": {"x": 1}})
    assert READ_CAPABILITIES["general"] == {"positionEncodings": None}


def test_inferred_annotation_check_rejects_an_insertion_that_adds_a_finding():
    from test_server_features import BIAS_RELU
    from kernelsight.analysis.config import Config
    from kernelsight.server.features.code_actions import _verify
    lines = BIAS_RELU.split("\n")
    line = lines.index("    row = tl.program_id(0)")
    bad = ("    #@ tensor X = x_ptr[m: M, n: N] strides(stride_xm, 1)\n"
           "    #@ tensor Y = y_ptr[m: M, n: N] strides(stride_ym, 1)\n"
           "    #@ grid (M,)\n")
    assert not _verify(BIAS_RELU, "bias_relu.py", Config(), line, bad, "bias_relu_kernel")
    # a comment adds nothing: the same findings, shifted by one line, are no new finding
    assert _verify(BIAS_RELU, "bias_relu.py", Config(), line, "    # note\n", "bias_relu_kernel")


def test_benchmark_message_is_one_line_of_tier_statuses():
    from kernelsight.server.features.commands import bench_summary

    out = ["x.py::k on cpu (TRITON_INTERPRET=1)",
           "  static       passed   no errors (0 other finding(s), 9 invariant(s) proved)",
           "  compile      passed   cuda:90: 14 registers, 16 B shared, 4 warps, 1 stages",
           "  correctness  passed   10 check(s) passed; max abs error 0.000235",
           "  timing       skipped  timing skipped: no GPU on this machine",
           "", "shape   dtype   time ms", "M=7 N=100  float16  -"]
    msg = bench_summary("k", out)
    assert "\n" not in msg
    assert msg == ("Benchmark k: static passed, compile passed, correctness passed, "
                   "timing skipped (no GPU on this machine)")
    long = bench_summary("softmax_kernel", out[:4] + [
        "  timing       skipped  timing skipped: no GPU on this machine (static, compile and "
        "interpreter correctness ran)"])
    assert len(long) <= 120, long
    assert bench_summary("k", ["garbage"]) == "Benchmark k: finished (see the output log)"
