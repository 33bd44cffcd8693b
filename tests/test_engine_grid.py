"""Grid-level checks (analysis/engine/grid.py): coverage (KS301), races (KS302), footprint
(KS303/KS304), partners (KS205), floor-divided launch grids (KS305) and stores that ignore a
program id axis (KS306), on the example bugs, the correct examples, the shared bug/fixed cases
and small kernels written here for one behaviour each."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kernelsight.analysis import analyze_source
from kernelsight.analysis.config import Config

from bug_markers import bug_files, expected_findings

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "data" / "cases"
GRID_CODES = ("KS205", "KS301", "KS302", "KS303", "KS304", "KS305", "KS306")
KERNELS = sorted((ROOT / "examples" / "kernels").glob("*.py"))
MY_BUGS = [p for p in bug_files() if any(c in GRID_CODES for c, _ in expected_findings(p))]


def analyse(text: str, path: str = "k.py", **cfg):
    return analyze_source(text, path, Config(**cfg)).report.findings


def analyse_file(path: Path):
    return analyse(path.read_text(encoding="utf-8"), str(path))


def covers(f, line1: int) -> bool:
    """The finding's span covers the 1-based line (multi-line calls report their whole span)."""
    return f.span.line + 1 <= line1 <= f.span.end_line + 1


def grid_findings(findings):
    return [f for f in findings if f.code in GRID_CODES]


def src(body: str) -> str:
    return "import triton\nimport triton.language as tl\n\n" + textwrap.dedent(body)


# --------------------------------------------------------------------------- example bugs
@pytest.mark.parametrize("path", MY_BUGS, ids=[p.name for p in MY_BUGS])
def test_bug_example_reports_its_code_at_the_marked_line(path):
    findings = analyse_file(path)
    for code, line in expected_findings(path):
        hits = [f for f in findings if f.code == code and covers(f, line)]
        assert hits, f"{code} expected at line {line}; got " + ", ".join(
            f"{f.code}@{f.span.line + 1}" for f in findings)
        assert hits[0].counterexample is not None
        assert hits[0].counterexample.describe()


@pytest.mark.parametrize("path", KERNELS, ids=[p.name for p in KERNELS])
def test_correct_example_has_no_grid_level_finding(path):
    found = grid_findings(analyse_file(path))
    assert not found, [(f.code, f.span.line + 1, f.message) for f in found]


# --------------------------------------------------------------------------- shared cases
def test_r13_store_ignoring_program_id_0_is_a_race_with_both_programs_named():
    path = CASES / "R13_bug.py"
    findings = analyse_file(path)
    hits = [f for f in findings if f.code == "KS306"]
    assert hits, [(f.code, f.span.line + 1) for f in findings]
    f = hits[0]
    assert f.span.line + 1 == 23
    cex = f.counterexample
    pid_a = tuple(cex.program_id)
    pid_b = tuple(cex.values["program_id (second)"])
    assert pid_a[0] == 0 and pid_b[0] == 1 and pid_a[1:] == pid_b[1:]
    assert "o_ptr[" in cex.values["element"]
    # at the named sizes program i_v=1 has work of its own (V > BV)
    assert cex.sizes["V"] > cex.sizes["BV"]
    assert "i_v" in f.message


@pytest.mark.parametrize("name", sorted(p.name for p in CASES.glob("*_fixed.py")))
def test_fixed_shared_case_has_no_grid_level_finding(name):
    assert not grid_findings(analyse_file(CASES / name))


def test_r13_fixed_file_is_clean():
    assert not analyse_file(CASES / "R13_fixed.py")


# --------------------------------------------------------------------------- KS301
VEC = """
#@ tensor X = x_ptr[i: N]
#@ tensor Z = z_ptr[i: N]
#@ grid {grid}
#@ computes Z[i] from X[i]
@triton.jit
def k(x_ptr, z_ptr, N, BLOCK: tl.constexpr = 128):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < N)
    tl.store(z_ptr + offs, x, mask={mask})
"""


