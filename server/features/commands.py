"""Workspace commands.

``kernelsight.optimize`` / ``kernelsight.benchmark`` (uri, kernel) run the agent in a child
process (torch, triton and litellm never load into the server), with cancellable work-done
progress. A missing agent extra is answered with a message naming what to install. An
optimized kernel is applied only after the user accepts it and only if the document is still
at the version the run started from.

``kernelsight.analyze`` (uri) re-runs the full analysis; ``kernelsight.showFindings`` (uri,
kernel) logs a kernel's findings; ``kernelsight.status`` returns the analyzer's counters (used by
tests and the benchmark).
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
import uuid

from lsprotocol import types as t

from kernelsight.extras import INSTALL_HINT, missing
from kernelsight.extras import available as _module_available

from ..protocol import WORK_DONE_TOKEN

log = logging.getLogger("kernelsight.server")

_HEAVY = ("torch", "triton", "litellm", "z3", "tree_sitter", "numpy")
# The built-in tuner needs no LLM; litellm is needed once kernelsight.agent.model is set.
_NEEDS = {"optimize": ("torch", "triton"), "optimize-llm": ("torch", "triton", "litellm"),
          "benchmark": ("torch", "triton")}
_AGENT_MODULE = {"optimize": "kernelsight.agent.optimize",
                 "benchmark": "kernelsight.commands.bench"}


def missing_extras(action: str) -> list[str]:
    """Packages of the agent extra that ``action`` needs and that are not importable."""
    return missing(_NEEDS[action])


def unavailable_reason(action: str, model: str = "") -> str | None:
    """Why ``action`` cannot run here, as the sentence shown to the user, or None."""
    missing = missing_extras("optimize-llm" if action == "optimize" and model else action)
    if missing:
        return (f"{'Optimize' if action == 'optimize' else 'Benchmark'} this kernel needs the "
                f"agent extra, which is not installed (missing: {', '.join(missing)}). "
                f"Install it with: {INSTALL_HINT}")
    module = _AGENT_MODULE[action]
    if not _module_available(module):
        return (f"{'Optimize' if action == 'optimize' else 'Benchmark'} this kernel is not "
                f"available in this installation: module {module} is missing.")
    return None


async def _progress_begin(ls, title: str) -> str | int | None:
    """Begin cancellable work-done progress: on the request's own ``workDoneToken`` when the
    client sent one (client-initiated progress needs no ``window/workDoneProgress/create``),
    else on a token the server creates, when the client supports that."""
    token = WORK_DONE_TOKEN.get()
    if token is None:
        if not ls.client_supports("window.work_done_progress"):
            return None
        token = str(uuid.uuid4())
        try:
            await ls.work_done_progress.create_async(token)
        except Exception as exc:
            log.info("no progress for %s: %s", title, exc)
            return None
    ls.work_done_progress.begin(token, t.WorkDoneProgressBegin(
        title=title, cancellable=True, percentage=0))
    return token


def _progress_cancelled(ls, token: str | int | None) -> bool:
    fut = ls.work_done_progress.tokens.get(token) if token else None
    return bool(fut is not None and fut.cancelled())


def _progress_report(ls, token: str | int | None, message: str, percentage: int | None) -> None:
    if token:
        ls.work_done_progress.report(token, t.WorkDoneProgressReport(
            message=message[:200], percentage=percentage))


def _progress_end(ls, token: str | int | None, message: str) -> None:
    if token:
        ls.work_done_progress.end(token, t.WorkDoneProgressEnd(message=message))
        ls.work_done_progress.tokens.pop(token, None)


def _child_env() -> dict[str, str]:
    """The child's environment: the user's own (the agent reads its model provider's key
    there and isolates LLM-written code itself), with LiteLLM's cost map read locally instead
    of fetched at import."""
    env = dict(os.environ)
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return env


async def run_child(ls, argv: list[str], stdin: bytes | None, token: str | int | None,
                    on_event, cwd: str | None = None) -> tuple[str, int | None]:
    """Run a child process, feeding each stdout line to ``on_event``; poll cancellation.

    Returns ("ok"|"failed"|"cancelled", exit status).
    """
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=_child_env(),
        cwd=cwd if cwd and os.path.isdir(cwd) else None)
    if stdin is not None:
        proc.stdin.write(stdin)
        await proc.stdin.drain()
        proc.stdin.close()
    stderr_tail: list[str] = []

    async def pump_out():
        async for raw in proc.stdout:
            on_event(raw.decode("utf-8", "replace").rstrip("\n"))

    async def pump_err():
        async for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            stderr_tail.append(line)
            del stderr_tail[:-20]
            log.info("[agent] %s", line)

    pumps = asyncio.gather(pump_out(), pump_err())
    while proc.returncode is None:
        if _progress_cancelled(ls, token):
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 5.0)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()
            pumps.cancel()
            return "cancelled", proc.returncode
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), 0.1)
        except asyncio.TimeoutError:
            pass
    try:
        await asyncio.wait_for(pumps, 5.0)
    except (asyncio.TimeoutError, asyncio.CancelledError):
        pass
    if proc.returncode != 0 and stderr_tail:
        on_event(json.dumps({"event": "error", "message": stderr_tail[-1]}))
    return ("ok" if proc.returncode == 0 else "failed"), proc.returncode


def _whole_document_edit(uri: str, index, new_text: str) -> t.WorkspaceEdit:
    last = len(index.lines) - 1
    end = index.position(last, len(index.lines[last]))
    return t.WorkspaceEdit(changes={uri: [t.TextEdit(
        range=t.Range(start=t.Position(line=0, character=0), end=end), new_text=new_text)]})


def _workdir(ls, path: str) -> str | None:
    """The workspace root (where the agent writes .kernelsight/runs), else the file's folder."""
    root = ls.workspace.root_path if ls.workspace is not None else None
    return root or (os.path.dirname(path) if path else None)


