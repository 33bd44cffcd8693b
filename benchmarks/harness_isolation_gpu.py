"""Feed the harness candidates that break on a GPU and print what it reports (GPU machine).

Each candidate is tests/data/agent/add.py with one change: an out-of-bounds store (illegal
memory access), an allocation larger than the GPU, an endless loop, a segfault. The caller
must get a StageResult with status crashed / oom / timeout / crashed, and itself survive.

Usage: python benchmarks/harness_isolation_gpu.py
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ADD = ROOT / "tests" / "data" / "agent" / "add.py"
BODY = "    out = torch.empty_like(x)\n"

CASES = {
    "illegal memory access": ("tl.store(out_ptr + offs, x + y, mask=mask)",
                              "tl.store(out_ptr + offs + (1 << 40), x + y)"),
    "device out of memory": (BODY, "    hog = torch.empty(1 << 40, dtype=torch.uint8, device=x.device)\n" + BODY),
    "endless loop": (BODY, "    while True:\n        pass\n" + BODY),
    "segfault": (BODY, "    import ctypes\n    ctypes.string_at(0)\n" + BODY),
}
EXPECTED = {"illegal memory access": "crashed", "device out of memory": "oom", "endless loop": "timeout",
            "segfault": "crashed"}


def main() -> int:
    from kernelsight.agent.benchspec import load_spec
    from kernelsight.agent.evaluate import Evaluator
    from kernelsight.agent.records import Candidate

    spec = load_spec(ADD)
    src = ADD.read_text()
    ev = Evaluator(spec, device="cuda", use_cache=False, timeouts={"correctness": 20},
                   cache_dir="/tmp/ks-iso-cache")
    bad = 0
    for name, (old, new) in CASES.items():
        assert old in src, name
        t0 = time.monotonic()
        r = ev.evaluate(Candidate(id=name, source=src.replace(old, new, 1), kernel="add_kernel"),
                        stages=("correctness",))
        st = r.stage("correctness")
        verdict = "as expected" if st.status == EXPECTED[name] else f"EXPECTED {EXPECTED[name]}"
        bad += st.status != EXPECTED[name]
        print(f"{name:<24} status={st.status:<8} {time.monotonic() - t0:5.1f} s  {verdict}\n"
              f"    {st.summary[:200]}", flush=True)
    print("caller survived all cases")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