def test_grid_one_block_short_names_the_element_and_the_missing_program():
    f = [f for f in analyse(src(VEC.format(grid="(N // BLOCK,)", mask="offs < N")))
         if f.code == "KS301"]
    assert f
    cex = f[0].counterexample
    assert cex.method == "enumeration"
    n, block = cex.sizes["N"], cex.sizes["BLOCK"]
    assert n % block != 0
    elem = int(cex.values["element"].strip("Z[]"))
    assert n // block * block <= elem < n
    # the program that would have had to write it lies past the grid
    assert cex.program_id[0] == elem // block >= n // block


def test_store_masked_too_tightly_leaves_the_last_element_unwritten():
    f = [f for f in analyse(src(VEC.format(grid="(cdiv(N, BLOCK),)", mask="offs < N - 1")))
         if f.code == "KS301"]
    assert f
    cex = f[0].counterexample
    assert cex.values["element"] == f"Z[{cex.sizes['N'] - 1}]"
    assert any("mask is false" in n for n in cex.notes)


def test_cdiv_grid_covers_every_element():
    found = analyse(src(VEC.format(grid="(cdiv(N, BLOCK),)", mask="offs < N")))
    assert not grid_findings(found)


# --------------------------------------------------------------------------- KS302
def test_overlapping_tiles_race_names_two_programs_and_the_element():
    text = src(VEC.format(grid="(cdiv(N, BLOCK),)", mask="offs < N").replace(
        "offs = pid * BLOCK", "offs = pid * (BLOCK - 1)"))
    f = [f for f in analyse(text) if f.code == "KS302"]
    assert f
    cex = f[0].counterexample
    p1, p2 = cex.values["other program_id"][0], cex.program_id[0]
    elem = int(cex.values["element"].strip("Z[]"))
    step = cex.sizes["BLOCK"] - 1
    for p in (p1, p2):
        assert p * step <= elem < p * step + cex.sizes["BLOCK"]
    assert p1 != p2


def test_store_ignoring_the_row_axis_is_one_race_finding_with_two_row_programs():
    text = src("""
    #@ tensor X = x_ptr[r: R, c: C]
    #@ tensor Y = y_ptr[c: C]
    #@ grid (R, cdiv(C, BLOCK))
    @triton.jit
    def k(x_ptr, y_ptr, R, C, BLOCK: tl.constexpr = 32):
        row = tl.program_id(0)
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * C + cols, mask=cols < C)
        tl.store(y_ptr + cols, x, mask=cols < C)
    """)
    found = grid_findings(analyse(text))
    assert [f.code for f in found] == ["KS302"]
    cex = found[0].counterexample
    a, b = cex.program_id, cex.values["other program_id"]
    assert a[0] != b[0] and a[1] == b[1]


def test_axis_with_a_single_program_is_not_a_race():
    text = src("""
    #@ tensor X = x_ptr[r: R, c: C]
    #@ tensor Y = y_ptr[c: C]
    #@ grid (1, cdiv(C, BLOCK))
    @triton.jit
    def k(x_ptr, y_ptr, R, C, BLOCK: tl.constexpr = 32):
        row = tl.program_id(0)
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * C + cols, mask=cols < C)
        tl.store(y_ptr + cols, x, mask=cols < C)
    """)
    assert not grid_findings(analyse(text))


def test_atomic_accumulation_across_an_axis_is_not_reported():
    text = src("""
    @triton.jit
    def k(x_ptr, y_ptr, C, BLOCK: tl.constexpr = 32):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * C + cols, mask=cols < C)
        tl.atomic_add(y_ptr + cols, x, mask=cols < C)
    """)
    assert not grid_findings(analyse(text))


# --------------------------------------------------------------------------- KS303/KS304
def test_k_loop_one_block_short_names_the_unread_input_element():
    path = ROOT / "examples" / "bugs" / "matmul_k_loop_short.py"
    [f] = [f for f in analyse_file(path) if f.code == "KS303"]
    cex = f.counterexample
    k = cex.sizes["K"]
    # the last k-block is never read: the unread element's k coordinate is in it
    unread_k = int(cex.values["unread"].rstrip("]").split(",")[-1])
    assert k - cex.sizes["BLOCK_K"] <= unread_k < k or unread_k >= (k - 1) // cex.sizes[
        "BLOCK_K"] * cex.sizes["BLOCK_K"]


