"""`kernelsight check`: output formats, configuration, suppression, exit codes."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from kernelsight.commands import check

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = Path(__file__).resolve().parent / "data" / "sarif-schema-2.1.0.json"

BUGGY = """\
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, BLOCK):
    offs = tl.arange(0, BLOCK)
    print("offs", offs)
    r = tl.arange(0, 100)  # noqa: KS501
"""
CLEAN = """\
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
"""


def run_check(argv: list[str], capsys) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="kernelsight check")
    check.register(parser)
    rc = check.run(parser.parse_args(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "buggy.py").write_text(BUGGY)
    (tmp_path / "pkg" / "clean.py").write_text(CLEAN)
    (tmp_path / "pkg" / "notes.txt").write_text("#@ grid (N,)\n")
    for skipped in (".venv", "node_modules", "__pycache__", ".git"):
        (tmp_path / "pkg" / skipped).mkdir()
        (tmp_path / "pkg" / skipped / "bad.py").write_text(BUGGY)
    return tmp_path


def test_text_output_is_ruff_style_and_exit_code_1(project, capsys):
    rc, out, err = run_check(["--fast", str(project / "pkg")], capsys)
    path = project / "pkg" / "buggy.py"
    assert rc == 1 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith(f"{path}:7:25: KS502 tl.arange bound uses parameter 'BLOCK'")
    assert lines[1].startswith(f"{path}:8:5: KS506 print() in a jit function")
    assert lines[2] == "Found 2 findings in 1 file."
    assert len(lines) == 3  # noqa suppressed KS501; skipped folders not searched


def test_clean_file_prints_nothing_and_exits_0(project, capsys):
    assert run_check(["--fast", str(project / "pkg" / "clean.py")], capsys) == (0, "", "")


def test_counterexample_and_related_lines_are_indented_under_the_finding():
    from kernelsight.analysis.model import Counterexample, Finding, Related, Span

    f = Finding(code="KS201", message="contraction mismatch", span=Span(30, 15, 30, 20),
                counterexample=Counterexample(program_id=(3, 0), sizes={"M": 256},
                                              notes=["a.k = 41   b.k = 73"]),
                related=[Related(Span(26, 4, 26, 10), "b_ptrs advanced by BLOCK_N")])
    assert check.format_text("m.py", f) == (
        "m.py:31:16: KS201 contraction mismatch\n"
        "  program_id=(3, 0)  sizes M=256\n"
        "  a.k = 41   b.k = 73\n"
        "  line 27: b_ptrs advanced by BLOCK_N\n")


def test_json_format_fields(project, capsys):
    rc, out, _ = run_check(["--fast", "--format", "json", str(project / "pkg")], capsys)
    data = json.loads(out)
    assert rc == 1 and len(data) == 2
    first = data[0]
    for key in ("path", "line", "column", "end_line", "end_column", "code", "severity",
                "message", "counterexample", "related"):
        assert key in first
    assert (first["line"], first["column"], first["end_line"], first["end_column"]) == (7, 25, 7, 30)
    assert first["code"] == "KS502" and first["severity"] == "error"
    assert first["counterexample"] is None and first["related"] == []
    assert first["fixes"][0]["edits"][0] == {"line": 6, "column": 19, "end_line": 6,
                                            "end_column": 19, "new_text": ": tl.constexpr"}


def test_sarif_output_validates_against_the_official_schema(project, capsys):
    from kernelsight.analysis.model import (Counterexample, FileReport, Finding, Fix, Related,
                                            Span, TextEdit)

    rc, out, _ = run_check(["--fast", "--format", "sarif", str(project / "pkg")], capsys)
    log = json.loads(out)
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.validate(log, schema)
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert {r["id"] for r in rules} >= {"KS101", "KS502", "KS910"}
    r502 = next(r for r in rules if r["id"] == "KS502")
    assert r502["helpUri"].endswith("docs/codes/KS502.md") and r502["fullDescription"]["text"]
    assert [r["ruleId"] for r in run["results"]] == ["KS502", "KS506"]
    assert run["results"][0]["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 7, "startColumn": 25, "endLine": 7, "endColumn": 30}
    # a counterexample with a chain of related lines becomes a code flow
    f = Finding(code="KS201", message="contraction mismatch", span=Span(30, 15, 30, 20),
                counterexample=Counterexample(program_id=(3, 0), element={"i": 5}),
                related=[Related(Span(26, 4, 26, 10), "b_ptrs advanced by BLOCK_N")],
                fixes=[Fix("swap", (TextEdit(Span(26, 4, 26, 10), "x"),))])
    log = check.sarif_log([(Path("m.py"), "", FileReport(path="m.py", findings=[f]))])
    jsonschema.validate(log, schema)
    [res] = log["runs"][0]["results"]
    steps = res["codeFlows"][0]["threadFlows"][0]["locations"]
    assert [s["location"]["physicalLocation"]["region"]["startLine"] for s in steps] == [27, 31]
    assert steps[0]["location"]["message"]["text"] == "b_ptrs advanced by BLOCK_N"
    assert res["properties"]["counterexample"]["program_id"] == [3, 0]


def test_select_and_ignore_prefixes(project, capsys):
    target = str(project / "pkg" / "buggy.py")
    rc, out, _ = run_check(["--fast", "--select", "KS506", target], capsys)
    assert rc == 1 and " KS506 " in out and " KS502 " not in out
    rc, out, _ = run_check(["--fast", "--ignore", "KS5", target], capsys)
    assert (rc, out) == (0, "")
    rc, _, err = run_check(["--fast", "--select", "E501", target], capsys)
    assert rc == 2 and "not a code prefix: E501" in err


def test_pyproject_section_is_read_and_config_flag_overrides(project, capsys):
    target = str(project / "pkg" / "buggy.py")
    (project / "pyproject.toml").write_text("[tool.kernelsight]\nignore = ['KS506']\n")
    rc, out, _ = run_check(["--fast", target], capsys)
    assert " KS502 " in out and " KS506 " not in out
    other = project / "other.toml"
    other.write_text("[tool.kernelsight]\nselect = ['KS506']\n")
    rc, out, _ = run_check(["--fast", "--config", str(other), target], capsys)
    assert " KS506 " in out and " KS502 " not in out
    rc, out, _ = run_check(["--fast", "--isolated", target], capsys)
    assert " KS506 " in out and " KS502 " in out
    (project / "pyproject.toml").write_text("[tool.kernelsight]\nmax-elements = 'many'\n")
    rc, _, err = run_check(["--fast", target], capsys)
    assert rc == 2 and "max_elements" in err and "pyproject.toml" in err


def test_missing_path_is_exit_2_but_other_files_are_still_checked(project, capsys):
    rc, out, err = run_check(["--fast", str(project / "nope.py"),
                              str(project / "pkg" / "buggy.py")], capsys)
    assert rc == 2
    assert f"{project / 'nope.py'}: no such file or directory" in err
    assert " KS502 " in out


def test_unreadable_file_is_reported_and_others_continue(project, capsys, monkeypatch):
    bad = project / "pkg" / "aaa.py"
    bad.write_text(CLEAN)
    real = Path.read_bytes

    def read_bytes(self):
        if self.name == "aaa.py":
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    rc, out, err = run_check(["--fast", str(project / "pkg")], capsys)
    assert rc == 2 and "aaa.py: cannot read: Permission denied" in err
    assert " KS502 " in out


def test_statistics_counts_per_code(project, capsys):
    rc, out, _ = run_check(["--fast", "--statistics", str(project / "pkg")], capsys)
    assert rc == 1
    rows = [line.split(None, 2) for line in out.splitlines()]
    assert [(r[0], r[1]) for r in rows] == [("1", "KS502"), ("1", "KS506")]
    rc, out, _ = run_check(["--fast", "--statistics", "--format", "json",
                            str(project / "pkg")], capsys)
    assert [r["code"] for r in json.loads(out)] == ["KS502", "KS506"]


def test_summary_one_line_per_kernel(project, capsys):
    rc, out, _ = run_check(["--fast", "--summary", str(project / "pkg" / "clean.py")], capsys)
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == (f"{project / 'pkg' / 'clean.py'}::k  findings 0  proved 0  refuted 0  "
                        "unproved 0  unknown 0  (skipped)")
    assert lines[1].startswith("1 file(s), 1 kernel(s) in ")


def test_examples_kernels_fast_check_is_clean(capsys):
    rc, out, err = run_check(["--fast", str(ROOT / "examples" / "kernels")], capsys)
    assert (rc, out, err) == (0, "", "")


def test_console_entry_point_usage_errors_exit_2():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-m", "kernelsight", "check"], capture_output=True,
                         text=True, timeout=120, env=env)
    assert res.returncode == 2 and "PATH" in res.stderr
    res = subprocess.run([sys.executable, "-m", "kernelsight", "check", "--fast",
                          str(ROOT / "examples" / "kernels" / "vector_add.py")],
                         capture_output=True, text=True, timeout=120, env=env)
    assert (res.returncode, res.stdout) == (0, "")


def test_a_file_named_twice_is_checked_once(project, capsys):
    target = project / "pkg" / "buggy.py"
    rc, out, _ = run_check(["--fast", str(target), str(project / "pkg")], capsys)
    assert out.count(" KS502 ") == 1 and rc == 1


def test_folder_without_python_files_warns_on_stderr_and_exits_0(project, capsys):
    (project / "docs").mkdir()
    (project / "docs" / "readme.txt").write_text("no code here\n")
    rc, out, err = run_check(["--fast", str(project / "docs")], capsys)
    assert (rc, out) == (0, "")
    assert err == f"kernelsight check: warning: no Python files found under {project / 'docs'}\n"
    # a folder with Python files but no kernels is normal: no warning
    (project / "docs" / "setup.py").write_text("x = 1\n")
    assert run_check(["--fast", str(project / "docs")], capsys) == (0, "", "")


def test_bad_pyproject_is_reported_once_for_all_the_files_under_it(project, capsys):
    (project / "pyproject.toml").write_text("[tool.kernelsight\nignore = ['KS5']\n")
    rc, out, err = run_check(["--fast", str(project / "pkg")], capsys)
    assert rc == 2 and out == ""
    assert err.count("pyproject.toml") == 1 and err.startswith("kernelsight check: error: ")


def test_pyproject_unknown_code_string_list_and_unknown_key(project, capsys):
    target = str(project / "pkg" / "buggy.py")
    (project / "pyproject.toml").write_text("[tool.kernelsight]\nignore = ['KS11O']\n")
    rc, out, err = run_check(["--fast", target], capsys)
    assert (rc, out) == (2, "") and "'ignore': not a code prefix: KS11O" in err
    (project / "pyproject.toml").write_text("[tool.kernelsight]\nignore = 'KS506'\n")
    rc, _, err = run_check(["--fast", target], capsys)
    assert rc == 2 and "'ignore' must be a list" in err and "pyproject.toml" in err
    (project / "pyproject.toml").write_text("[tool.kernelsight]\nignroe = ['KS506']\n"
                                            "agent-model = 'x'\n")
    rc, out, err = run_check(["--fast", str(project / "pkg")], capsys)
    assert rc == 1 and " KS506 " in out
    assert err == (f"kernelsight check: warning: {project / 'pyproject.toml'} "
                   "[tool.kernelsight]: unknown key 'ignroe' (ignored)\n")


def test_docs_cli_sample_output_is_the_real_output_of_its_command(capsys, monkeypatch):
    """docs/cli.md shows "output of this version, shortened": every line it shows (other than
    the `...` elisions) must be a line of the real output, in the same order."""
    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "cli.md").read_text()
    block = doc.split("```\n$ kernelsight check ", 1)[1].split("```", 1)[0]
    command, *shown = block.rstrip("\n").split("\n")
    monkeypatch.chdir(root)
    _, out, _ = run_check(command.split(), capsys)
    real = out.splitlines()
    at = 0
    for line in shown:
        if line.strip() == "...":
            continue
        assert line in real[at:], f"docs/cli.md shows a line the command no longer prints: {line}"
        at = real.index(line, at) + 1


def test_fail_on_error_passes_a_run_with_only_warnings(tmp_path, capsys):
    # KS110 (int32 overflow) is a warning by default: a CI step gated on errors passes
    src = (ROOT / "examples" / "bugs" / "softmax_int32_overflow.py").read_text()
    path = tmp_path / "k.py"
    path.write_text(src)
    status, out, _ = run_check([str(path), "--isolated"], capsys)
    assert status == 1 and "KS110" in out
    status, out, _ = run_check([str(path), "--isolated", "--fail-on", "error"], capsys)
    assert status == 0 and "KS110" in out, "the warning is still printed"
    status, _, _ = run_check([str(path), "--isolated", "--fail-on", "warning"], capsys)
    assert status == 1


def test_fail_on_error_still_fails_on_an_error(capsys):
    path = ROOT / "examples" / "bugs" / "quickstart_scale_inplace.py"
    status, _, _ = run_check([str(path), "--isolated", "--fail-on", "error"], capsys)
    assert status == 1
    status, _, _ = run_check([str(path), "--isolated", "--fail-on", "never"], capsys)
    assert status == 0