async def optimize(ls, uri: str, kernel: str) -> dict:
    state = ls.session.doc(uri)
    settings = ls.session.settings_for(state.path if state is not None else "")
    reason = unavailable_reason("optimize", settings.agent_model)
    if reason:
        ls.window_show_message(t.ShowMessageParams(type=t.MessageType.Warning, message=reason))
        return {"ok": False, "reason": reason}
    got = ls.document_text(uri)
    if state is None or got is None:
        return {"ok": False, "reason": "document not open"}
    text, version = got
    token = await _progress_begin(ls, f"Optimizing {kernel}")
    job = {"action": "optimize", "path": state.path, "source": text, "kernel": kernel,
           "model": settings.agent_model, "budget": settings.agent_budget,
           "target": settings.config.target}
    outcome: dict = {}

    def on_event(line: str) -> None:
        try:
            ev = json.loads(line)
        except ValueError:
            log.info("[agent] %s", line)
            return
        if ev.get("event") == "progress":
            _progress_report(ls, token, str(ev.get("message", "")), ev.get("percentage"))
        elif ev.get("event") in ("result", "error"):
            outcome.update(ev)

    status, code = await run_child(
        ls, [sys.executable, "-m", "kernelsight.server.agent_runner"],
        json.dumps(job).encode("utf-8"), token, on_event, cwd=_workdir(ls, state.path))
    if status == "cancelled":
        _progress_end(ls, token, "cancelled")
        return {"ok": False, "applied": False, "reason": "cancelled"}
    if outcome.get("event") != "result":
        msg = outcome.get("message") or f"the optimizer exited with status {code}"
        _progress_end(ls, token, "failed")
        ls.window_show_message(t.ShowMessageParams(
            type=t.MessageType.Error, message=f"Optimize {kernel} failed: {msg}"))
        return {"ok": False, "applied": False, "reason": msg}
    _progress_end(ls, token, "done")
    new_source = outcome.get("source")
    summary = outcome.get("summary") or "a faster version was found"
    if not new_source or new_source == text:
        ls.window_show_message(t.ShowMessageParams(
            type=t.MessageType.Info, message=f"Optimize {kernel}: {summary}; nothing to apply."))
        return {"ok": True, "applied": False, "reason": "no change"}
    choice = await ls.window_show_message_request_async(t.ShowMessageRequestParams(
        type=t.MessageType.Info, message=f"Optimize {kernel}: {summary}. Apply the rewrite?",
        actions=[t.MessageActionItem(title="Apply"), t.MessageActionItem(title="Discard")]))
    if choice is None or choice.title != "Apply":
        return {"ok": True, "applied": False, "reason": "discarded"}
    now = ls.document_text(uri)
    if now is None or now[1] != version:
        msg = f"Optimize {kernel}: not applied, the document changed since the run started."
        ls.window_show_message(t.ShowMessageParams(type=t.MessageType.Warning, message=msg))
        return {"ok": True, "applied": False, "reason": "document changed"}
    res = await ls.workspace_apply_edit_async(t.ApplyWorkspaceEditParams(
        label=f"Optimize {kernel}", edit=_whole_document_edit(uri, ls.index_for(uri),
                                                                new_source)))
    return {"ok": True, "applied": bool(res and res.applied)}


_TIER = re.compile(r"^\s+(static|compile|correctness|timing)\s+(\w+)\s*(.*)$")


