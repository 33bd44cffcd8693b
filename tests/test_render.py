"""Formulas in findings, related lines, counterexample notes and hovers read like the kernel's
code: opaque terms by the variable the kernel bound them to, else as Python expressions
(``(pid % GROUP_M)``, ``cdiv(N, BLOCK_N)``), never in the engine's ``{...}`` notation, and cut
only between whole terms (see analysis/engine/render.py)."""
from __future__ import annotations

import textwrap
from pathlib import Path

import re

from hypothesis import given, settings, strategies as st

from kernelsight.analysis import analyze_path, frontend
from kernelsight.analysis.config import Config
from kernelsight.analysis.engine import _analyze
from kernelsight.analysis.engine.render import FORMULA_CHARS, elide

ROOT = Path(__file__).resolve().parent.parent
BUGS = sorted((ROOT / "examples" / "bugs").glob("*.py"))
CFG = Config(kernel_budget_ms=60000, solver_timeout_ms=5000)
HEADER = "import triton\nimport triton.language as tl\n\n\n"
PY_LIST = re.compile(r"=\[-?\d+(, -?\d+)*\]")  # `=[1]`; an interval `=[0, 64)` is fine


def analyse(body: str):
    parsed = frontend.parse_file(HEADER + textwrap.dedent(body), "k.py")
    k = next(k for k in parsed.kernels if not k.is_helper)
    return _analyze(k, parsed, CFG)


def hover(result, name: str) -> str:
    return next(h.title for h in result.hovers if h.title.startswith(name + ":"))


def balanced(text: str) -> bool:
    stack = []
    for ch in text:
        if ch in "([{":
            stack.append("([{".index(ch))
        elif ch in ")]}":
            if not stack or stack.pop() != ")]}".index(ch):
                return False
    return not stack


# ------------------------------------------------------------------ all example findings
def _texts(path: Path):
    a = analyze_path(path, Config())
    for f in a.report.findings:
        yield f"{f.code} message", f.message
        for r in f.related:
            yield f"{f.code} related", r.message
        if f.counterexample is not None:
            yield f"{f.code} counterexample", f.counterexample.describe()
            for n in f.counterexample.notes:
                yield f"{f.code} note", n
    for h in a.hovers:
        yield "hover", h.title
        for t in h.tags:
            yield "hover tag", t
        for _, t in h.invariants:
            yield "hover invariant", t


def test_no_engine_braces_or_python_reprs_in_any_example_finding_or_hover():
    bad = []
    for path in BUGS:
        for where, text in _texts(path):
            if "{" in text or "}" in text or "either(" in text or PY_LIST.search(text):
                bad.append(f"{path.name} {where}: {text}")
    assert not bad, "\n".join(bad[:10])


def test_every_example_formula_keeps_its_brackets_balanced():
    bad = [f"{p.name} {w}: {t}" for p in BUGS for w, t in _texts(p)
           if "…" in t and not balanced(t.replace("`", ""))]
    assert not bad, "\n".join(bad[:10])


# ------------------------------------------------------------------ names the kernel bound
def test_transposed_store_tag_reads_with_the_kernels_names():
    a = analyze_path(ROOT / "examples" / "bugs" / "matmul_transposed_store.py", Config())
    (f,) = [f for f in a.report.findings if f.code == "KS203"]
    tag = next(r.message for r in f.related if "value tagged" in r.message)
    assert tag == "value tagged A.m = BLOCK_M*pid_m + i"
    titles = {h.title.split(":")[0]: h.title for h in a.hovers}
    # each binding's hover shows its definition over the names bound before it
    assert titles["group_id"] == "group_id: int32 scalar = (pid // num_pid_in_group)"
    assert titles["num_pid_n"] == "num_pid_n: int32 scalar = cdiv(N, BLOCK_N)"
    assert titles["pid_m"] == ("pid_m: int32 scalar = first_pid_m + "
                               "((pid % num_pid_in_group) % group_size_m)")
    assert titles["group_size_m"] == \
        "group_size_m: int32 scalar = min(num_pid_m - first_pid_m, GROUP_M)"


def test_opaque_term_prints_as_the_variable_bound_to_it_and_first_binding_wins():
    r = analyse("""
        @triton.jit
        def k(x_ptr, N, G: tl.constexpr = 4, BLOCK: tl.constexpr = 64):
            pid = tl.program_id(0)
            g = pid // G
            r = pid % G
            a = g
            g = pid // N
            offs = g * BLOCK + r + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 0.0, mask=offs < N)
        """)
    # `g` names pid // G; its rebinding to pid // N neither renames that term nor takes the
    # name `g` too (two terms would print alike)
    assert hover(r, "r") == "r: int32 scalar = (pid % G)"
    assert hover(r, "a") == "a: int32 scalar = g"
    offs = hover(r, "offs")
    assert offs.endswith("= r + BLOCK*(pid // N) + i"), offs


def test_program_id_prints_as_its_variable_or_as_written():
    named = analyse("""
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr = 64):
            pid = tl.program_id(0)
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 0.0, mask=offs < n)
        """)
    assert hover(named, "offs").endswith("= BLOCK*pid + i")
    unnamed = analyse("""
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr = 64):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 0.0, mask=offs < n)
        """)
    assert hover(unnamed, "offs").endswith("= BLOCK*tl.program_id(0) + i")


