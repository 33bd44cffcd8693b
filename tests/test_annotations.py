"""The `#@` annotation parser: every directive of the contract, continuation lines, free size
symbols, and each KS9xx error with its exact range."""
from __future__ import annotations

import ast

from kernelsight.analysis.frontend import parse_file
from kernelsight.analysis.model import Span

HEAD = "import triton\nimport triton.language as tl\n"


def kernel_src(directives: str, body: str = "    pass\n", above: str = "") -> str:
    """A file whose kernel (line 3 is `@triton.jit` when `above` is empty) carries
    `directives` as the first lines of its body."""
    params = ("a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, "
              "BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr")
    return (HEAD + above + "@triton.jit\n" + f"def k({params}):\n" + directives + body)


def parse(src: str):
    p = parse_file(src, "t.py")
    return p, p.kernels[0].annotations if p.kernels else None


def errors(p) -> list[tuple[str, Span]]:
    return [(f.code, f.span) for f in p.findings]


def test_tensor_directive_with_strides_and_exact_spans():
    line = "    #@ tensor A = a_ptr[m: M, k: K] strides(stride_am, stride_ak)\n"
    p, ann = parse(kernel_src(line))
    assert errors(p) == []
    a = ann.tensors["A"]
    assert (a.name, a.ptr, [d.name for d in a.dims]) == ("A", "a_ptr", ["m", "k"])
    assert [d.size.text for d in a.dims] == ["M", "K"]
    assert [s.text for s in a.strides] == ["stride_am", "stride_ak"]
    row = 4
    text = p.lines[row]
    assert a.span == Span(row, 4, row, len(text))
    size_m = a.dims[0].size.span
    assert text[size_m.col:size_m.end_col] == "M" and size_m.col == text.index("m: M") + 3
    st = a.strides[1].span
    assert text[st.col:st.end_col] == "stride_ak"


def test_tensor_without_strides_and_literal_stride():
    src = kernel_src("    #@ tensor A = a_ptr[m: M, k: K]\n"
                     "    #@ tensor B = b_ptr[k: K, n: N] strides(stride_bk, 1)\n")
    p, ann = parse(src)
    assert errors(p) == []
    assert ann.tensors["A"].strides is None
    assert isinstance(ann.tensors["B"].strides[1].tree, ast.Constant)


def test_directives_directly_above_the_decorator_attach_to_the_kernel():
    above = "# a normal comment\n#@ tensor A = a_ptr[m: M]\n#@ grid (cdiv(M, BLOCK_M),)\n"
    p, ann = parse(kernel_src("", above=above))
    assert errors(p) == []
    assert list(ann.tensors) == ["A"]
    assert [ax.text for ax in ann.grid.axes] == ["cdiv(M, BLOCK_M)"]


def test_directive_separated_by_a_blank_line_is_stray_ks907():
    src = HEAD + "#@ grid (N,)\n\n@triton.jit\ndef k(N):\n    pass\n"
    p, _ = parse(src)
    assert errors(p) == [("KS907", Span(2, 0, 2, 12))]


def test_unknown_word_outside_kernels_and_commented_out_decorators_are_ignored():
    src = (HEAD + "#@title My notebook cell\n#@triton.jit\ndef f():\n    pass\n"
           "@triton.jit\ndef k(N):\n    #@triton.autotune(configs=[])\n    pass\n")
    p, _ = parse(src)
    assert errors(p) == []


def test_grid_forms():
    for text, axes in [("(n,)", ["n"]), ("(a, b, c)", ["a", "b", "c"]),
                       ("(cdiv(M, BLOCK_M) * cdiv(N, 64), 1)", ["cdiv(M, BLOCK_M) * cdiv(N, 64)", "1"]),
                       ("n", ["n"])]:
        p, ann = parse(kernel_src(f"    #@ grid {text}\n"))
        assert errors(p) == [], text
        assert [a.text for a in ann.grid.axes] == axes


def test_grid_with_four_axes_is_ks904_on_the_extra_axes():
    p, ann = parse(kernel_src("    #@ grid (M, N, K, 2)\n"))
    assert errors(p) == [("KS904", Span(4, 22, 4, 23))]
    assert ann.grid is None
    p, _ = parse(kernel_src("    #@ grid (M, N, K, 2, 3)\n"))
    assert errors(p) == [("KS904", Span(4, 22, 4, 26))]