def test_moe_wrong_expert_counterexample_names_both_expert_reads():
    path = ROOT / "examples" / "bugs" / "moe_gemm_wrong_expert.py"
    [f] = [f for f in analyse_file(path) if f.code == "KS304"]
    cex = f.counterexample
    reads = {k: v for k, v in cex.values.items() if k.startswith("ExpertIds[")}
    assert len(reads) >= 2 and len(set(reads.values())) >= 2, cex.values
    assert "expert(s)" in f.message


# --------------------------------------------------------------------------- KS205
ONLINE = """
#@ partners m_i: acc, l_i
@triton.jit
def k(x_ptr, o_ptr, N, BLOCK: tl.constexpr = 16):
    offs = tl.arange(0, BLOCK)
    m_i = float("-inf")
    l_i = 0.0
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, N, BLOCK):
        x = tl.load(x_ptr + start + offs, mask=start + offs < N, other=float("-inf"))
        m_new = tl.maximum(m_i, tl.max(x, axis=0))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(x - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        {acc_update}
        m_i = m_new
    tl.store(o_ptr + offs, acc / l_i)
"""


@pytest.mark.parametrize("update", ["acc = acc * alpha + p", "acc *= alpha\n        acc += p",
                                    "acc = p + alpha * acc"])
def test_partner_rescaled_by_old_and_new_lead_is_proved(update):
    assert not [f for f in analyse(src(ONLINE.replace("{acc_update}", update)))
                if f.code == "KS205"]


def test_partner_rescaled_by_a_factor_of_the_new_lead_only_is_reported():
    text = src(ONLINE.replace("{acc_update}", "acc = acc * tl.exp(-m_new) + p"))
    [f] = [f for f in analyse(text) if f.code == "KS205"]
    assert "acc" in f.message and f.counterexample.loop


def test_partner_not_rescaled_is_reported_at_its_update():
    text = src(ONLINE.replace("{acc_update}", "acc = acc + p"))
    [f] = [f for f in analyse(text) if f.code == "KS205"]
    assert text.splitlines()[f.span.line].strip() == "acc = acc + p"


# --------------------------------------------------------------------------- KS305
LAUNCH = """
@triton.jit
def k(x_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(z_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def launch(x, z, BLOCK=256):
    n = x.numel()
    k[{grid}](x, z, n, BLOCK=BLOCK)
"""


def test_floor_divided_launch_grid_on_plain_code_gives_ks305_and_inferred_ks301():
    found = analyse(src(LAUNCH.replace("{grid}", "(n // BLOCK,)")))
    codes = {f.code for f in found}
    assert {"KS305", "KS301"} <= codes, [(f.code, f.message) for f in found]
    ks305 = next(f for f in found if f.code == "KS305")
    assert "triton.cdiv(n, BLOCK)" in ks305.message


@pytest.mark.parametrize("grid", ["(triton.cdiv(n, BLOCK),)", "((n + BLOCK - 1) // BLOCK,)",
                                  "lambda META: (triton.cdiv(n, META['BLOCK']),)"])
def test_ceiling_launch_grids_are_clean(grid):
    assert not grid_findings(analyse(src(LAUNCH.replace("{grid}", grid))))


def test_grid_checks_respect_ignore():
    found = analyse(src(LAUNCH.replace("{grid}", "(n // BLOCK,)")), ignore=("KS3",))
    assert not [f for f in found if f.code.startswith("KS3")]


@pytest.mark.parametrize("guard", ["    if n % BLOCK == 0:\n        k[(n // BLOCK,)](x, z, n, BLOCK=BLOCK)",
                                   "    assert n % BLOCK == 0\n    k[(n // BLOCK,)](x, z, n, BLOCK=BLOCK)"])
def test_floor_division_after_a_divisibility_check_is_not_reported(guard):
    text = src(LAUNCH.split("def launch")[0] + "def launch(x, z, BLOCK=256):\n"
               "    n = x.numel()\n" + guard + "\n")
    assert not [f for f in analyse(text) if f.code == "KS305"]
