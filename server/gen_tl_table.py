"""Generate server/data/triton_language.json from the installed ``triton.language``.

Run: ``python -m kernelsight.server.gen_tl_table [OUT.json]`` (needs triton; the server
itself never imports triton at start-up and reads this table instead).

The table holds, per public ``tl`` member: its kind, its signature (parameters whose names
start with ``_`` are the compiler's and dropped), the docstring reduced to plain markdown and
per-parameter descriptions (from ``:param x:`` fields) for signature help.
"""
from __future__ import annotations

import inspect
import json
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data" / "triton_language.json"
_MAX_DOC = 1500


def _signature(obj) -> tuple[str, list[str]]:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "", []
    params = [p for p in sig.parameters.values() if not p.name.startswith("_")]
    sig = sig.replace(parameters=params, return_annotation=inspect.Signature.empty)
    text = str(sig)
    return text, [p.name for p in params]


_PARAM = re.compile(r"^\s*:param\s+(?P<name>\w+):\s*(?P<text>.*)$")
_TYPE = re.compile(r"^\s*:type\s+(?P<name>\w+):\s*(?P<text>.*)$")


def _clean(doc: str) -> tuple[str, dict[str, str]]:
    """Docstring -> (markdown, {param: description})."""
    doc = inspect.cleandoc(doc or "")
    lines = doc.splitlines()
    body: list[str] = []
    params: dict[str, str] = {}
    current: str | None = None
    for line in lines:
        m = _PARAM.match(line)
        if m:
            current = m.group("name")
            params[current] = m.group("text").strip()
            continue
        if _TYPE.match(line):
            current = None
            continue
        if current is not None and line.startswith((" ", "\t")) and line.strip():
            params[current] += " " + line.strip()
            continue
        current = None
        body.append(line)
    text = _roles("\n".join(body).strip())
    params = {k: _roles(v) for k, v in params.items()}
    text = re.sub(r"\.\. code-block:: \w+\n", "```python\n", text)
    if len(text) > _MAX_DOC:
        text = text[:_MAX_DOC].rsplit("\n", 1)[0] + "\n…"
    return text, params


def _roles(text: str) -> str:
    text = re.sub(r":code:`([^`]*)`", r"`\1`", text)
    return re.sub(r":(?:py:)?(?:func|class|attr|meth|obj):`~?([^`]*)`", r"`\1`", text)


def build_table() -> dict:
    import triton
    import triton.language as tl

    members: dict[str, dict] = {}
    for name in sorted(dir(tl)):
        if name.startswith("_"):
            continue
        obj = getattr(tl, name)
        if inspect.ismodule(obj):
            kind = "module"
        elif inspect.isclass(obj):
            kind = "class"
        elif callable(obj):
            kind = "function"
        else:
            kind = "constant"
        entry: dict = {"kind": kind}
        if kind in ("function", "class"):
            sig, names = _signature(obj)
            entry["signature"] = f"{name}{sig}" if sig else name
            entry["params"] = names
            doc, pdocs = _clean(getattr(obj, "__doc__", "") or "")
            entry["doc"] = doc
            entry["param_docs"] = {k: v for k, v in pdocs.items() if k in names}
        else:
            entry["signature"] = f"{name}: {type(obj).__name__}"
            entry["doc"] = ""
        members[name] = entry
    return {"triton_version": triton.__version__, "members": members}


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else OUT
    table = build_table()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {len(table['members'])} members of triton {table['triton_version']} to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
