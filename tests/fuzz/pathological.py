"""Generators of pathological source files, each paired with a *sentinel* kernel.

The sentinel is a small kernel with a known bug (an unmasked store past the end of ``Z``) that
the analysis must still report, at a known line, whatever the pathological part of the file
does: it is how the tests check that "the rest of the file is still analysed".
"""
from __future__ import annotations

HEADER = "import triton\nimport triton.language as tl\n\n"

# One program per BLOCK elements; the store is unmasked, so the last program writes past N.
SENTINEL_NAME = "sentinel_kernel"
SENTINEL = '''
#@ tensor X = x_ptr[i: N]
#@ tensor Z = z_ptr[i: N]
#@ grid (cdiv(N, BLOCK),)
@triton.jit
def sentinel_kernel(x_ptr, z_ptr, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < N)
    tl.store(z_ptr + offs, x)  # sentinel-store
'''
SENTINEL_CODE = "KS101"

_COPY_KERNEL = '''
#@ tensor X = x_ptr[i: N]
#@ tensor Z = z_ptr[i: N]
#@ grid (cdiv(N, BLOCK),)
@triton.jit
def {name}(x_ptr, z_ptr, N, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + offs, mask=mask)
{body}    tl.store(z_ptr + offs, x, mask=mask)
'''


def copy_kernel(name: str, body: str = "") -> str:
    """A correct, annotated 1-D copy kernel named ``name``; ``body`` (indented by the caller)
    is inserted between the load and the store and may transform ``x``."""
    return _COPY_KERNEL.format(name=name, body=body)


def sentinel_line(text: str) -> int:
    """0-based line of the sentinel's unmasked store in ``text`` (any line ending)."""
    for i, line in enumerate(text.splitlines()):
        if "# sentinel-store" in line:
            return i
    raise ValueError("no sentinel in text")


def with_sentinel(middle: str, *, before: bool = True) -> str:
    """HEADER + sentinel + ``middle`` (or middle first with ``before=False``)."""
    return HEADER + (SENTINEL + middle if before else middle + SENTINEL)


def long_kernel(n_lines: int = 10_000) -> str:
    """One kernel whose body is ``n_lines`` straight-line statements, then the sentinel."""
    body = "".join(f"    x = x * 1.0001 + {i % 7}.0\n" for i in range(n_lines))
    return with_sentinel(copy_kernel("long_kernel", body), before=False)