def test_helper_locals_do_not_name_the_callers_terms():
    r = analyse("""
        @triton.jit
        def split(pid, G: tl.constexpr):
            q = pid // G
            return q

        @triton.jit
        def k(x_ptr, n, G: tl.constexpr = 4, BLOCK: tl.constexpr = 64):
            pid = tl.program_id(0)
            offs = split(pid, G) * BLOCK + tl.arange(0, BLOCK)
            row = split(pid, G)
            tl.store(x_ptr + offs, 0.0, mask=offs < n)
        """)
    # the helper's `q` is not a name of the kernel; the kernel's own `row` is
    assert hover(r, "offs").endswith("= BLOCK*(pid // G) + i")
    assert hover(r, "row") == "row: int32 scalar = (pid // G)"


def test_value_merged_from_two_branches_is_named_after_the_if():
    r = analyse("""
        @triton.jit
        def k(x_ptr, n, num_m, G: tl.constexpr = 8, BLOCK: tl.constexpr = 64):
            pid = tl.program_id(0)
            if pid < num_m:
                pid_m = pid // G
            else:
                pid_m = pid % G
            offs = pid_m * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 0.0, mask=offs < n)
        """)
    assert hover(r, "offs").endswith("= BLOCK*pid_m + i")
    # the branch's own binding does not claim the name: it holds on one path only
    assert hover(r, "pid_m") in ("pid_m: int32 scalar = (pid // G)",
                                 "pid_m: int32 scalar = (pid % G)")


def test_unnamed_where_prints_as_a_conditional_expression():
    r = analyse("""
        @triton.jit
        def k(x_ptr, n, num_m, G: tl.constexpr = 8, BLOCK: tl.constexpr = 64):
            pid = tl.program_id(0)
            offs = tl.where(pid < num_m, pid // G, pid % G) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 0.0, mask=offs < n)
        """)
    assert hover(r, "offs").endswith("= BLOCK*((pid // G) if … else (pid % G)) + i")


# ------------------------------------------------------------------ elision
def test_elision_drops_whole_middle_terms_of_a_sum():
    text = "BLOCK_M*group_id + " + " + ".join(
        f"((pid % GROUP_M{k}) // cdiv(N, BLOCK_N{k}))" for k in range(6)) + " + i"
    out = elide(text, 60)
    assert out.startswith("BLOCK_M*group_id + ") and out.endswith(" + … + i"), out
    assert len(out) <= 60 and balanced(out)


def test_elision_keeps_the_comparison_of_a_mask():
    lhs = " + ".join(f"a{k}*stride{k}" for k in range(30))
    out = elide(f"({lhs} < M) & (j < N)", 80)
    assert " < M) & (j < N)" in out and balanced(out) and len(out) <= 80, out


_atom = st.sampled_from(["pid", "BLOCK_M", "i", "N", "GROUP_M", "stride_am", "k"])


def _wrap(children):
    return st.one_of(
        st.lists(children, min_size=2, max_size=6).map(" + ".join),
        st.tuples(children, children).map(lambda t: f"({t[0]} // {t[1]})"),
        st.tuples(children, children).map(lambda t: f"min({t[0]}, {t[1]})"),
        st.tuples(children, children).map(lambda t: f"{t[0]}*({t[1]})"),
        st.tuples(children, children).map(lambda t: f"({t[0]} < {t[1]}) & (j < N)"),
        st.tuples(children, children).map(lambda t: f"A[{t[0]}, {t[1]}]"),
    )


@settings(max_examples=300, deadline=None)
@given(st.recursive(_atom, _wrap, max_leaves=80), st.integers(min_value=1, max_value=160))
def test_elision_fits_and_never_leaves_a_bracket_open(text, limit):
    out = elide(text, limit)
    assert len(out) <= limit
    assert balanced(out), (text, out)
    if len(text) <= limit:
        assert out == text


def test_elision_default_cap_is_the_message_cap():
    assert len(elide("x + " * 100 + "y")) <= FORMULA_CHARS


# ------------------------------------------------------------------ counterexample text
def test_race_counterexample_names_the_other_program_and_lane_like_the_first():
    a = analyze_path(ROOT / "examples" / "bugs" / "vector_add_overlap_race.py", Config())
    (f,) = [f for f in a.report.findings if f.code == "KS302"]
    text = f.counterexample.describe()
    other = f.counterexample.values["other program_id"]
    assert f"  other program_id={tuple(other)}" in text
    assert "other element i=" in text and "{'" not in text


def test_footprint_counterexample_gives_the_value_of_the_annotations_function():
    a = analyze_path(ROOT / "examples" / "bugs" / "moe_gemm_wrong_expert.py", Config())
    (f,) = [f for f in a.report.findings if f.code == "KS304"]
    cex = f.counterexample
    assert "?" not in cex.describe() and not any("?" in n for n in cex.notes)
    want = cex.values.get("expert(s) (computes)")
    if want is not None:  # the witness fixed expert() at this slot
        assert isinstance(want, int) and f"expert(s) = {want}" in " ".join(cex.notes)
        assert want != cex.values["W.e read"]
    else:
        assert "leaves open" in " ".join(cex.notes)
