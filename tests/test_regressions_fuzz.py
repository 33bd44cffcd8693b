"""Regression tests for what the fuzzers found: each holds the smallest input that showed it.

Passing tests pin a fix; ``xfail(strict=True)`` tests are open bugs routed to the module's
owner (the reason names the module): they start failing, and must be un-marked, once fixed.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz.lsp_client import NoAnswer, RawClient, ResponseError  # noqa: E402

from kernelsight.analysis import api  # noqa: E402

# Found by mutating a real kernel: the grid-level enumeration (KS301/KS302) of a 2-D tile
# stored in a loop enumerated every lane of every program and iteration without looking at
# the kernel's deadline: 78-82 s for a kernel with a 2 s budget. Fixed in
# analysis/engine/grid.py (_check_target checks the deadline per box).
GRID_ENUMERATION_PAST_DEADLINE = '''\
import triton
import triton.language as tl


#@ tensor O = out_ptr[a: n_outer, b: n_rows, c: n_inner]
#@ grid (cdiv(n_rows, ROWS),)
@triton.jit
def scatter_rows(out_ptr, n_outer, n_rows, n_inner, ROWS: tl.constexpr, COLS: tl.constexpr):
    r = tl.arange(0, ROWS)[:, None]
    row_ok = r < n_rows
    c0 = tl.arange(0, COLS)[None, :]
    for start in range(0, n_outer * n_inner, COLS):
        c = start + c0
        outer = c // n_inner
        inner = c % n_inner
        ok = outer < n_outer and row_ok
        tl.store(out_ptr + outer * n_rows * n_inner + r * n_inner + inner, 0.0, mask=ok)
'''


@pytest.mark.timeout(120)
def test_grid_enumeration_stops_at_the_kernel_deadline():
    t0 = time.process_time()
    report = api.analyze_source(GRID_ENUMERATION_PAST_DEADLINE, "scatter.py").report
    elapsed = time.process_time() - t0
    # budget 2 s of wall time (Config.kernel_budget_ms) + front end; before the fix: 80 s
    assert elapsed < 10.0, f"{elapsed:.1f} s of CPU"
    [kernel] = report.kernels
    assert kernel.seconds < 15.0  # wall: the deadline is wall time, plus one box
    if kernel.status == "budget":
        assert any(f.code == "KS911" for f in report.findings)


# Found by the pathological probes: folding a constant power tower or a huge shift in a kernel
# (`2 ** 2 ** 2 ** 2 ** 2 ** 2` never finished; `1 << 10**9` took 40 s and then failed with an
# internal ValueError). Fixed in analysis/engine/interp.py (_MAX_FOLD_BITS bounds the fold).
HUGE_CONSTANTS = {
    "power_tower": "2 ** 2 ** 2 ** 2 ** 2 ** 2",
    "shift_by_a_billion": "1 << 10**9",
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("expr", list(HUGE_CONSTANTS.values()), ids=list(HUGE_CONSTANTS))
def test_huge_constant_in_a_kernel_is_not_folded_for_ever(expr):
    text = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
            "def k(x_ptr, N, BLOCK: tl.constexpr):\n"
            "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
            f"    big = {expr}\n"
            "    x = tl.load(x_ptr + offs + big, mask=offs < N)\n")
    t0 = time.process_time()
    report = api.analyze_source(text, "huge.py").report
    assert time.process_time() - t0 < 10.0
    assert not any("internal error" in f.message for f in report.findings)
    assert [k.status for k in report.kernels] in (["analysed"], ["budget"])


# Found by reading the language rules for repeated walks (issue 9): two rules walked a
# subtree once per occurrence of a construct, quadratic in the kernel's size.
# * KS505 skips constructs inside a branch of an ``if`` on a compile-time condition; every
#   ``elif`` walked the whole rest of the chain again: 2,000 branches on a constexpr took 28 s.
# * KS508 (block pointers removed in Triton 3.9) walked the whole kernel once per
#   ``tl.make_block_ptr`` call: 300 calls took 1.9 s, 600 calls 9.6 s.
# Fixed in analysis/rules.py (each subtree walked once; the kernel's callees listed once).
def _elif_chain(branches: int) -> str:
    body = "".join(f"    {'if' if i == 0 else 'elif'} MODE == {i}:\n        x = x + {i}.0\n"
                   for i in range(branches))
    return ("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
            "def chain(x_ptr, N, BLOCK: tl.constexpr, MODE: tl.constexpr):\n"
            "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
            "    x = tl.load(x_ptr + offs, mask=offs < N)\n" + body +
            "    tl.store(x_ptr + offs, x, mask=offs < N)\n")


def _block_pointers(calls: int) -> str:
    body = "".join(f"    p{i} = tl.make_block_ptr(x_ptr, (N,), (1,), (0,), (BLOCK,), (0,))\n"
                   for i in range(calls))
    return ("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
            "def ptrs(x_ptr, N, BLOCK: tl.constexpr):\n" + body)


def _front_and_rules_cpu(text: str):
    from kernelsight.analysis import frontend, rules
    from kernelsight.analysis.config import Config

    t0 = time.thread_time()
    parsed = frontend.parse_file(text, "quadratic.py", budget_ms=10**9)
    found = rules.check_rules(parsed, Config(kernel_budget_ms=10**9))
    return time.thread_time() - t0, parsed, found


@pytest.mark.timeout(120)
def test_elif_chain_on_a_constexpr_costs_the_rules_linear_time():
    seconds, parsed, found = _front_and_rules_cpu(_elif_chain(2000))
    assert seconds < 3.0, f"{seconds:.1f} s of CPU (before the fix: 28 s)"
    assert [k.budget_exhausted for k in parsed.kernels] == [None]
    assert not any(f.code == "KS505" for f in found)


@pytest.mark.timeout(120)
def test_many_block_pointer_calls_cost_the_rules_linear_time():
    from kernelsight.analysis.rules import BLOCK_PTR_REMOVED, installed_triton_version

    seconds, parsed, found = _front_and_rules_cpu(_block_pointers(1000))
    assert seconds < 3.0, f"{seconds:.1f} s of CPU (before the fix: about 25 s)"
    version = installed_triton_version()
    expected = 1000 if version is not None and version >= BLOCK_PTR_REMOVED else 0
    assert sum(f.code == "KS508" for f in found) == expected


@pytest.fixture(scope="module")
def client():
    root = Path(tempfile.mkdtemp(prefix="ksreg"))
    c = RawClient(cwd=str(root))
    c.initialize(root)
    c.root = root
    yield c
    c.shutdown()


@pytest.mark.timeout(120)
# Found by the protocol fuzzer: a request whose params failed validation was dropped before
# its id was read. Fixed in server/protocol.py (answered with InvalidParams).
def test_request_with_a_negative_position_gets_an_error_answer(client):
    uri = client.root.as_uri() + "/k.py"
    client.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "python", "version": 1, "text": "x = 1\n"}})
    rid = client.send_request("textDocument/hover", {"textDocument": {"uri": uri},
                                                     "position": {"line": -1, "character": 0}})
    try:
        client.wait(rid, timeout=5)
    except ResponseError as exc:
        assert exc.error["code"] == -32602
    except NoAnswer:
        pytest.fail("hover with line -1 was never answered")
    assert client.alive()


@pytest.mark.timeout(120)
# Found by the protocol fuzzer: didChange of a never-opened document raised KeyError in the
# workspace and showed "Error in server". Fixed in server/protocol.py (ignored, logged).
def test_change_of_a_never_opened_document_is_ignored_quietly(client):
    uri = client.root.as_uri() + "/never-opened.py"
    client.log_errors.clear()
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                             "contentChanges": [{"text": "x = 1\n"}]})
    client.request("workspace/executeCommand", {"command": "kernelsight.status",
                                                "arguments": []}, timeout=30)
    assert client.alive()
    assert client.log_errors == []


# Found by the protocol fuzzer (seed 20261130, sequence 273): a code action on an
# unannotated kernel with a launch site infers its annotations in a worker thread; a didClose
# arriving meanwhile left no line index, and the handler raised AttributeError (answered as
# InternalError). Fixed in server/features/code_actions.py (guard after the await).
@pytest.mark.timeout(180)
def test_code_action_racing_a_close_is_answered_without_internal_error(client):
    vector_add = (Path(__file__).resolve().parent.parent / "examples" / "kernels"
                  / "vector_add.py").read_text()
    text = "".join(l for l in vector_add.splitlines(True) if not l.startswith("#@"))
    line = next(i for i, l in enumerate(text.split("\n")) if l.startswith("def "))
    for n in range(40):
        uri = client.root.as_uri() + f"/race{n}.py"
        client.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": text}})
        deadline = time.monotonic() + 30
        while True:  # the code action needs a result for the current version
            st = client.request("workspace/executeCommand",
                                {"command": "kernelsight.status", "arguments": []})
            if (st["documents"].get(uri) or {}).get("fast") == 1:
                break
            assert time.monotonic() < deadline
            time.sleep(0.02)
        pos = {"line": line, "character": 0}
        rid = client.send_request("textDocument/codeAction", {
            "textDocument": {"uri": uri}, "range": {"start": pos, "end": pos},
            "context": {"diagnostics": []}})
        time.sleep(n * 0.004)  # close at varying points of the inference
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        client.wait(rid, timeout=30)  # ResponseError (InternalError) fails the test
    assert client.alive()


# Found by the long run (benchmarks/fuzz_long.py, seed 20261130): the server's memory grew
# from 121 MB to 324 MB over 10,000 random sessions. tracemalloc pointed at pygls keeping the
# future of every didOpen/didChange/didClose/didSave in _request_futures for ever. Fixed in
# server/protocol.py (_check_handler_result drops it).
@pytest.mark.timeout(180)
def test_notifications_leave_no_pending_futures_behind(tmp_path):
    counting = Path(__file__).resolve().parent / "fuzz" / "counting_server.py"
    c = RawClient(cmd=[sys.executable, str(counting)], cwd=str(tmp_path))
    try:
        c.initialize(tmp_path)
        uri = tmp_path.as_uri() + "/k.py"
        c.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": "x = 1\n"}})
        for v in range(2, 302):
            c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": v},
                                                "contentChanges": [{"text": f"x = {v}\n"}]})
        c.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
        c.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        c.request("workspace/executeCommand", {"command": "kernelsight.status",
                                               "arguments": []}, timeout=60)
        pending = c.request("workspace/executeCommand",
                            {"command": "ksfuzz.pendingFutures", "arguments": []}, timeout=60)
        assert pending < 20, f"{pending} futures kept after 303 notifications"
    finally:
        c.shutdown()


# Found by the long run (seed 20261202, document 83159): a kernel with CRLF line endings whose
# mutation left lone CRs in it and a `#@` directive outside a kernel near the end. The analysis
# was right (LSP and Python end a line at a lone CR, so the KS907 was on row 318 of 367); the
# fuzz property counted rows by "\n" only and called the span out of the document. The
# property now counts rows as LSP does; this pins both sides.
def test_finding_rows_count_a_lone_cr_as_a_line_end_as_lsp_does():
    from fuzz import check

    lines = ["import triton", "import triton.language as tl", "", "",
             "@triton.jit", "def k(x_ptr, n, BLOCK: tl.constexpr):",
             "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
             "    tl.store(x_ptr + offs, 1.0, mask=offs < n)", "", "",
             "#@ assert offs < N"]
    text = "\r".join(lines[:6]) + "\r\n" + "\r\n".join(lines[6:])
    assert text.count("\n") + 1 < len(lines)  # the old row count was short
    analysis = check.check_document(text, "lone_cr.py")
    stray = [f for f in analysis.report.findings if f.code == "KS907"]
    assert [f.span.line for f in stray] == [len(lines) - 1]
