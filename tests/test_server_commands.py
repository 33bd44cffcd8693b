"""End-to-end: kernel commands (optimize, benchmark) and start-up cost."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time

import pytest
import pytest_lsp
from lsprotocol import types as t
from pytest_lsp import LanguageClient

from server_harness import EXAMPLES, SERVER_CMD, eventually, open_doc, open_file, \
    server_config, start, status

KERNEL = EXAMPLES / "kernels" / "vector_add.py"

# A sitecustomize that hides the agent extra from the server process, as on a base install.
_HIDE = """
import importlib.abc, sys
class _Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "triton", "litellm"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Hide())
"""


@pytest_lsp.fixture(config=server_config())
async def client(lsp_client: LanguageClient):
    await start(lsp_client)
    yield
    await lsp_client.shutdown_session()


def _base_install_config():
    import tempfile
    d = tempfile.mkdtemp(prefix="ks_hide_")
    with open(os.path.join(d, "sitecustomize.py"), "w") as fh:
        fh.write(_HIDE)
    return server_config(PYTHONPATH=d + os.pathsep + os.environ.get("PYTHONPATH", ""))


@pytest_lsp.fixture(config=_base_install_config())
async def base_client(lsp_client: LanguageClient):
    await start(lsp_client)
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_kernel_commands_without_the_agent_extra_say_what_to_install(base_client):
    client = base_client
    uri = open_file(client, KERNEL)
    for command, missing in (("kernelsight.optimize", "torch, triton"),
                             ("kernelsight.benchmark", "torch, triton")):
        result = await client.workspace_execute_command_async(t.ExecuteCommandParams(
            command=command, arguments=[uri, "add_kernel"]))
        assert result["ok"] is False
        assert f"missing: {missing}" in result["reason"]
        assert "pip install 'kernelsight[agent]'" in result["reason"]
        await eventually(lambda: any(m.message == result["reason"] for m in client.messages),
                         what="the message shown to the user")
    assert client.progress_reports == {}, "nothing pretends to run"


@pytest.mark.asyncio
async def test_benchmark_of_an_unsaved_buffer_asks_to_save_first(client):
    if not (EXAMPLES.parent / "kernelsight" / "commands" / "bench.py").exists():
        pytest.skip("kernelsight/commands/bench.py (the bench CLI) is not written yet")
    uri = KERNEL.as_uri()
    open_doc(client, uri, KERNEL.read_text() + "\n# unsaved edit\n")
    result = await client.workspace_execute_command_async(t.ExecuteCommandParams(
        command="kernelsight.benchmark", arguments=[uri, "add_kernel"]))
    assert result == {"ok": False, "reason": "unsaved"}
    assert any("save the file first" in m.message for m in client.messages)


@pytest.mark.asyncio
async def test_optimize_names_the_missing_agent_module(client):
    import importlib.util
    if importlib.util.find_spec("kernelsight.agent.optimize") is not None:
        pytest.skip("kernelsight.agent.optimize exists: covered by the agent's own tests")
    uri = open_file(client, KERNEL)
    result = await client.workspace_execute_command_async(t.ExecuteCommandParams(
        command="kernelsight.optimize", arguments=[uri, "add_kernel"]))
    assert result["ok"] is False and "kernelsight.agent.optimize" in result["reason"]


@pytest.mark.asyncio
async def test_start_up_loads_no_heavy_module(client):
    st = await status(client)
    assert st["loaded"] == [], f"imported at start-up: {st['loaded']}"


def test_initialize_answers_quickly():
    """Spawn -> initialize response, through a raw pipe (the benchmark reports the p95)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"processId": None, "rootUri": None, "capabilities": {}}})
    msg = f"Content-Length: {len(body)}\r\n\r\n{body}".encode()
    started = time.perf_counter()
    proc = subprocess.Popen(SERVER_CMD, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        proc.stdin.write(msg)
        proc.stdin.flush()
        header = proc.stdout.readline()
        elapsed = time.perf_counter() - started
        assert header.startswith(b"Content-Length")
    finally:
        proc.kill()
        proc.wait()
    # A loose bound: a shared 2-core machine under load takes up to ~4 s here. The 0.5 s target
    # is measured by benchmarks/bench_server.py; heavy imports are pinned by the test above.
    assert elapsed < 10.0


@pytest.mark.asyncio
async def test_optimize_reports_cancellable_progress_and_cancel_stops_it(client):
    from kernelsight.server.features.commands import unavailable_reason
    reason = unavailable_reason("optimize")
    if reason:
        pytest.skip(reason)
    uri = open_file(client, KERNEL)
    fut = asyncio.ensure_future(client.workspace_execute_command_async(t.ExecuteCommandParams(
        command="kernelsight.optimize", arguments=[uri, "add_kernel"])))
    await eventually(lambda: any(client.progress_reports.values()), what="progress begin")
    [token] = client.progress_reports.keys()
    begin = client.progress_reports[token][0]
    assert isinstance(begin, t.WorkDoneProgressBegin) and begin.cancellable
    client.window_work_done_progress_cancel(t.WorkDoneProgressCancelParams(token=token))
    result = await asyncio.wait_for(fut, 30)
    assert result == {"ok": False, "applied": False, "reason": "cancelled"}
    end = client.progress_reports[token][-1]
    assert isinstance(end, t.WorkDoneProgressEnd) and end.message == "cancelled"


@pytest.mark.asyncio
async def test_optimize_reports_progress_on_the_clients_own_work_done_token(client):
    from kernelsight.server.features.commands import unavailable_reason
    reason = unavailable_reason("optimize")
    if reason:
        pytest.skip(reason)
    uri = open_file(client, KERNEL)
    client.progress_reports["client-token-7"] = []  # the client owns this token
    fut = asyncio.ensure_future(client.workspace_execute_command_async(t.ExecuteCommandParams(
        command="kernelsight.optimize", arguments=[uri, "add_kernel"],
        work_done_token="client-token-7")))
    await eventually(lambda: client.progress_reports["client-token-7"], what="progress begin")
    assert list(client.progress_reports) == ["client-token-7"], \
        "no server-created token when the request carries one"
    begin = client.progress_reports["client-token-7"][0]
    assert isinstance(begin, t.WorkDoneProgressBegin) and begin.cancellable
    client.window_work_done_progress_cancel(
        t.WorkDoneProgressCancelParams(token="client-token-7"))
    result = await asyncio.wait_for(fut, 30)
    assert result == {"ok": False, "applied": False, "reason": "cancelled"}
    end = client.progress_reports["client-token-7"][-1]
    assert isinstance(end, t.WorkDoneProgressEnd) and end.message == "cancelled"
