"""Where the language server's resident memory goes, phase by phase, without pytest-lsp.

Prints VmRSS (MiB) of: a bare interpreter; an interpreter that imported pygls and lsprotocol;
the server after ``initialize``; after opening the examples' kernels (full analysis done);
after N incremental edits with a save every 50. Then the largest mappings of the server by
resident size (from /proc/PID/smaps), which tells shared libraries, the Python heap and
thread stacks apart. Linux only (reads /proc).

Usage: python benchmarks/server_memory_probe.py [--edits 1000]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def rss_mib(pid: int) -> float:
    """VmRSS of ``pid`` in MiB (0.0 when the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def interpreter_rss(code: str) -> float:
    """RSS of a child interpreter that ran ``code`` and then waits on stdin."""
    proc = subprocess.Popen([sys.executable, "-c", code + "\nimport sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    proc.stdout.readline()
    mib = rss_mib(proc.pid)
    proc.stdin.close()
    proc.wait()
    return mib


def top_mappings(pid: int, n: int = 12) -> list[tuple[float, str]]:
    """The ``n`` largest mappings of ``pid`` by Rss, summed per file ([heap], [anon], ...)."""
    sizes: dict[str, float] = {}
    name = "?"
    try:
        for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
            head = line.split()
            if not head:
                continue
            if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                name = head[5] if len(head) >= 6 else "[anon]"
            elif head[0] == "Rss:":
                sizes[name] = sizes.get(name, 0.0) + int(head[1]) / 1024
    except OSError:
        return []
    return sorted(((v, k) for k, v in sizes.items()), reverse=True)[:n]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edits", type=int, default=1000)
    args = ap.parse_args(argv)
    from fuzz.lsp_client import RawClient

    rows: list[tuple[str, float, str]] = []
    rows.append(("bare interpreter", interpreter_rss("print(1, flush=True)"), ""))
    rows.append(("interpreter + pygls + lsprotocol.types",
                 interpreter_rss("import pygls.server, lsprotocol.types; print(1, flush=True)"),
                 ""))
    client = RawClient()
    client.initialize(ROOT)
    time.sleep(0.5)
    pid = client.proc.pid
    rows.append(("server after initialize", rss_mib(pid), f"{threads(pid)} threads"))
    docs = sorted((ROOT / "examples" / "kernels").glob("*.py"))
    for path in docs:
        client.notify("textDocument/didOpen", {"textDocument": {
            "uri": path.as_uri(), "languageId": "python", "version": 1,
            "text": path.read_text(encoding="utf-8")}})
    deadline = time.time() + 120
    while time.time() < deadline and len(client.diagnostics) < len(docs):
        time.sleep(0.2)
    time.sleep(2.0)
    rows.append((f"after opening {len(docs)} example files", rss_mib(pid),
                 f"{threads(pid)} threads, {len(client.diagnostics)} published"))
    uri = docs[0].as_uri()
    for k in range(args.edits):
        client.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": 2 + k},
            "contentChanges": [{"range": {"start": {"line": 0, "character": 0},
                                          "end": {"line": 0, "character": 0}},
                                "text": "#" if k % 2 == 0 else ""}]})
        if k % 50 == 49:
            client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
    client.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}}, timeout=120)
    time.sleep(3.0)
    rows.append((f"after {args.edits} edits", rss_mib(pid), f"{threads(pid)} threads"))
    mappings = top_mappings(pid)
    alive = client.alive()
    client.shutdown()

    print(f"python {sys.version.split()[0]}  cpus {os.cpu_count()}  "
          f"MALLOC_ARENA_MAX={os.environ.get('MALLOC_ARENA_MAX', '-')}")
    print(f"| {'phase':42} | RSS MiB | note |")
    print(f"|{'-' * 44}|---------|------|")
    for phase, mib, note in rows:
        print(f"| {phase:42} | {mib:7.1f} | {note} |")
    print("\nlargest mappings of the server (MiB, resident):")
    for mib, name in mappings:
        print(f"  {mib:7.1f}  {name}")
    print(f"server alive at the end: {alive}")
    return 0 if alive else 1


if __name__ == "__main__":
    sys.exit(main())
