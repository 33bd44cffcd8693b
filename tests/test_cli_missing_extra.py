"""Without the agent extra, `bench` and `optimize` say what to install instead of failing late."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'triton', 'litellm'):
            raise ImportError('blocked for the test: ' + name)
        return None
sys.meta_path.insert(0, Block())
from kernelsight.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _run(*args):
    return subprocess.run([sys.executable, "-c", BLOCK, *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


def test_bench_without_the_agent_extra_names_the_install_command():
    p = _run("bench", "examples/kernels/vector_add.py")
    assert p.returncode == 2
    assert "missing: torch, triton" in p.stderr and "kernelsight[agent]" in p.stderr


def test_optimize_with_a_model_also_needs_litellm():
    p = _run("optimize", "examples/kernels/vector_add.py::add_kernel", "--model", "openai/x")
    assert p.returncode == 2
    assert "missing: torch, triton, litellm" in p.stderr


def test_select_of_a_code_that_does_not_exist_is_a_usage_error():
    p = subprocess.run([sys.executable, "-m", "kernelsight", "check", "--select", "KS999",
                        "examples/kernels"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert p.returncode == 2 and "KS999" in p.stderr
