"""Signatures and docs of ``triton.language`` members, for hover, completion and signature help.

The bundled table (server/data/triton_language.json, written by ``gen_tl_table``) answers
everything and costs no triton import. When a *different* triton version is installed, the
first request starts a background thread that reads that triton's ``language`` package from
its source text (``gen_tl_table.build_table_from_source``: ``ast`` only, triton is never
imported or run) and its own signatures and docstrings are used from then on. Measured: 60-120
ms and 10-11 MB of resident memory (triton 3.9, 2 CPU cores; triton 3.6 on the GPU image: 85
ms, 10 MB), most of it freed parse trees that the allocator keeps for reuse; importing triton
instead cost 0.16-0.28 s and 64-81 MB, 47 MB of it libtriton.so. Too slow to block a hover,
hence the thread. Docstrings that triton sets by decorators at import time are not in the
source; for those members the bundled table's description is shown, marked with its version.
"""
from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

log = logging.getLogger("kernelsight.server")

_TABLE = Path(__file__).resolve().parent / "data" / "triton_language.json"


class TlDocs:
    def __init__(self, table_path: Path = _TABLE):
        self._path = table_path
        self._bundled: dict | None = None
        self._installed: dict | None = None
        self._installed_version: str | None = None
        self._checked = False
        self._lock = threading.Lock()

    def _load(self) -> dict:
        if self._bundled is None:
            try:
                self._bundled = json.loads(self._path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                log.warning("triton.language table unreadable (%s): no tl.* docs", exc)
                self._bundled = {"triton_version": "?", "members": {}}
        if not self._checked:
            self._checked = True
            self._maybe_load_installed(self._bundled.get("triton_version"))
        return self._installed or self._bundled

    def _maybe_load_installed(self, bundled_version: str | None) -> None:
        try:
            from importlib.metadata import PackageNotFoundError, version

            installed = version("triton")
        except (PackageNotFoundError, ValueError):
            return
        self._installed_version = installed
        if installed == bundled_version:
            return

        def load() -> None:
            try:
                from .gen_tl_table import build_table_from_source

                table = merge_bundled_docs(build_table_from_source(), self._bundled or {})
                with self._lock:
                    self._installed = table
                log.info("tl.* docs now from the installed triton %s", installed)
            except Exception as exc:  # a broken triton install keeps the bundled table
                log.warning("could not read docs of the installed triton %s: %s", installed, exc)

        threading.Thread(target=load, name="ks-tl-docs", daemon=True).start()

    @property
    def version(self) -> str:
        return str(self._load().get("triton_version", "?"))

    def members(self) -> dict[str, dict]:
        return self._load().get("members", {})

    def get(self, name: str) -> dict | None:
        return self.members().get(name)

    def markdown(self, name: str) -> str | None:
        entry = self.get(name)
        if entry is None:
            return None
        sig = entry.get("signature") or name
        parts = [f"```python\ntl.{sig}\n```"]
        if entry.get("doc"):
            parts.append(entry["doc"])
        pdocs = entry.get("param_docs") or {}
        if pdocs:
            parts.append("\n".join(f"- `{k}`: {v}" for k, v in pdocs.items()))
        source = f"triton {self.version}"
        if entry.get("doc_version"):
            source += f", description from triton {entry['doc_version']}"
        if self._installed is None and self._installed_version and \
                self._installed_version != self.version:
            source += f" (installed: {self._installed_version})"
        parts.append(f"*{source}*")
        return "\n\n".join(parts)


def merge_bundled_docs(table: dict, bundled: dict) -> dict:
    """Fill the members of ``table`` that have no doc from ``bundled``'s member of that name.

    Triton writes some docstrings at import time (the tl.math and atomic decorators,
    ``arange.__doc__ = f"..."``), which a table read from source lacks. The bundled table was
    made by importing triton, so it has them, possibly for another version: such entries get
    ``doc_version`` (the bundled version) and keep only parameter docs for parameters the
    installed signature still has. Modifies and returns ``table``.
    """
    old_members = bundled.get("members") or {}
    old_version = str(bundled.get("triton_version", "?"))
    for name, entry in (table.get("members") or {}).items():
        old = old_members.get(name)
        if entry.get("doc") or not old or not old.get("doc"):
            continue
        entry["doc"] = old["doc"]
        entry["doc_version"] = old_version
        if not entry.get("param_docs") and "params" in entry:
            keep = set(entry["params"])
            entry["param_docs"] = {k: v for k, v in (old.get("param_docs") or {}).items()
                                   if k in keep}
    return table


TL_DOCS = TlDocs()