def test_assume_facts_split_at_top_level_commas_and_implies_rewritten():
    src = kernel_src("    #@ assume 1 <= N <= BLOCK_K, K % 16 == 0, min(M, N) > 0,\n"
                     "    #@     TokenIds[p] < nv implies ExpertIds[p // BLOCK_M] == expert(TokenIds[p])\n"
                     "    #@ tensor TokenIds = a_ptr[p: M]\n"
                     "    #@ tensor ExpertIds = b_ptr[blk: cdiv(M, BLOCK_M)]\n")
    p, ann = parse(src)
    assert errors(p) == []
    [d] = ann.assumes
    assert [e.text for e in d.exprs] == [
        "1 <= N <= BLOCK_K", "K % 16 == 0", "min(M, N) > 0",
        "TokenIds[p] < nv implies ExpertIds[p // BLOCK_M] == expert(TokenIds[p])"]
    imp = d.exprs[3]
    assert isinstance(imp.tree, ast.Call) and imp.tree.func.id == "implies"
    left, right = imp.tree.args
    assert isinstance(left, ast.Compare) and isinstance(right, ast.Compare)
    # the fact is on the continuation line: its span and its sub-expressions map there
    assert imp.span.line == 5 and imp.span.col == p.lines[5].index("TokenIds")
    rs = imp.span_of(right)
    assert p.lines[5][rs.col:rs.end_col] == "ExpertIds[p // BLOCK_M] == expert(TokenIds[p])"
    assert d.span == Span(4, 4, 5, len(p.lines[5]))
    assert d.raw.startswith("1 <= N") and "TokenIds[p] < nv" in d.raw


def test_continuation_needs_deeper_indentation():
    src = kernel_src("    #@ assume M > 0,\n    #@ assume N > 0\n")
    p, ann = parse(src)
    assert errors(p) == [("KS901", Span(4, 20, 4, 20))]  # empty fact after the trailing comma


def test_computes_with_whole_dims_ranges_and_functions():
    src = kernel_src("    #@ tensor A = a_ptr[m: M, k: K]\n"
                     "    #@ tensor B = b_ptr[k: K, n: N]\n"
                     "    #@ tensor C = c_ptr[m: M, n: N]\n"
                     "    #@ computes C[m, n] from A[m, :], B[0:K, expert(n)]\n")
    p, ann = parse(src)
    assert errors(p) == []
    [c] = ann.computes
    assert c.out.tensor == "C" and [i.text for i in c.out.indices] == ["m", "n"]
    assert [r.tensor for r in c.inputs] == ["A", "B"]
    assert [i.text for i in c.inputs[0].indices] == ["m", ":"]
    assert isinstance(c.inputs[0].indices[1].tree, ast.Slice)
    rng = c.inputs[1].indices[0]
    assert rng.text == "0:K" and isinstance(rng.tree, ast.Slice)
    assert p.lines[7][rng.span.col:rng.span.end_col] == "0:K"


def test_assert_tag_partners_bench():
    body = ("    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)\n"
            "    m_i = acc\n    l_i = acc\n    offs_m = tl.arange(0, BLOCK_M)\n")
    src = kernel_src("    #@ tensor A = a_ptr[m: M, k: K]\n"
                     "    #@ tensor B = b_ptr[k: K, n: N]\n"
                     "    #@ tag m_i.q = offs_m\n"
                     "    #@ assert acc.m == m_i.q\n"
                     "    #@ partners m_i: acc, l_i\n"
                     "    #@ bench BENCH\n", body=body)
    p, ann = parse(src)
    assert errors(p) == []
    [t] = ann.tags
    assert [e.text for e in t.exprs] == ["m_i.q", "offs_m"]
    [a] = ann.asserts
    assert a.line == 7 and a.exprs[0].text == "acc.m == m_i.q"
    [pr] = ann.partners
    assert [e.text for e in pr.exprs] == ["m_i", "acc", "l_i"]
    assert p.lines[8][pr.exprs[2].span.col:pr.exprs[2].span.end_col] == "l_i"
    [b] = ann.bench
    assert b.raw == "BENCH" and b.exprs[0].text == "BENCH"


def test_free_size_symbols_are_allowed():
    src = kernel_src("    #@ tensor X = a_ptr[r: n_rows, c: N]\n"
                     "    #@ grid (n_rows,)\n    #@ assume n_rows >= 2\n"
                     "    #@ assert n_rows > 0\n")
    p, ann = parse(src)
    assert errors(p) == []
    assert ann.tensors["X"].dims[0].size.text == "n_rows"