def bench_summary(kernel: str, lines: list[str]) -> str:
    """One line for ``window/showMessage`` from ``kernelsight bench`` output: each tier's
    status and the timing tier's detail (``static passed, compile passed, correctness passed,
    timing skipped: no GPU on this machine``). A multi-line message made Neovim stop at a
    hit-enter prompt and showed table rows without their header; the table is in the report."""
    tiers = [m for m in (_TIER.match(x) for x in lines) if m]
    if not tiers:
        return f"Benchmark {kernel}: finished (see the output log)"
    parts = [f"{m.group(1)} {m.group(2)}" for m in tiers]
    timing = next((m for m in tiers if m.group(1) == "timing" and m.group(3)), None)
    detail = ""
    if timing is not None:
        # short enough for one row of a 140-column editor: Neovim asks for Enter otherwise
        text = re.sub(r"^timing \w+:\s*", "", timing.group(3)).split(" (")[0]
        detail = " (" + (text if len(text) <= 40 else text[:39] + "…") + ")"
    return f"Benchmark {kernel}: {', '.join(parts)}{detail}"


async def benchmark(ls, uri: str, kernel: str) -> dict:
    reason = unavailable_reason("benchmark")
    if reason:
        ls.window_show_message(t.ShowMessageParams(type=t.MessageType.Warning, message=reason))
        return {"ok": False, "reason": reason}
    state = ls.session.doc(uri)
    got = ls.document_text(uri)
    if state is None or got is None:
        return {"ok": False, "reason": "document not open"}
    try:
        with open(state.path, encoding="utf-8", errors="replace") as fh:
            on_disk = fh.read()
    except OSError:
        on_disk = None
    if on_disk != got[0]:
        msg = f"Benchmark {kernel}: save the file first (the benchmark runs the saved file)."
        ls.window_show_message(t.ShowMessageParams(type=t.MessageType.Warning, message=msg))
        return {"ok": False, "reason": "unsaved"}
    token = await _progress_begin(ls, f"Benchmarking {kernel}")
    lines: list[str] = []

    def on_event(line: str) -> None:
        lines.append(line)
        log.info("[bench] %s", line)
        _progress_report(ls, token, line, None)

    status, code = await run_child(
        ls, [sys.executable, "-m", "kernelsight", "bench", f"{state.path}::{kernel}"], None,
        token, on_event, cwd=_workdir(ls, state.path))
    _progress_end(ls, token, status)
    if status == "ok":
        ls.window_show_message(t.ShowMessageParams(
            type=t.MessageType.Info, message=bench_summary(kernel, lines)))
    elif status == "failed":
        ls.window_show_message(t.ShowMessageParams(
            type=t.MessageType.Error,
            message=f"Benchmark {kernel} failed (exit {code}); see the output log."))
    return {"ok": status == "ok", "status": status, "output": lines[-50:]}


def register(ls) -> None:
    @ls.command("kernelsight.optimize")
    async def optimize_command(ls, uri: str, kernel: str):
        try:
            return await optimize(ls, uri, kernel)
        except Exception as exc:
            log.exception("optimize failed")
            ls.show_error(f"Optimize {kernel} failed: {exc}")
            return {"ok": False, "reason": str(exc)}

    @ls.command("kernelsight.benchmark")
    async def benchmark_command(ls, uri: str, kernel: str):
        try:
            return await benchmark(ls, uri, kernel)
        except Exception as exc:
            log.exception("benchmark failed")
            ls.show_error(f"Benchmark {kernel} failed: {exc}")
            return {"ok": False, "reason": str(exc)}

    @ls.command("kernelsight.analyze")
    async def analyze_command(ls, uri: str):
        result = await ls.analyzer.run(uri, "full")
        return None if result is None else {"version": result.version,
                                            "findings": len(result.analysis.report.findings)}

    @ls.command("kernelsight.showFindings")
    def show_findings(ls, uri: str, kernel: str):
        state = ls.session.doc(uri)
        findings = [f for f in (state.findings() or [])] if state is not None else []
        mine = [f for f in findings if f.kernel == kernel]
        for f in mine:
            log.info("%s:%d:%d: %s %s", kernel, f.span.line + 1, f.span.col + 1, f.code,
                     f.message)
        return [{"code": f.code, "line": f.span.line, "message": f.message} for f in mine]

    @ls.command("kernelsight.status")
    def status(ls):
        docs = {}
        for uri, s in ls.session.docs.items():
            docs[uri] = {"version": s.version,
                         "fast": None if s.fast is None else s.fast.version,
                         "full": None if s.full is None else s.full.version,
                         "ignored": s.ignored}
        return {"superseded": ls.analyzer.superseded, "completed": dict(ls.analyzer.completed),
                "cached_kernels": len(ls.session.cache), "documents": docs,
                "push": ls.push_mode,
                "loaded": sorted(m for m in _HEAVY if m in sys.modules)}
