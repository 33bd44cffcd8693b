"""A raw JSON-RPC client over a language server's stdio, for the protocol fuzzer.

Why not pytest-lsp: the fuzzer must send malformed parameters (ranges past the end, reversed
ranges, unknown documents) that typed clients refuse to build, must notice a dead server or an
unanswered request within a time limit instead of waiting forever, and must read the server's
memory between sequences. Server->client requests (``workspace/configuration``,
``client/registerCapability``, progress creation, refreshes) are answered automatically.
"""
from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SERVER_CMD = [sys.executable, "-m", "kernelsight", "serve"]


class ServerDied(AssertionError):
    """The server process exited (or closed its stdout) while the client still needed it."""


class NoAnswer(AssertionError):
    """A request got no response within its time limit (a hang)."""


class ResponseError(Exception):
    """The server answered a request with a JSON-RPC error object (an answer, not a crash)."""

    def __init__(self, error: dict):
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.error = error


class RawClient:
    """One server subprocess and a reader thread that files its messages.

    Attributes:
        diagnostics: uri -> the last published diagnostics list.
        notifications: count of notifications by method.
        log_errors: window/logMessage and window/showMessage texts of type Error.
    """

    def __init__(self, cmd: list[str] | None = None, env: dict | None = None,
                 cwd: str | None = None, settings: dict | None = None):
        self.cmd = list(cmd or SERVER_CMD)
        environ = dict(os.environ)
        environ.update(env or {})
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, env=environ, cwd=cwd, bufsize=0)
        self.settings = settings or {}
        self._ids = itertools.count(1)
        self._responses: dict[int, dict] = {}
        self._cond = threading.Condition()
        self._write_lock = threading.Lock()
        self._closed = False
        self.diagnostics: dict[str, list] = {}
        self.notifications: dict[str, int] = {}
        self.log_errors: list[str] = []
        self._reader = threading.Thread(target=self._read_loop, name="lsp-reader", daemon=True)
        self._reader.start()

    # --- wire ------------------------------------------------------------------------------

    def _send(self, msg: dict) -> None:
        body = json.dumps(msg, ensure_ascii=False).encode("utf-8", "surrogatepass")
        data = b"Content-Length: %d\r\n\r\n" % len(body) + body
        with self._write_lock:
            try:
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                raise ServerDied(self._death()) from None

    def _read_msg(self) -> dict | None:
        out = self.proc.stdout
        length = None
        while True:
            line = out.readline()
            if not line:
                return None
            line = line.strip()
            if not line:
                break
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        if length is None:
            raise ValueError("message without Content-Length")
        body = b""
        while len(body) < length:
            chunk = out.read(length - len(body))
            if not chunk:
                return None
            body += chunk
        return json.loads(body)

    def _read_loop(self) -> None:
        try:
            while True:
                msg = self._read_msg()
                if msg is None:
                    break
                if "id" in msg and "method" in msg:
                    self._answer_server_request(msg)
                elif "id" in msg:
                    with self._cond:
                        self._responses[msg["id"]] = msg
                        self._cond.notify_all()
                else:
                    self._on_notification(msg)
        except Exception as exc:  # a malformed frame from the server is itself a finding
            self.protocol_error = repr(exc)
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()

    def _answer_server_request(self, msg: dict) -> None:
        method = msg["method"]
        result = None
        if method == "workspace/configuration":
            items = (msg.get("params") or {}).get("items") or []
            result = [self.settings if (i.get("section") == "kernelsight") else None
                      for i in items]
        elif method == "workspace/applyEdit":
            result = {"applied": False}
        try:
            self._send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        except ServerDied:
            pass

    def _on_notification(self, msg: dict) -> None:
        method = msg.get("method", "")
        self.notifications[method] = self.notifications.get(method, 0) + 1
        params = msg.get("params") or {}
        if method == "textDocument/publishDiagnostics":
            self.diagnostics[params.get("uri")] = params.get("diagnostics")
        elif method in ("window/logMessage", "window/showMessage") and params.get("type") == 1:
            self.log_errors.append(params.get("message", ""))

    # --- API -------------------------------------------------------------------------------

    def notify(self, method: str, params) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def send_request(self, method: str, params) -> int:
        rid = next(self._ids)
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return rid

    def wait(self, rid: int, timeout: float):
        """The result of request ``rid``.

        Raises:
            ResponseError: the server answered with an error object.
            NoAnswer: no answer within ``timeout`` seconds.
            ServerDied: the server exited first.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while rid not in self._responses:
                if self._closed:
                    raise ServerDied(self._death())
                left = deadline - time.monotonic()
                if left <= 0:
                    raise NoAnswer(f"request {rid} unanswered after {timeout:.0f}s")
                self._cond.wait(min(left, 0.5))
            msg = self._responses.pop(rid)
        if "error" in msg:
            raise ResponseError(msg["error"])
        return msg.get("result")

    def request(self, method: str, params, timeout: float = 30.0):
        return self.wait(self.send_request(method, params), timeout)

    def initialize(self, root: Path, pull: bool = False, init_options: dict | None = None):
        caps = {
            "general": {"positionEncodings": ["utf-16"]},
            "textDocument": {
                "synchronization": {"didSave": True, "dynamicRegistration": False},
                "publishDiagnostics": {"relatedInformation": True, "versionSupport": True,
                                       "codeDescriptionSupport": True},
                "hover": {"contentFormat": ["markdown", "plaintext"]},
                "completion": {"completionItem": {"snippetSupport": True}},
                "codeAction": {"codeActionLiteralSupport": {"codeActionKind": {
                    "valueSet": ["", "quickfix", "refactor", "refactor.rewrite", "source"]}}},
            },
            "workspace": {"configuration": True, "workspaceFolders": True,
                          "applyEdit": True, "codeLens": {"refreshSupport": True},
                          "inlayHint": {"refreshSupport": True}},
            "window": {"workDoneProgress": True},
        }
        if pull:
            caps["textDocument"]["diagnostic"] = {"dynamicRegistration": False}
        result = self.request("initialize", {
            "processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": caps,
            "initializationOptions": init_options,
            "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}]}, timeout=60)
        self.notify("initialized", {})
        return result

    def alive(self) -> bool:
        return self.proc.poll() is None and not self._closed

    def rss_kib(self) -> int:
        """Resident set size of the server process in KiB (Linux /proc), 0 if unknown."""
        try:
            with open(f"/proc/{self.proc.pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def stderr_tail(self, n: int = 4000) -> str:
        try:
            self._stderr.seek(0)
            return self._stderr.read().decode("utf-8", "replace")[-n:]
        except (OSError, ValueError):
            return ""

    def _death(self) -> str:
        code = self.proc.poll()
        return f"server exited with {code}; stderr tail:\n{self.stderr_tail()}"

    def shutdown(self, timeout: float = 20.0) -> int | None:
        """Polite shutdown + exit; kills the process if it does not go. Returns the exit code."""
        try:
            if self.alive():
                self.request("shutdown", None, timeout=timeout)
                self.notify("exit", None)
            self.proc.wait(timeout=timeout)
        except (ServerDied, NoAnswer, ResponseError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(timeout=10)
        finally:
            for f in (self.proc.stdin, self.proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass
            self._stderr.close()
        return self.proc.returncode
