"""The tree-sitter front end: kernel discovery, parameters, autotune configs, launch sites and
positions, on well-formed and malformed files."""
from __future__ import annotations

import ast
import textwrap

from kernelsight.analysis import analyze_path, analyze_source
from kernelsight.analysis.config import Config
from kernelsight.analysis.frontend import ast_span, parse_file
from kernelsight.analysis.launches import bind_args
from kernelsight.analysis.model import Span


def _parse(src: str):
    return parse_file(textwrap.dedent(src), "t.py")


def test_finds_triton_jit_and_bare_jit_imported_from_triton():
    p = _parse("""
        import triton
        from triton import jit
        import triton.language as tl

        @triton.jit
        def a(x_ptr):
            pass

        @jit
        def b(x_ptr):
            pass

        @triton.jit(do_not_specialize=["n"])
        def c(x_ptr, n):
            pass

        def not_a_kernel(x):
            pass

        @other.jit
        def also_not(x):
            pass
        """)
    assert [k.name for k in p.kernels] == ["a", "b", "c"]
    assert p.imports["jit"] == "triton.jit"
    assert p.imports["tl"] == "triton.language"


def test_jit_decorator_through_module_alias():
    p = _parse("""
        import triton as tt
        @tt.jit
        def k(x_ptr):
            pass
        """)
    assert [k.name for k in p.kernels] == ["k"]


def test_stacked_autotune_and_heuristics_are_read():
    p = _parse("""
        import triton
        import triton.language as tl

        @triton.autotune(configs=[
                triton.Config({'BLOCK_M': 64, 'BLOCK_N': 32}, num_warps=4, num_stages=3),
                triton.Config({'BLOCK_M': 128, 'BLOCK_N': 64}, 8, 2),
            ], key=['M', 'N'])
        @triton.heuristics({'EVEN_N': lambda args: args['N'] % args['BLOCK_N'] == 0})
        @triton.jit
        def k(x_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr):
            pass
        """)
    [k] = p.kernels
    assert [(c.kwargs, c.num_warps, c.num_stages) for c in k.autotune] == [
        ({"BLOCK_M": 64, "BLOCK_N": 32}, 4, 3), ({"BLOCK_M": 128, "BLOCK_N": 64}, 8, 2)]
    sp = k.autotune[0].span
    assert (sp.line, sp.col) == (5, 8)
    assert p.lines[5][sp.col:sp.end_col] == (
        "triton.Config({'BLOCK_M': 64, 'BLOCK_N': 32}, num_warps=4, num_stages=3)")
    assert k.autotune_keys == ["M", "N"]
    assert list(k.heuristics) == ["EVEN_N"]
    assert isinstance(k.heuristics["EVEN_N"].tree, ast.Lambda)
    assert k.decorators[0].startswith("triton.autotune(")
    assert k.span.line == 4  # the definition starts at its first decorator


def test_autotune_configs_from_module_list_and_comprehension_are_enumerated():
    p = _parse("""
        import triton
        import triton.language as tl
        SIZES = [16, 32]
        CFGS = [triton.Config({'BLOCK': b}, num_warps=w) for b in SIZES for w in (2, 4)
                if b * w < 128]

        @triton.autotune(configs=CFGS + [triton.Config({'BLOCK': 256})], key=[])
        @triton.jit
        def k(x_ptr, BLOCK: tl.constexpr):
            pass
        """)
    [k] = p.kernels
    assert [(c.kwargs["BLOCK"], c.num_warps) for c in k.autotune] == [
        (16, 2), (16, 4), (32, 2), (256, None)]


def test_autotune_with_non_literal_configs_gives_no_configs():
    p = _parse("""
        import triton
        @triton.autotune(configs=get_configs(), key=["n"])
        @triton.jit
        def k(x_ptr, n):
            pass
        """)
    assert p.kernels[0].autotune == [] and p.kernels[0].autotune_keys == ["n"]


def test_triton_jit_call_assignment_makes_the_function_a_kernel():
    p = _parse("""
        import triton
        def add(x_ptr, n):
            pass
        add_kernel = triton.jit(add)

        def launch(x):
            add_kernel[(1,)](x, x.numel())
        """)
    assert [k.name for k in p.kernels] == ["add"]
    assert p.imports["add_kernel"] == "kernel:add"
    [site] = p.launches
    assert site.kernel == "add" and site.function == "launch"


def test_helper_called_from_kernel_is_marked_helper():
    p = _parse("""
        import triton
        import triton.language as tl

        @triton.jit
        def helper(x):
            return x * 2

        @triton.jit
        def kernel(x_ptr):
            x = tl.load(x_ptr)
            tl.store(x_ptr, helper(x))

        def run(x):
            kernel[(1,)](x)
        """)
    assert {k.name: k.is_helper for k in p.kernels} == {"helper": True, "kernel": False}