def long_host_file(n_lines: int = 10_000) -> str:
    """``n_lines`` of ordinary host Python around the sentinel (a file that is mostly not
    kernels, like a model definition with one kernel in it)."""
    host = "".join(f"def host_{i}(a, b):\n    return a * {i} + b\n\n" for i in range(n_lines // 3))
    return HEADER + host + SENTINEL + host


def deep_parens(depth: int = 1_000) -> str:
    """A kernel assigning an expression wrapped in ``depth`` parentheses."""
    expr = "(" * depth + "x" + ")" * depth
    return with_sentinel(copy_kernel("deep_parens", f"    x = {expr}\n"), before=False)


def deep_binary(depth: int = 1_000) -> str:
    """``x + (x + (x + ...))``: a right-leaning binary tree ``depth`` deep."""
    expr = "x"
    for _ in range(depth):
        expr = f"(x + {expr})"
    return with_sentinel(copy_kernel("deep_binary", f"    x = {expr}\n"), before=False)


def deep_left_binary(depth: int = 1_000) -> str:
    """``x + 1 + 1 + ... + 1``: a left-leaning binary tree ``depth`` deep without parentheses
    (the usual shape of generated code)."""
    expr = "x" + " + 1.0" * depth
    return with_sentinel(copy_kernel("deep_left", f"    x = {expr}\n"), before=False)


def deep_calls(depth: int = 1_000) -> str:
    """``tl.abs(tl.abs(...x...))`` nested ``depth`` deep."""
    expr = "tl.abs(" * depth + "x" + ")" * depth
    return with_sentinel(copy_kernel("deep_calls", f"    x = {expr}\n"), before=False)


def deep_offset(depth: int = 1_000) -> str:
    """An address expression nested ``depth`` deep (the engine's symbolic arithmetic, not
    only the data path, has to walk it)."""
    expr = "offs"
    for _ in range(depth):
        expr = f"({expr} + 0)"
    body = f"    x = tl.load(x_ptr + {expr}, mask=mask)\n"
    return with_sentinel(copy_kernel("deep_offset", body), before=False)


def deep_if(depth: int = 200) -> str:
    """``if``-statements nested ``depth`` deep (Python's own parser stops at 100 levels of
    indentation blocks, the tree-sitter grammar does not)."""
    body = ""
    for d in range(depth):
        body += "    " * (d + 1) + f"if N > {d}:\n"
    body += "    " * (depth + 1) + "x = x + 1.0\n"
    return with_sentinel(copy_kernel("deep_if", body), before=False)


def deep_annotation(depth: int = 1_000) -> str:
    """An ``#@ assume`` whose expression is ``depth`` parentheses deep."""
    expr = "(" * depth + "N" + ")" * depth
    kernel = copy_kernel("deep_annot").replace("#@ grid", f"#@ assume {expr} >= 1\n#@ grid", 1)
    return with_sentinel(kernel, before=False)


def static_range(trips: int = 100_000) -> str:
    """A ``tl.static_range(trips)`` loop of loads (a compiler would unroll it fully)."""
    body = (f"    for k in tl.static_range({trips}):\n"
            f"        x += tl.load(x_ptr + offs + k, mask=(offs + k) < N)\n")
    return with_sentinel(copy_kernel("static_unroll", body), before=False)


def nested_static_range(trips: int = 1_000, depth: int = 3) -> str:
    """``depth`` nested ``tl.static_range(trips)`` loops: trips**depth unrolled bodies."""
    body = ""
    for d in range(depth):
        body += "    " * (d + 1) + f"for k{d} in tl.static_range({trips}):\n"
    idx = " + ".join(f"k{d}" for d in range(depth))
    body += "    " * (depth + 1) + f"x += tl.load(x_ptr + offs + {idx}, mask=(offs + {idx}) < N)\n"
    return with_sentinel(copy_kernel("nested_unroll", body), before=False)


def mutual_recursion() -> str:
    """Two helper jit functions calling each other, and a self-recursive one, both used by a
    kernel (Triton rejects it at compile time; the analysis must not loop)."""
    helpers = '''
@triton.jit
def ping(x, n):
    return pong(x + 1.0, n)


@triton.jit
def pong(x, n):
    return ping(x * 2.0, n)


@triton.jit
def selfish(x):
    return selfish(x) + 1.0
'''
    kernel = copy_kernel("recursive_user", "    x = ping(x, N)\n    x = selfish(x)\n")
    return HEADER + helpers + kernel + SENTINEL


def deep_helper_chain(depth: int = 200) -> str:
    """``depth`` helper jit functions each calling the next (a legal but deep inlining)."""
    parts = []
    for i in range(depth):
        call = f"h{i + 1}(x)" if i + 1 < depth else "x"
        parts.append(f"\n@triton.jit\ndef h{i}(x):\n    return {call} + 1.0\n")
    kernel = copy_kernel("chain_user", "    x = h0(x)\n")
    return HEADER + "".join(parts) + kernel + SENTINEL


def many_kernels(count: int = 500) -> str:
    """``count`` correct kernels, then the sentinel."""
    return HEADER + "".join(copy_kernel(f"k{i}") for i in range(count)) + SENTINEL


def crlf_tabs() -> str:
    """The sentinel and a copy kernel with CRLF line endings and tab indentation."""
    text = HEADER + copy_kernel("tabbed") + SENTINEL
    return text.replace("    ", "\t").replace("\n", "\r\n")


def lone_cr() -> str:
    """Old Mac line endings (a lone ``\\r``), which Python also treats as a line break."""
    return (HEADER + copy_kernel("cr_only") + SENTINEL).replace("\n", "\r")


def mixed_line_endings() -> str:
    """Lines ending alternately in LF, CRLF and CR."""
    lines = (HEADER + copy_kernel("mixed") + SENTINEL).split("\n")
    ends = ["\n", "\r\n", "\r"]
    return "".join(line + ends[i % 3] for i, line in enumerate(lines))


def one_huge_line(statements: int = 20_000) -> str:
    """A kernel whose body is one physical line of ``statements`` ``;``-separated
    statements (minified or generated code), then the sentinel."""
    stmts = "; ".join("x = x + 1.0" for _ in range(statements))
    kernel = ("@triton.jit\ndef huge_line(x_ptr, z_ptr, N, BLOCK: tl.constexpr):\n"
              "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK); mask = offs < N; "
              f"x = tl.load(x_ptr + offs, mask=mask); {stmts}; "
              "tl.store(z_ptr + offs, x, mask=mask)\n")
    return HEADER + kernel + SENTINEL


def huge_line_file(size: int = 5_000_000) -> str:
    """A file whose first line is a ``size``-character string literal, then the sentinel."""
    return HEADER + "BLOB = '" + "a" * size + "'\n" + SENTINEL


def non_utf8_bytes() -> bytes:
    """The sentinel file with Latin-1 and lone continuation bytes in comments, a string and a
    directive, and a NUL byte outside the kernels (bytes that are not UTF-8; CPython rejects
    NUL anywhere, the front end only in the kernel that holds it)."""
    text = with_sentinel(copy_kernel("latin"), before=True)
    data = text.encode("utf-8")
    data = data.replace(b"import triton\n", b"import triton  # caf\xe9 \xff\xfe\x80\n", 1)
    data = data.replace(b"    pid = tl.program_id(0)\n",
                        b"    pid = tl.program_id(0)  # \xc3\x28 \xa0\xa1\n", 1)
    data += b"\n#@ tensor Q = q_ptr[i: \xe9N]\nS = '\xf0\x28\x8c\xbc'  # \x00\n"
    return data


CASES = {
    "long_kernel_10k_lines": long_kernel,
    "long_host_file_10k_lines": long_host_file,
    "parens_1000_deep": deep_parens,
    "binary_1000_deep": deep_binary,
    "left_binary_1000_deep": deep_left_binary,
    "calls_1000_deep": deep_calls,
    "offset_1000_deep": deep_offset,
    "if_200_deep": deep_if,
    "annotation_1000_deep": deep_annotation,
    "static_range_100000": static_range,
    "nested_static_range_1000_cubed": nested_static_range,
    "mutual_recursion": mutual_recursion,
    "helper_chain_200_deep": deep_helper_chain,
    "kernels_500": many_kernels,
    "crlf_tabs": crlf_tabs,
    "lone_cr": lone_cr,
    "mixed_line_endings": mixed_line_endings,
    "one_huge_line_20000_statements": one_huge_line,
    "huge_line_5mb": huge_line_file,
}
