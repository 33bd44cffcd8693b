"""Mutations of real kernels: delete, duplicate, swap and insert tokens and lines.

Every function takes a ``random.Random`` so that the same generator drives hypothesis tests
(``st.randoms()``, which hypothesis can shrink) and the long seeded run in
``benchmarks/fuzz_long.py``.
"""
from __future__ import annotations

import random
import re

# Identifiers, numbers, string quotes, comments, operators, whitespace runs, anything else.
_TOKEN = re.compile(r"""
    [A-Za-z_][A-Za-z0-9_]*      # identifier / keyword
  | \d+(?:\.\d*)?(?:e[+-]?\d+)? # number
  | \#@?                        # comment / directive start
  | \*\*|//|<<|>>|<=|>=|==|!=|->|\+=|-=|\*=|/=|:=  # two-char operators
  | [ \t]+                      # horizontal space
  | \r?\n                       # line break
  | .                           # any other single character
""", re.VERBOSE | re.DOTALL)

# Fragments a person or an editor plausibly leaves in a kernel file while typing, plus bytes
# that are legal in a str but rare in source.
JUNK = [
    "(", ")", "[", "]", "{", "}", ":", ",", ".", "=", "+", "*", "-", "/", "%", "<", ">", "@",
    "\\", "'", '"', '"""', "#", "#@", "#@ ", "\n", "\r\n", "\r", "\t", "    ", "\x00", "\ufeff",
    "\u2028", "\x0c", "é", "𝔘", "\ud800", "tl.", "tl.load(", "tl.store(", "tl.arange(0, ",
    "tl.program_id(", "tl.static_range(100000)", "tl.constexpr", "mask=", "other=", "axis=",
    "if ", "else:", "for i in range(", "while True:", "return ", "lambda: ", "yield ",
    "@triton.jit\n", "def k(x_ptr, N, BLOCK: tl.constexpr):\n", "pass", "None", "0", "-1",
    "1 << 40", "2**31", "1e309", "float('nan')", "BLOCK", "N", "x_ptr", "pid",
    "#@ tensor X = x_ptr[i: N]", "#@ grid (cdiv(N, BLOCK),)", "#@ assume N >= 1",
    "#@ tag x.i = pid", "#@ assert offs < N", "#@ computes X[i] from X[i]", "#@ noqa",
    "# noqa: KS101", "#@ tensor X = x_ptr[i: N, j: M] strides(", "#@ grid (", "#@ assume (",
]


def tokens(text: str) -> list[str]:
    """Split ``text`` into tokens that concatenate back to it exactly."""
    return _TOKEN.findall(text)


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True) or [""]


def delete_token(toks: list[str], rnd: random.Random) -> None:
    if toks:
        del toks[rnd.randrange(len(toks))]


def duplicate_token(toks: list[str], rnd: random.Random) -> None:
    if toks:
        i = rnd.randrange(len(toks))
        toks.insert(i, toks[i])


def swap_tokens(toks: list[str], rnd: random.Random) -> None:
    if len(toks) > 1:
        i, j = rnd.randrange(len(toks)), rnd.randrange(len(toks))
        toks[i], toks[j] = toks[j], toks[i]


def insert_junk(toks: list[str], rnd: random.Random) -> None:
    toks.insert(rnd.randrange(len(toks) + 1), rnd.choice(JUNK))


def replace_token(toks: list[str], rnd: random.Random) -> None:
    """Replace an identifier or a number by another one from the same document (a typo of
    the wrong name: ``offs`` for ``mask``, ``1`` for ``BLOCK``)."""
    idx = [i for i, t in enumerate(toks) if t[:1].isalnum() or t[:1] == "_"]
    if len(idx) > 1:
        toks[rnd.choice(idx)] = toks[rnd.choice(idx)]


TOKEN_OPS = (delete_token, duplicate_token, swap_tokens, insert_junk, replace_token)


def delete_lines(lines: list[str], rnd: random.Random) -> None:
    if lines:
        i = rnd.randrange(len(lines))
        del lines[i:i + rnd.choice((1, 1, 2, 5))]


def duplicate_lines(lines: list[str], rnd: random.Random) -> None:
    if lines:
        i = rnd.randrange(len(lines))
        n = rnd.choice((1, 1, 3, 10))
        lines[i:i] = lines[i:i + n] * rnd.choice((1, 2, 50))


def swap_lines(lines: list[str], rnd: random.Random) -> None:
    if len(lines) > 1:
        i, j = rnd.randrange(len(lines)), rnd.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]


def reindent_line(lines: list[str], rnd: random.Random) -> None:
    if lines:
        i = rnd.randrange(len(lines))
        stripped = lines[i].lstrip(" \t")
        lines[i] = rnd.choice(("", "\t", "  ", "    " * rnd.randrange(1, 5))) + stripped


def truncate(lines: list[str], rnd: random.Random) -> None:
    """Cut the file mid-line (a half-written file, or one being saved)."""
    if lines:
        i = rnd.randrange(len(lines))
        cut = rnd.randrange(len(lines[i]) + 1)
        lines[i:] = [lines[i][:cut]]


LINE_OPS = (delete_lines, duplicate_lines, swap_lines, reindent_line, truncate)


def mutate(text: str, rnd: random.Random, max_ops: int = 6, donor: str | None = None) -> str:
    """Apply 1..``max_ops`` random token or line mutations to ``text``.

    ``donor`` (another document) supplies lines to splice in, as a paste from another file.
    """
    out = text
    for _ in range(rnd.randint(1, max_ops)):
        kind = rnd.random()
        if kind < 0.5:
            toks = tokens(out)
            rnd.choice(TOKEN_OPS)(toks, rnd)
            out = "".join(toks)
        elif kind < 0.9 or donor is None:
            lines = _lines(out)
            rnd.choice(LINE_OPS)(lines, rnd)
            out = "".join(lines)
        else:
            lines, extra = _lines(out), _lines(donor)
            i, j = rnd.randrange(len(lines) + 1), rnd.randrange(len(extra))
            lines[i:i] = extra[j:j + rnd.randint(1, 20)]
            out = "".join(lines)
    return out