def test_nested_jit_function_inside_a_function_is_found():
    p = _parse("""
        import triton
        def make():
            @triton.jit
            def inner(x_ptr):
                pass
            return inner
        """)
    [k] = p.kernels
    assert k.name == "inner" and k.span.line == 3 and k.span.col == 4
    assert k.tree.lineno == 5 and k.tree.col_offset == 4


def test_params_constexpr_annotations_and_defaults():
    p = _parse("""
        import triton
        import triton.language as tl
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr = 128, Q: "tl.constexpr" = 4, R: int = 3):
            pass
        """)
    params = p.kernels[0].params
    assert [x.name for x in params] == ["x_ptr", "n", "BLOCK", "Q", "R"]
    assert [x.is_constexpr for x in params] == [False, False, True, True, False]
    assert params[2].default.text == "128" and params[2].default.tree.value == 128
    assert params[2].span == Span(4, 16, 4, 21)


def test_syntax_error_elsewhere_keeps_intact_kernels_and_reports_ks910():
    src = textwrap.dedent("""
        import triton
        import triton.language as tl

        @triton.jit
        def good(x_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, 100)

        @triton.jit
        def broken(x_ptr, N):
            x = (1 +
            pass

        def host(:
            pass
        """)
    a = analyze_source(src, "t.py", Config(fast_only=True))
    p = parse_file(src, "t.py")
    good = p.kernel("good")
    assert good is not None and good.tree is not None and not good.has_syntax_error
    codes = {(f.code, f.span.line) for f in a.report.findings}
    assert ("KS501", 6) in codes  # the intact kernel is still checked
    [broken] = [f for f in a.report.findings if f.code == "KS910" and f.kernel == "broken"]
    # the broken host function is reported too (its launch sites would be lost silently)
    [host] = [f for f in a.report.findings if f.code == "KS910" and f.kernel is None]
    assert host.span.line == 13 and "host code does not parse" in host.message
    assert p.kernel("broken").has_syntax_error and p.kernel("broken").tree is None
    assert broken.span == p.kernel("broken").name_span == Span(9, 4, 9, 10)
    assert broken.message == "kernel 'broken' not analysed: invalid syntax at line 11, column 5"
    assert [k.status for k in a.report.kernels] == ["skipped", "syntax-error"]


def test_crlf_line_endings_give_the_same_positions():
    lf = ("import triton\nimport triton.language as tl\n@triton.jit\n"
          "def k(x_ptr):\n    offs = tl.arange(0, 10)\n")
    a = analyze_source(lf, "t.py", Config(fast_only=True)).report.findings
    b = analyze_source(lf.replace("\n", "\r\n"), "t.py", Config(fast_only=True)).report.findings
    assert [(f.code, f.span) for f in a] == [(f.code, f.span) for f in b]
    assert [(f.code, f.span.line, f.span.col) for f in a] == [("KS501", 4, 11)]


def test_tab_indented_kernel_is_parsed_with_character_columns():
    src = "import triton\nimport triton.language as tl\n@triton.jit\ndef k(x_ptr):\n\toffs = tl.arange(0, 10)\n"
    [f] = analyze_source(src, "t.py", Config(fast_only=True)).report.findings
    assert (f.code, f.span) == ("KS501", Span(4, 8, 4, 24))


def test_non_ascii_text_before_an_expression_keeps_character_columns():
    src = ("import triton\nimport triton.language as tl\n@triton.jit\ndef k(x_ptr):\n"
           "    é = 1; offs = tl.arange(0, 10)  # ünïcode\n")
    p = parse_file(src, "t.py")
    call = next(n for n in ast.walk(p.kernels[0].tree) if isinstance(n, ast.Call))
    assert ast_span(call) == Span(4, 18, 4, 34)
    assert src.splitlines()[4][18:34] == "tl.arange(0, 10)"


def test_non_utf8_bytes_are_replaced_not_fatal(tmp_path):
    f = tmp_path / "latin.py"
    f.write_bytes(b"# caf\xe9\nimport triton\nimport triton.language as tl\n@triton.jit\n"
                  b"def k(x_ptr):\n    offs = tl.arange(0, 10)\n")
    a = analyze_path(f, Config(fast_only=True))
    assert [(x.code, x.span.line) for x in a.report.findings] == [("KS501", 5)]


