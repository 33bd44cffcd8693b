"""Signatures and docs of ``triton.language`` members, for hover, completion and signature help.

The bundled table (server/data/triton_language.json, written by ``gen_tl_table``) answers
everything and costs no triton import. When a *different* triton version is installed, the
first request starts a background import of that triton (about 0.2 s and 55 MB) and its own
docstrings are used from then on; the server never imports triton at start-up.
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
                from .gen_tl_table import build_table

                table = build_table()
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
        if self._installed is None and self._installed_version and \
                self._installed_version != self.version:
            source += f" (installed: {self._installed_version})"
        parts.append(f"*{source}*")
        return "\n\n".join(parts)


TL_DOCS = TlDocs()
