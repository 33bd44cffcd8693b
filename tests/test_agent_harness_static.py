"""The static gate stage: annotations a candidate dropped are put back, findings map to the
candidate's own lines, ERROR findings fail."""
from __future__ import annotations

from pathlib import Path

import pytest

from kernelsight.agent.static_tier import check_source, kernel_directives, reinsert_annotations

ADD = (Path(__file__).parent / "data" / "agent" / "add.py").read_text()


def strip_annotations(text: str) -> str:
    return "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#@")) + "\n"


def test_directives_of_a_kernel_are_found_with_keys():
    ds, first, indent = kernel_directives(ADD, "add_kernel")
    assert [d.kind for d in ds] == ["tensor", "tensor", "tensor", "grid", "computes", "bench"]
    assert [d.key for d in ds][:4] == ["tensor X", "tensor Y", "tensor OUT", "grid"]
    assert ADD.splitlines()[first] == "@triton.jit" and indent == ""


def test_dropped_annotations_are_reinserted_and_lines_map_back():
    cand = strip_annotations(ADD)
    re_ins = reinsert_annotations(ADD, cand, "add_kernel")
    assert re_ins.count == 5  # every directive but bench
    assert "#@ computes OUT[i] from X[i], Y[i]" in re_ins.text
    # a line after the insertion point maps back to the candidate's own numbering
    store = next(i for i, l in enumerate(re_ins.text.splitlines()) if "tl.store" in l)
    line, inserted = re_ins.to_candidate_line(store)
    assert cand.splitlines()[line].strip().startswith("tl.store") and not inserted
    assert re_ins.to_candidate_line(re_ins.at) == (re_ins.at, True)


def test_kept_annotations_are_not_duplicated():
    cand = ADD.replace("#@ grid (cdiv(n, BLOCK),)\n", "")
    re_ins = reinsert_annotations(ADD, cand, "add_kernel")
    assert re_ins.directives == ["#@ grid (cdiv(n, BLOCK),)"]
    assert re_ins.text.count("#@ tensor X") == 1


def test_continuation_lines_travel_with_their_directive():
    original = ADD.replace("#@ computes OUT[i] from X[i], Y[i]", "#@ computes OUT[i] from X[i],\n#@     Y[i]")
    re_ins = reinsert_annotations(original, strip_annotations(original), "add_kernel")
    assert "#@ computes OUT[i] from X[i],\n#@     Y[i]\n" in re_ins.text


def test_renamed_kernel_fails_static():
    res = check_source(ADD.replace("add_kernel", "other_kernel"), ADD, "add_kernel", "add.py")
    if res.status == "skipped":
        pytest.skip(res.summary)
    assert not res.ok and "not found" in res.summary


def test_error_finding_fails_with_candidate_line():
    bad = ADD.replace("offs = pid * BLOCK + tl.arange(0, BLOCK)", "offs = pid * BLOCK + tl.arange(0, 48)")
    res = check_source(strip_annotations(bad), ADD, "add_kernel", "add.py")
    if res.status == "skipped":
        pytest.skip(res.summary)  # the analysis front end is not importable here
    line = next(i for i, l in enumerate(strip_annotations(bad).splitlines(), 1) if "tl.arange(0, 48)" in l)
    assert not res.ok and res.status == "failed"
    assert f"{line}:" in res.feedback and "KS501" in res.feedback
    assert "re-inserted 5 annotation(s)" in res.feedback