def test_launch_sites_grid_forms_and_argument_sources():
    p = _parse("""
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def k(x_ptr, y_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
            pass

        def f(x, y):
            out = torch.empty_like(x)
            n_rows, n_cols = x.shape
            grid = lambda META: (triton.cdiv(n_cols, META['BLOCK']), n_rows)
            k[grid](x, y, out, x.numel(), x.stride(0), BLOCK=1024, num_warps=4)
            g2 = (n_rows,)
            k[g2](x, y, out, n_cols, y.stride(1), 64)
            k[(n_rows, 4)](x, y, out, x.shape[1], x.size(0), BLOCK=128)
            k[lambda meta: (triton.cdiv(n_rows, meta["BLOCK"]),)](x, y, out, n_rows, 1, 32)

            def grid3(META):
                return (triton.cdiv(n_rows, META["BLOCK"]),)
            k[grid3](x, y, out, 7, 1, 32)
        """)
    a, b, c, d, e = p.launches
    assert [g.text for g in a.grid] == ["triton.cdiv(n_cols, BLOCK)", "n_rows"]
    assert a.grid[0].tree is not None
    assert [x.source for x in a.args] == [("tensor", "x"), ("tensor", "y"), ("tensor", "out"),
                                          ("numel", "x"), ("stride", "x", 0), ("int", 1024),
                                          ("int", 4)]
    assert [g.text for g in b.grid] == ["n_rows"]
    assert b.args[3].source == ("shape", "x", 1) and b.args[4].source == ("stride", "y", 1)
    assert [g.text for g in c.grid] == ["n_rows", "4"]
    assert c.args[3].source == ("shape", "x", 1) and c.args[4].source == ("shape", "x", 0)
    assert [g.text for g in d.grid] == ['triton.cdiv(n_rows, BLOCK)']
    assert [g.text for g in e.grid] == ['triton.cdiv(n_rows, BLOCK)']
    bound = bind_args(a, p.kernel("k"))
    assert set(bound) == {"x_ptr", "y_ptr", "out_ptr", "n", "stride", "BLOCK"}
    assert bound["BLOCK"].source == ("int", 1024)
    assert bind_args(b, p.kernel("k"))["BLOCK"].source == ("int", 64)
    assert a.span.line == 13 and a.function == "f"


def test_launch_with_unknown_grid_has_no_grid_but_still_args():
    p = _parse("""
        import triton
        @triton.jit
        def k(x_ptr):
            pass
        def f(x, make_grid):
            k[make_grid(x)](x)
        """)
    [site] = p.launches
    assert site.grid is None and site.args[0].source == ("tensor", "x")


# --- robustness ---------------------------------------------------------------------------------

import pytest  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_PIECES = ["@triton.jit\n", "def k(", "x_ptr", ", ", "BLOCK: tl.constexpr", "):\n", "    ",
           "offs = tl.arange(0, ", "100", ")", "\n", "#@ tensor A = x_ptr[m: M", "]",
           " strides(", "#@ grid (", "#@ assume ", " implies ", "#@ computes C[m] from ",
           "#@ assert a.k == ", "#@     ", "k[(1,)](x, ", "lambda META: (", "META['B']",
           "triton.Config({'B': 3})", "@triton.autotune(configs=[", "], key=[])\n", "\t",
           "\r\n", "é", "\x00", "(((((", ")))))", "'''", '"', "try:\n", "print(", ":",
           "import triton\n", "import triton.language as tl\n", "tl.dot(a, b)", "[", "{"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PIECES), max_size=60))
def test_any_token_soup_is_analysed_without_raising(pieces):
    text = "".join(pieces)
    report = analyze_source(text, "fuzz.py", Config(fast_only=True)).report
    for f in report.findings:
        assert f.span.line <= f.span.end_line


@pytest.mark.parametrize("text", [
    "import triton\n@triton.jit\ndef k(x):\n    y = " + "(" * 5000 + "1" + ")" * 5000 + "\n",
    "import triton\n@triton.jit\ndef k(x):\n    #@ assume " + "(" * 3000 + "1" + ")" * 3000 + "\n",
    "import triton\n@triton.jit\ndef k(x):\n    y = '\x00'\n",
    "\ufeffimport triton\n@triton.jit\ndef k(x):\n    pass\n",
    "import triton\n@triton.jit\ndef k(x):\n    y = 1 +" + " 1 +" * 20000 + " 1\n",
])
def test_pathological_inputs_do_not_crash(text):
    analyze_source(text, "p.py", Config(fast_only=True))


def test_launch_argument_through_layout_method_is_the_same_tensor():
    p = _parse("""
        import triton
        @triton.jit
        def k(x_ptr, n):
            pass
        def f(x):
            k[(1,)](x.contiguous(), x.size(-1))
        """)
    [site] = p.launches
    assert [a.source for a in site.args] == [("tensor", "x"), ("shape", "x", -1)]


def test_lone_cr_and_mixed_line_endings_are_line_breaks_as_in_python():
    lines = ["import triton", "import triton.language as tl", "@triton.jit", "def k(x_ptr):",
             "    offs = tl.arange(0, 10)", ""]
    for ends in (["\r"], ["\n", "\r\n", "\r"]):
        text = "".join(line + ends[i % len(ends)] for i, line in enumerate(lines))
        [f] = analyze_source(text, "t.py", Config(fast_only=True)).report.findings
        assert (f.code, f.span) == ("KS501", Span(4, 11, 4, 27))