def test_ks901_malformed_tensor_points_at_the_problem():
    cases = {
        "    #@ tensor A = a_ptr[m M, k: K]\n": ("expected 'dim: SIZE'", Span(4, 25, 4, 25)),
        "    #@ tensor A a_ptr[m: M]\n": ("expected '=' after tensor name 'A'",
                                          Span(4, 16, 4, 21)),
        "    #@ tensor = a_ptr[m: M]\n": ("expected a tensor name", Span(4, 14, 4, 15)),
        "    #@ tensor A = a_ptr(m: M)\n": ("expected '[' after pointer 'a_ptr'",
                                            Span(4, 23, 4, 24)),
        "    #@ tensor A = a_ptr[m: M\n": ("unclosed '['", Span(4, 23, 4, 24)),
        "    #@ tensor A = a_ptr[m: M] strides(stride_am, 1)\n": (
            "strides(...) gives 2 stride(s) for 1 dimension(s)", Span(4, 30, 4, 51)),
        "    #@ tensor A = a_ptr[m: M] stride(1)\n": ("expected 'strides(...)'",
                                                      Span(4, 30, 4, 39)),
        "    #@ tensor A = a_ptr[m: M +]\n": ("expected a size expression after 'm:'",
                                              Span(4, 27, 4, 30)),
        "    #@ tensor A = a_ptr[m: M, m: K]\n": ("dimension 'm' appears twice",
                                                  Span(4, 30, 4, 31)),
    }
    for line, (msg, span) in cases.items():
        p, ann = parse(kernel_src(line))
        [f] = p.findings
        assert (f.code, f.span) == ("KS901", span), line
        assert msg in f.message, (line, f.message)
        assert ann.tensors == {}


def test_ks901_other_directives():
    cases = [
        ("    #@ computes C[m] A[m]\n", "missing 'from'"),
        ("    #@ computes C[m] from\n", "expected at least one input"),
        ("    #@ tag m_i = 3\n", "expected 'VALUE.dim' before '='"),
        ("    #@ tag m_i.q\n", "expected 'VALUE.dim = EXPR'"),
        ("    #@ partners m_i acc\n", "expected 'LEAD: PARTNER, ...'"),
        ("    #@ assert\n", "expected a condition after 'assert'"),
        ("    #@ assume x implies\n", "expected a consequence after 'implies'"),
        ("    #@ grid\n", "expected the grid's axes"),
        ("    #@\n", "expected a directive word"),
        ("    #@ grid (M,)\n    #@ grid (N,)\n", "grid is already declared at line 5"),
    ]
    for line, msg in cases:
        p, _ = parse(kernel_src(line, body="    m_i = 1\n    acc = 2\n"))
        assert [f.code for f in p.findings] == ["KS901"], (line, p.findings)
        assert msg in p.findings[0].message, (line, p.findings[0].message)


def test_ks902_unknown_pointer_on_the_pointer_name():
    p, ann = parse(kernel_src("    #@ tensor A = aptr[m: M]\n"))
    [f] = p.findings
    assert (f.code, f.span) == ("KS902", Span(4, 18, 4, 22))
    assert "'aptr' is not a parameter of kernel 'k'" in f.message
    assert ann.tensors == {}


def test_ks903_unknown_dimension_tensor_and_value():
    body = "    a = tl.load(a_ptr)\n    b = a\n"
    src = kernel_src("    #@ tensor A = a_ptr[m: M, k: K]\n"
                     "    #@ assert a.j == b.k\n"
                     "    #@ computes Z[m] from A[m, :]\n"
                     "    #@ assert zz > 0\n"
                     "    #@ partners a: nothere\n"
                     "    #@ tag q.k = a\n", body=body)
    p, _ = parse(src)
    got = {(f.code, f.span) for f in p.findings}
    assert got == {("KS903", Span(5, 16, 5, 17)),   # .j
                   ("KS903", Span(6, 16, 6, 17)),   # Z
                   ("KS903", Span(7, 14, 7, 16)),   # zz
                   ("KS903", Span(8, 19, 8, 26)),   # nothere
                   ("KS903", Span(9, 11, 9, 12))}   # q
    msgs = " | ".join(f.message for f in p.findings)
    assert "unknown dimension 'j'" in msgs and "unknown tensor 'Z'" in msgs
    assert "unknown value 'zz'" in msgs


