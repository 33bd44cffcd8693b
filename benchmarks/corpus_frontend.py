"""Front-end robustness and precision over the real-kernel corpus (fast tier only).

Usage: python benchmarks/corpus_frontend.py [CORPUS]   (default ~/.cache/kernelsight-corpus,
filled by ../shared/corpus/fetch-real-kernels; never commit it).

Prints, per package: files, files with jit functions, jit functions (kernels / helpers),
kernels with a syntax error, launch sites, autotuned kernels and their configs, and the
fast-tier findings per code, with the wall time. Crashes are counted and listed, not raised.
"""
from __future__ import annotations

import os
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

from kernelsight.analysis import analyze_source
from kernelsight.analysis.config import Config
from kernelsight.analysis.frontend import parse_file

SKIP = {".git", "__pycache__", ".venv", "node_modules"}


def python_files(root: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP)
        out.extend(Path(dirpath) / f for f in sorted(filenames) if f.endswith(".py"))
    return out


def main() -> int:
    corpus = Path(sys.argv[1] if len(sys.argv) > 1 else
                  Path.home() / ".cache" / "kernelsight-corpus")
    packages = sorted(p for p in corpus.iterdir() if p.is_dir() and p.name != "wheels")
    config = Config(fast_only=True)
    total = Counter()
    codes = Counter()
    crashes = []
    print(f"{'package':<16}{'files':>7}{'w/ jit':>8}{'jit fns':>9}{'kernels':>9}{'helpers':>9}"
          f"{'syntax':>8}{'launches':>10}{'autotuned':>11}{'configs':>9}{'findings':>10}"
          f"{'seconds':>9}")
    for pkg in packages:
        row = Counter()
        t0 = time.perf_counter()
        for path in python_files(pkg):
            row["files"] += 1
            text = path.read_bytes().decode("utf-8", errors="replace")
            try:
                parsed = parse_file(text, str(path))
                report = analyze_source(text, str(path), config).report
            except Exception:
                crashes.append((path, traceback.format_exc(limit=3)))
                continue
            if parsed.kernels:
                row["w/ jit"] += 1
            row["jit fns"] += len(parsed.kernels)
            row["helpers"] += sum(k.is_helper for k in parsed.kernels)
            row["kernels"] += sum(not k.is_helper for k in parsed.kernels)
            row["syntax"] += sum(k.has_syntax_error for k in parsed.kernels)
            row["launches"] += len(parsed.launches)
            row["autotuned"] += sum(bool(k.autotune) for k in parsed.kernels)
            row["configs"] += sum(len(k.autotune) for k in parsed.kernels)
            row["findings"] += len(report.findings)
            codes.update(f.code for f in report.findings)
        row["seconds"] = time.perf_counter() - t0
        total.update(row)
        print(f"{pkg.name:<16}" + "".join(
            f"{row[k]:>{w}}" if k != "seconds" else f"{row[k]:>{w}.1f}"
            for k, w in (("files", 7), ("w/ jit", 8), ("jit fns", 9), ("kernels", 9),
                         ("helpers", 9), ("syntax", 8), ("launches", 10), ("autotuned", 11),
                         ("configs", 9), ("findings", 10), ("seconds", 9))))
    print(f"{'total':<16}" + "".join(
        f"{total[k]:>{w}}" if k != "seconds" else f"{total[k]:>{w}.1f}"
        for k, w in (("files", 7), ("w/ jit", 8), ("jit fns", 9), ("kernels", 9),
                     ("helpers", 9), ("syntax", 8), ("launches", 10), ("autotuned", 11),
                     ("configs", 9), ("findings", 10), ("seconds", 9))))
    print("\nfindings per code:")
    for code, n in sorted(codes.items()):
        print(f"  {code}  {n}")
    print(f"\ncrashes: {len(crashes)}")
    for path, tb in crashes[:20]:
        print(f"  {path}\n{tb}")
    return 1 if crashes else 0


if __name__ == "__main__":
    raise SystemExit(main())
