"""The whole real-kernel corpus opened in one language server, one file after another.

Usage:
    python benchmarks/corpus_server.py [--corpus DIR] [--limit N] [--timeout S] [--json FILE]

For each corpus file that mentions ``triton`` (sorted by path): didOpen, wait until the server
holds a full-tier analysis of that version (``kernelsight.status``), ask a hover and the
document symbols, then didClose. A file is "answered" when its full analysis arrived and both
requests got a reply within ``--timeout`` seconds. Prints files, answered, timed-out files,
the server's resident memory sampled every 100 files (KiB), and whether the server ended alive
(a clean shutdown with exit status 0). The corpus defaults to ~/.cache/kernelsight-corpus
(downloaded by ../shared/corpus/fetch-real-kernels; never committed).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fuzz import sources  # noqa: E402
from fuzz.lsp_client import NoAnswer, RawClient, ResponseError, ServerDied  # noqa: E402


def status(client: RawClient, timeout: float) -> dict:
    return client.request("workspace/executeCommand",
                          {"command": "kernelsight.status", "arguments": []}, timeout=timeout)


def open_and_wait(client: RawClient, path: Path, timeout: float) -> tuple[bool, float, int]:
    """(answered, seconds until the full analysis arrived, diagnostics published)."""
    uri = path.as_uri()
    text = path.read_bytes().decode("utf-8", errors="replace")
    t0 = time.perf_counter()
    client.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "python", "version": 1, "text": text}})
    deadline = time.monotonic() + timeout
    answered = False
    while time.monotonic() < deadline:
        doc = status(client, timeout)["documents"].get(uri) or {}
        if doc.get("full") == 1:
            answered = True
            break
        time.sleep(0.05)
    seconds = time.perf_counter() - t0
    client.request("textDocument/hover", {"textDocument": {"uri": uri},
                                          "position": {"line": 0, "character": 0}},
                   timeout=timeout)
    client.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}},
                   timeout=timeout)
    n_diags = len(client.diagnostics.get(uri) or [])
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    return answered, seconds, n_diags


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, default=None)
    ap.add_argument("--limit", type=int, default=0, help="first N files only (0 = all)")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds per file for its full analysis and each request")
    ap.add_argument("--json", type=Path, default=None, help="write the summary here")
    args = ap.parse_args(argv)
    if args.corpus is not None:
        import os
        os.environ["KERNELSIGHT_CORPUS"] = str(args.corpus)
    files = list(sources.corpus_files())
    if not files:
        print("corpus not found: run /work/shared/corpus/fetch-real-kernels first")
        return 2
    if args.limit:
        files = files[:args.limit]
    root = sources.corpus_dir()
    client = RawClient(cwd=str(root))
    client.initialize(root)
    started = time.time()
    answered, unanswered, rss = 0, [], []
    slowest: list[tuple[float, str]] = []
    died = None
    diagnostics = 0
    for i, path in enumerate(files):
        try:
            ok, seconds, n = open_and_wait(client, path, args.timeout)
        except (ServerDied, NoAnswer, ResponseError) as exc:
            died = f"{path}: {type(exc).__name__}: {exc}"
            break
        diagnostics += n
        if ok:
            answered += 1
        else:
            unanswered.append(str(path))
        slowest = sorted(slowest + [(seconds, str(path))], reverse=True)[:5]
        if i % 100 == 0:
            rss.append(client.rss_kib())
            print(f"{i:5d}/{len(files)} {time.time() - started:7.0f}s answered={answered} "
                  f"rss={rss[-1]} KiB", flush=True)
    alive = client.alive() and died is None
    rss.append(client.rss_kib())
    exit_code = client.shutdown()
    summary = {
        "files": len(files), "answered": answered, "unanswered": unanswered,
        "diagnostics": diagnostics, "seconds": round(time.time() - started, 1),
        "server_alive_at_end": alive, "shutdown_exit_code": exit_code, "died": died,
        "rss_kib": rss, "slowest": slowest,
    }
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    ok = alive and exit_code == 0 and answered == len(files)
    print("RESULT:", "every file answered, server alive" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