def test_ks903_index_count_mismatch_is_malformed():
    src = kernel_src("    #@ tensor A = a_ptr[m: M, k: K]\n"
                     "    #@ tensor C = c_ptr[m: M]\n"
                     "    #@ computes C[m, n] from A[m, :]\n")
    p, _ = parse(src)
    assert [(f.code, f.message) for f in p.findings] == [
        ("KS901", "tensor 'C' has 1 dimension(s); 2 index(es) given")]


def test_ks905_duplicate_tensor_on_the_second_name():
    src = kernel_src("    #@ tensor A = a_ptr[m: M]\n    #@ tensor A = b_ptr[m: M]\n")
    p, ann = parse(src)
    assert errors(p) == [("KS905", Span(5, 14, 5, 15))]
    assert "already declared at line 5" in p.findings[0].message
    assert ann.tensors["A"].ptr == "a_ptr"


def test_ks906_unknown_directive_suggests_the_close_one_and_no_cascade():
    src = kernel_src("    #@ tensr A = a_ptr[m: M]\n    #@ computes A[m] from A[m]\n")
    p, _ = parse(src)
    assert errors(p) == [("KS906", Span(4, 7, 4, 12))]
    assert "did you mean 'tensor'" in p.findings[0].message


def test_trailing_comment_on_a_directive_is_not_part_of_it():
    p, ann = parse(kernel_src("    #@ tensor A = a_ptr[m: M]  # the input\n"))
    assert errors(p) == [] and ann.tensors["A"].span.end_col == 29


def test_helper_directives_attach_to_the_innermost_jit_function():
    src = (HEAD + "@triton.jit\ndef h(x_ptr):\n    #@ tensor X = x_ptr[i: 4]\n    pass\n"
           "@triton.jit\ndef k(y_ptr):\n    #@ tensor Y = y_ptr[i: 4]\n    h(y_ptr)\n")
    p = parse_file(src, "t.py")
    assert errors(p) == []
    assert list(p.kernel("h").annotations.tensors) == ["X"]
    assert list(p.kernel("k").annotations.tensors) == ["Y"]


def test_directives_after_the_last_statement_and_crlf_keep_exact_spans():
    src = ("import triton\r\n@triton.jit\r\ndef k(a_ptr, M):\r\n    x = 1\r\n"
           "    #@ tensor A = a_ptr[m: M]\r\n    #@ assume M > 0,\r\n    #@    M < 10\r\n"
           "\r\n    #@ grid (M, M, M, M)\r\n#@ grid (N,)\r\n")
    p = parse_file(src, "t.py")
    ann = p.kernels[0].annotations
    assert ann.tensors["A"].span == Span(4, 4, 4, 29)
    assert [e.span for e in ann.assumes[0].exprs] == [Span(5, 14, 5, 19), Span(6, 10, 6, 16)]
    assert errors(p) == [("KS907", Span(9, 0, 9, 12)), ("KS904", Span(8, 22, 8, 23))]


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_WORDS = st.sampled_from(["tensor", "grid", "assume", "computes", "assert", "tag", "partners",
                          "bench", "tensr", ""])
_BODY = st.lists(st.sampled_from(list("AaMmkK_0123:,=[]()<>.+-*/% \t'\"#é")
                                 + [" from ", " implies ", " strides(", "a_ptr"]),
                 max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_WORDS, _BODY, st.booleans()), min_size=1, max_size=5))
def test_arbitrary_directive_text_never_raises_and_errors_point_inside_the_directive(lines):
    text = ""
    for word, body, continuation in lines:
        text += ("    #@     " if continuation else "    #@ ") + f"{word} {body}\n"
    p = parse_file(kernel_src(text), "t.py")
    first, last = 4, 4 + len(lines) - 1
    for f in p.findings:
        assert f.code.startswith("KS9")
        assert first <= f.span.line <= f.span.end_line <= last, (f, text)
        row = p.lines[f.span.line]
        assert 0 <= f.span.col <= len(row)


def test_partners_with_a_keyword_as_lead_is_a_directive_error_not_an_internal_one():
    # found by the hypothesis test above: `#@ partners from :` matched the identifier
    # pattern, then ast.parse("from") raised, and the annotations of the kernel were lost
    p = parse_file(kernel_src("    #@ partners from :\n"), "t.py")
    codes_seen = [f.code for f in p.findings]
    assert codes_seen == ["KS901"], p.findings
    assert "keyword 'from'" in p.findings[0].message
    assert p.findings[0].span.line == 4
