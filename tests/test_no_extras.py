"""The analysis imports and runs without the extras (torch, triton, litellm) and without the
server stack (lsprotocol, pygls): each test runs in a fresh interpreter in which importing
them raises ImportError."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCKED = ("torch", "triton", "litellm", "lsprotocol", "pygls")

BLOCKER = textwrap.dedent(f"""
    import importlib.abc, sys
    BLOCKED = {BLOCKED!r}

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{{name}} is blocked in this test")
            return None

    sys.meta_path.insert(0, Blocker())
    for mod in list(sys.modules):
        if mod.split(".")[0] in BLOCKED:
            del sys.modules[mod]
""")


def run_python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=240, cwd=str(ROOT), env=env)


def test_blocker_really_blocks():
    res = run_python(BLOCKER + "import torch\n")
    assert res.returncode != 0 and "blocked in this test" in res.stderr


def test_fast_analysis_runs_without_extras_and_finds_a_language_rule_bug():
    code = BLOCKER + textwrap.dedent(r"""
        import json
        from kernelsight.analysis import analyze_source, Config
        src = ("import triton\nimport triton.language as tl\n@triton.jit\n"
               "def k(x_ptr, BLOCK):\n    offs = tl.arange(0, BLOCK)\n")
        a = analyze_source(src, "k.py", Config(fast_only=True))
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
        print(json.dumps({"codes": [f.code for f in a.report.findings], "loaded": loaded}))
    """)
    res = run_python(code)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out == {"codes": ["KS502"], "loaded": []}


def test_full_analysis_runs_without_extras():
    example = ROOT / "examples" / "kernels" / "vector_add.py"
    code = BLOCKER + textwrap.dedent(f"""
        import json
        from kernelsight.analysis import analyze_path, Config
        a = analyze_path({str(example)!r}, Config())
        print(json.dumps([k.status for k in a.report.kernels]))
    """)
    res = run_python(code)
    assert res.returncode == 0, res.stderr
    statuses = json.loads(res.stdout.strip().splitlines()[-1])
    assert statuses and "skipped" not in statuses


def test_importing_the_analysis_loads_no_server_or_gpu_stack():
    code = textwrap.dedent("""
        import json, sys
        import kernelsight.analysis
        from kernelsight.analysis import analyze_source, Config
        analyze_source("x = 1\\n", "x.py", Config(fast_only=True))
        print(json.dumps(sorted(m for m in sys.modules
                                if m.split(".")[0] in ("torch", "triton", "litellm",
                                                       "lsprotocol", "pygls"))))
    """)
    res = run_python(code)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1]) == []
