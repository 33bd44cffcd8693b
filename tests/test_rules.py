"""KS5xx Triton language rules: each with a case it must flag and one it must not, exact
spans, and quick fixes that remove the finding when applied."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelsight.analysis import analyze_source, rules
from kernelsight.analysis.config import Config
from kernelsight.analysis.model import Span

from bug_markers import bug_files, expected_findings
from fix_edits import apply_fix

ROOT = Path(__file__).resolve().parent.parent
FAST = Config(fast_only=True)
HEAD = "import triton\nimport triton.language as tl\n"


def findings(src: str, code_prefix: str = "KS5"):
    text = HEAD + textwrap.dedent(src)
    return [f for f in analyze_source(text, "t.py", FAST).report.findings
            if f.code.startswith(code_prefix)], text


def codes(src: str) -> list[tuple[str, int]]:
    fs, _ = findings(src)
    return [(f.code, f.span.line) for f in fs]


# --- KS501 -----------------------------------------------------------------------------------

def test_ks501_literal_arange_not_power_of_two():
    fs, text = findings("""
        @triton.jit
        def k(x_ptr):
            offs = tl.arange(0, 100)
            ok = tl.arange(0, 128) + tl.arange(4, 8)
        """)
    assert [(f.code, f.span) for f in fs] == [("KS501", Span(5, 11, 5, 28))]
    assert "100 elements" in fs[0].message and "use 128" in fs[0].message


def test_ks501_through_constexpr_default_autotune_config_and_launch():
    assert codes("""
        @triton.jit
        def k(x_ptr, BLOCK: tl.constexpr = 96):
            offs = tl.arange(0, BLOCK)
        """) == [("KS501", 5)]
    fs, _ = findings("""
        @triton.autotune(configs=[triton.Config({'BLOCK': 64}), triton.Config({'BLOCK': 48})],
                         key=[])
        @triton.jit
        def k(x_ptr, BLOCK: tl.constexpr):
            half = BLOCK // 2
            offs = tl.arange(0, half)
        """)
    assert [f.code for f in fs] == ["KS501"]
    assert "BLOCK=48" in fs[0].message and "autotune config #2" in fs[0].message
    fs, _ = findings("""
        @triton.jit
        def k(x_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
        def run(x):
            k[(1,)](x, BLOCK=128)
            k[(1,)](x, 40)
        """)
    assert [f.code for f in fs] == ["KS501"] and "launch at line 9" in fs[0].message


def test_ks501_not_reported_for_unknown_or_power_of_two_values():
    assert codes("""
        @triton.autotune(configs=[triton.Config({'BLOCK': 64}), triton.Config({'BLOCK': 256})],
                         key=[])
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr, OTHER: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            o2 = tl.arange(0, OTHER)
        def run(x, b):
            k[(1,)](x, 3, OTHER=b)
        """) == []


def test_ks501_inside_a_branch_on_a_constexpr_is_not_reported():
    assert codes("""
        @triton.jit
        def k(x_ptr, USE_ODD: tl.constexpr):
            if USE_ODD:
                offs = tl.arange(0, 3)
        """) == []


# --- KS502 / KS504 -------------------------------------------------------------------------

def test_ks502_runtime_arange_bound_with_fix():
    fs, text = findings("""
        @triton.jit
        def k(x_ptr, BLOCK):
            pid = tl.program_id(0)
            offs = tl.arange(0, BLOCK)
        """)
    [f] = fs
    assert (f.code, f.span) == ("KS502", Span(6, 24, 6, 29))
    [fix] = f.fixes
    fixed = apply_fix(text, fix)
    assert "def k(x_ptr, BLOCK: tl.constexpr):" in fixed
    assert findings(fixed.split("\n", 2)[2])[0] == []


def test_ks502_not_reported_for_constexpr_or_helper_parameters():
    assert codes("""
        @triton.jit
        def helper(x, BLOCK):
            return tl.arange(0, BLOCK)

        @triton.jit
        def k(x_ptr, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            offs = tl.arange(0, BLOCK) + helper(x_ptr, BLOCK)
        """) == []


def test_ks504_shape_parameter_not_constexpr_with_fix_replacing_annotation():
    fs, text = findings("""
        @triton.jit
        def k(x_ptr, N: int, BLOCK_M: tl.constexpr):
            pid = tl.program_id(0)
            acc = tl.zeros((BLOCK_M, N), dtype=tl.float32)
            for i in tl.static_range(N):
                pass
        """)
    assert [(f.code, f.span) for f in fs] == [("KS504", Span(6, 29, 6, 30)),
                                             ("KS504", Span(7, 29, 7, 30))]
    fixed = apply_fix(text, fs[0].fixes[0])
    assert "def k(x_ptr, N: tl.constexpr, BLOCK_M: tl.constexpr):" in fixed
    assert findings(fixed.split("\n", 2)[2])[0] == []


def test_ks504_not_reported_for_shape_of_a_tensor_or_constexpr():
    assert codes("""
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            x = tl.load(x_ptr + tl.arange(0, BLOCK))
            y = tl.full(x.shape, 0, tl.float32)
            z = tl.zeros((BLOCK,), dtype=tl.float32).reshape(BLOCK, 1)
        """) == []


# --- KS503 -----------------------------------------------------------------------------------

def test_ks503_dot_contraction_below_16():
    fs, _ = findings("""
        @triton.jit
        def k(a_ptr, b_ptr, K: tl.constexpr = 8):
            a = tl.load(a_ptr + tl.arange(0, 16)[:, None] * K + tl.arange(0, K)[None, :])
            b = tl.load(b_ptr + tl.arange(0, K)[:, None] * 16 + tl.arange(0, 16)[None, :])
            c = tl.dot(a, b)
        """)
    [f] = fs
    assert (f.code, f.span) == ("KS503", Span(7, 8, 7, 20))
    assert "K=8" in f.message and "[16, 8]" in f.message


def test_ks503_fp32_operands_need_only_8_and_unknown_shapes_are_silent():
    assert codes("""
        @triton.jit
        def k(a_ptr, b_ptr, n, K: tl.constexpr = 8):
            a = tl.zeros((16, K), dtype=tl.float32)
            b = tl.zeros((K, 16), dtype=tl.float32)
            c = tl.dot(a, b)
            d = tl.dot(tl.load(a_ptr), tl.load(b_ptr))
        """) == []
    assert codes("""
        @triton.jit
        def k(a_ptr, b_ptr, K: tl.constexpr = 32):
            a = tl.zeros((16, K), dtype=tl.float16)
            b = tl.zeros((K, 16), dtype=tl.float16)
            c = tl.dot(a, b)
        """) == []


# --- KS505 -----------------------------------------------------------------------------------

@pytest.mark.parametrize("stmt,label,span", [
    ("    try:\n        pass\n    except Exception:\n        pass\n", "try/except", (4, 4, 4, 7)),
    ("    with open('f') as f:\n        pass\n", "with statement", (4, 4, 4, 8)),
    ("    f = lambda q: q\n", "lambda", (4, 8, 4, 19)),
    ("    v = [i for i in range(4)]\n", "list comprehension over range", (4, 8, 4, 29)),
    ("    v = [i for i in x for j in x]\n", "nested list comprehension", (4, 8, 4, 33)),
    ("    v = {i for i in x}\n", "set comprehension", (4, 8, 4, 22)),
    ("    v = {i: i for i in x}\n", "dict comprehension", (4, 8, 4, 25)),
    ("    v = sum(i for i in x)\n", "generator expression", (4, 11, 4, 25)),
    ("    yield x\n", "yield", (4, 4, 4, 11)),
    ("    global G\n", "global statement", (4, 4, 4, 10)),
    ("    del x\n", "del statement", (4, 4, 4, 7)),
    ("    k(x)\n", "recursion", (4, 4, 4, 5)),
    ("    class C:\n        pass\n", "class definition", (4, 4, 4, 9)),
    ("    def inner():\n        pass\n", "nested function definition", (4, 4, 4, 7)),
    ("    raise ValueError('no')\n", "raise statement", (4, 4, 4, 9)),
    ("    for i in range(3):\n        break\n", "break", (5, 8, 5, 13)),
    ("    d = {'a': 1}\n", "dict literal", (4, 8, 4, 16)),
])
def test_ks505_names_the_construct(stmt, label, span):
    src = HEAD + "@triton.jit\ndef k(x):\n" + stmt
    fs = [f for f in analyze_source(src, "t.py", FAST).report.findings if f.code == "KS505"]
    assert len(fs) == 1, fs
    assert label in fs[0].message and fs[0].span == Span(*span)


def test_ks505_allows_what_triton_compiles():
    assert codes("""
        @triton.jit
        def k(x_ptr, t, N: tl.constexpr):
            v = [i * 2 for i in t]
            for i in tl.static_range(4):
                x = tl.load(x_ptr + i)
            if N == 0:
                raise ValueError("unreachable for N > 0")
            assert N >= 0
            msg = f"n={N}"
        """) == []


# --- KS506 / KS507 / KS508 -----------------------------------------------------------------

def test_ks506_print_with_fix_to_device_print():
    fs, text = findings("""
        @triton.jit
        def k(x_ptr):
            x = tl.load(x_ptr)
            print("x", x)
            print(x)
        """)
    assert [(f.code, f.span) for f in fs] == [("KS506", Span(6, 4, 6, 9)),
                                             ("KS506", Span(7, 4, 7, 9))]
    fixed = apply_fix(apply_fix(text, fs[1].fixes[0]), fs[0].fixes[0])
    assert 'tl.device_print("x", x)' in fixed and 'tl.device_print("", x)' in fixed
    assert findings(fixed.split("\n", 2)[2])[0] == []


def test_ks506_not_reported_for_device_print_or_outside_kernels():
    assert codes("""
        @triton.jit
        def k(x_ptr):
            tl.device_print("x", tl.load(x_ptr))
        def host():
            print("fine")
        """) == []


def test_ks507_program_id_axis():
    fs, _ = findings("""
        @triton.jit
        def k(x_ptr, AX: tl.constexpr = 4):
            a = tl.program_id(3)
            b = tl.num_programs(axis=AX)
            c = tl.program_id(2) + tl.program_id(0)
        """)
    assert [(f.code, f.span) for f in fs] == [("KS507", Span(5, 22, 5, 23)),
                                             ("KS507", Span(6, 29, 6, 31))]


def test_ks508_block_pointers_with_triton_3_9(monkeypatch):
    src = """
        @triton.jit
        def k(x_ptr, N):
            p = tl.make_block_ptr(x_ptr, (N,), (1,), (0,), (16,), (0,))
            p = tl.advance(p, (16,))

        @triton.jit
        def d(x_ptr, N):
            d = tl.make_tensor_descriptor(x_ptr, [N], [1], [16])

        @triton.jit
        def both(x_ptr, N, USE_TMA: tl.constexpr):
            if USE_TMA:
                d = tl.make_tensor_descriptor(x_ptr, [N], [1], [16])
            else:
                p = tl.make_block_ptr(x_ptr, (N,), (1,), (0,), (16,), (0,))
        """
    monkeypatch.setattr(rules, "installed_triton_version", lambda: (3, 9, 0))
    fs, _ = findings(src)
    assert [(f.code, f.span) for f in fs] == [("KS508", Span(5, 8, 5, 25)),
                                             ("KS508", Span(6, 8, 6, 18))]
    assert "3.9.0" in fs[0].message and "tl.make_tensor_descriptor" in fs[0].message
    monkeypatch.setattr(rules, "installed_triton_version", lambda: (3, 3, 1))
    fs, _ = findings(src)
    assert [(f.code, f.span.line) for f in fs] == [("KS508", 10)]
    assert "3.3.1" in fs[0].message and "tl.make_block_ptr" in fs[0].message
    monkeypatch.setattr(rules, "installed_triton_version", lambda: None)
    assert findings(src)[0] == []
    monkeypatch.setattr(rules, "installed_triton_version", lambda: (3, 6, 0))
    assert findings(src)[0] == []


def test_installed_triton_version_is_read_without_importing_triton():
    code = ("import sys\nfrom kernelsight.analysis.rules import installed_triton_version\n"
            "v = installed_triton_version()\nassert 'triton' not in sys.modules\nprint(v)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    from importlib import metadata
    try:
        expected = metadata.version("triton")
    except metadata.PackageNotFoundError:
        assert out.stdout.strip() == "None"
    else:
        assert out.stdout.strip().startswith("(" + expected.split(".")[0] + ",")


def test_config_select_filters_rule_findings():
    src = HEAD + "@triton.jit\ndef k(x):\n    print(x)\n    o = tl.arange(0, 3)\n"
    cfg = Config(fast_only=True, ignore=("KS506",))
    assert [f.code for f in analyze_source(src, "t.py", cfg).report.findings] == ["KS501"]


# --- the example corpus ----------------------------------------------------------------------

FAST_FAMILIES = ("KS5", "KS9")


FAST_BUGS = [p for p in bug_files()
             if any(c.startswith(FAST_FAMILIES) for c, _ in expected_findings(p))]


def test_some_bug_examples_are_fast_tier():
    assert len(FAST_BUGS) >= 10


@pytest.mark.parametrize("path", FAST_BUGS, ids=lambda p: p.name)
def test_bug_examples_report_their_fast_tier_marker(path):
    expected = [(c, line) for c, line in expected_findings(path) if c.startswith(FAST_FAMILIES)]
    text = path.read_text(encoding="utf-8")
    got = {(f.code, f.span.line + 1) for f in analyze_source(text, str(path), FAST).report.findings}
    for code, line in expected:
        assert (code, line) in got, f"{path.name}: {code} expected at line {line}, got {sorted(got)}"


def test_clean_examples_have_no_fast_tier_findings():
    for path in sorted((ROOT / "examples" / "kernels").glob("*.py")):
        report = analyze_source(path.read_text(encoding="utf-8"), str(path), FAST).report
        assert report.findings == [], (path.name, report.findings)


def test_an_internal_error_in_a_rule_becomes_ks911_on_that_kernel_only(monkeypatch):
    src = HEAD + ("@triton.jit\ndef bad(x):\n    o = tl.arange(0, 3)\n"
                  "@triton.jit\ndef good(x):\n    o = tl.arange(0, 3)\n")
    real = rules._KernelRules.run

    def run(self):
        if self.k.name == "bad":
            raise KeyError("boom")
        return real(self)

    monkeypatch.setattr(rules._KernelRules, "run", run)
    fs = analyze_source(src, "t.py", FAST).report.findings
    assert [(f.code, f.kernel) for f in fs] == [("KS911", "bad"), ("KS501", "good")]
    assert "internal error in the language rules: KeyError" in fs[0].message
