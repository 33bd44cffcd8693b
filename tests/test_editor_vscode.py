"""The VS Code extension builds from its committed lockfile: npm ci, type check, lint, unit
tests (node:test), the esbuild bundle and ``vsce package`` (offline), in a copy of
editors/vscode so that the checkout stays clean. VS Code itself is not run (it cannot be
downloaded in CI); tests/test_editor_nvim.py covers a real editor.

Needs node and npm, and the npm registry for ``npm ci``; skipped with the reason otherwise.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXT = ROOT / "editors" / "vscode"
NPM = shutil.which("npm")
NODE = shutil.which("node")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (NPM and NODE), reason="node and npm are needed to build the VS Code extension"),
]

# Build outputs and installed packages never travel into the copy.
_SKIP = {"node_modules", "dist", "out"}


def _copy_sources(dest: Path) -> None:
    shutil.copytree(EXT, dest, ignore=lambda _dir, names: [
        n for n in names if n in _SKIP or n.endswith(".vsix")])


def _run(args: list[str], cwd: Path, timeout: int) -> subprocess.CompletedProcess:
    env = dict(os.environ, CI="1", npm_config_audit="false", npm_config_fund="false",
               npm_config_update_notifier="false")
    p = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{' '.join(args)} exited {p.returncode}\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    return p


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A copy of editors/vscode after `npm ci` (module-scoped: installed once)."""
    work = tmp_path_factory.mktemp("vscode") / "vscode"
    _copy_sources(work)
    _run([NPM, "ci"], work, timeout=300)
    return work


def test_lockfile_is_committed_and_matches_the_manifest():
    lock = json.loads((EXT / "package-lock.json").read_text())
    manifest = json.loads((EXT / "package.json").read_text())
    root = lock["packages"][""]
    assert root["dependencies"] == manifest["dependencies"]
    assert root["devDependencies"] == manifest["devDependencies"]


def test_extension_typechecks_lints_and_passes_its_unit_tests(built):
    _run([NPM, "run", "typecheck"], built, timeout=120)
    _run([NPM, "run", "lint"], built, timeout=180)
    p = _run([NPM, "test"], built, timeout=120)
    # node:test prints a TAP summary; a run with no test must not pass silently.
    summary = {k: int(v) for k, v in
               (line[2:].split(" ", 1) for line in p.stdout.splitlines()
                if line.startswith("# ") and line[2:].split(" ", 1)[0] in ("tests", "pass", "fail"))}
    assert summary["tests"] >= 20 and summary["fail"] == 0 and summary["pass"] == summary["tests"], p.stdout


def test_extension_bundles_and_packages_a_vsix_offline(built):
    _run([NPM, "run", "build"], built, timeout=120)
    assert (built / "dist" / "extension.js").stat().st_size > 10_000
    out = built / "kernelsight.vsix"
    # vsce runs vscode:prepublish (the production bundle) and needs no network.
    _run([NPM, "exec", "--", "vsce", "package", "--no-dependencies", "-o", str(out)], built,
         timeout=180)
    with zipfile.ZipFile(out) as z:
        names = set(z.namelist())
        manifest = json.loads(z.read("extension/package.json"))
    assert "extension/dist/extension.js" in names
    assert not [n for n in names if "/src/" in n or "node_modules" in n or n.endswith(".ts")], names
    commands = {c["command"] for c in manifest["contributes"]["commands"]}
    assert {"kernelsight.optimizeKernel", "kernelsight.benchmarkKernel",
            "kernelsight.showLastReport", "kernelsight.restartServer"} <= commands
    # The server's own command ids stay free: the language client registers those itself.
    assert not commands & {"kernelsight.optimize", "kernelsight.benchmark"}


CLIENT_ONLY = {"interpreter", "serverArgs", "trace.server"}


def _snake(key: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in key.replace(".", "_"))


def test_contributed_settings_mirror_the_servers_settings():
    """Every `kernelsight.*` setting the extension sends is one the server reads, and every
    setting the server reads can be set from VS Code."""
    from dataclasses import fields

    from kernelsight.analysis.config import Config
    from kernelsight.server import settings as server_settings

    manifest = json.loads((EXT / "package.json").read_text())
    contributed = {k[len("kernelsight."):]
                   for k in manifest["contributes"]["configuration"]["properties"]}
    sent = {_snake(k) for k in contributed - CLIENT_ONLY}
    # fast_only is chosen per run by the server (it resets a configured value).
    server_keys = ({f.name for f in fields(Config)} - {"fast_only"}) | set(server_settings._SERVER_KEYS)
    assert sent - server_keys == set(), "settings the server does not read"
    assert server_keys - sent == set(), "server settings missing from package.json"
