"""Run one pathological case in this process and print a JSON summary on the last line.

Used by tests/test_pathological.py through a subprocess, so that a hang is a timeout of the
child (killed) rather than of the test run, and so that the wall time measured is the whole
analysis including imports' warm state of a fresh process.

    python tests/fuzz/run_case.py CASE [PATH]   # PATH: analyse that file (analyze_path)
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str]) -> int:
    from kernelsight.analysis import api

    from fuzz import pathological

    name = argv[1]
    # Warm the parsers and the solver first: the limit is about the case, not start-up.
    api.analyze_source(pathological.HEADER + pathological.SENTINEL, "warm.py")
    t0, c0 = time.perf_counter(), time.process_time()
    if len(argv) > 2:
        analysis = api.analyze_path(argv[2])
    else:
        analysis = api.analyze_source(pathological.CASES[name](), f"{name}.py")
    seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
    report = analysis.report
    print(json.dumps({
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "findings": [{"code": f.code, "line": f.span.line, "kernel": f.kernel,
                      "message": f.message} for f in report.findings],
        "kernels": [{"name": k.name, "status": k.status, "seconds": k.seconds}
                    for k in report.kernels],
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
