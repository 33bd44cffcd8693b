"""A scripted OpenAI-compatible chat-completions server for the optimization-loop tests.

A real HTTP peer on 127.0.0.1 (``http.server`` in a thread): each POST to
``/v1/chat/completions`` is recorded (path, headers, JSON body) and answered with the next
canned reply, in order, with a ``usage`` block so that token accounting is exercised. A reply
of ``None`` is answered with HTTP 500 (a transient provider error), and so is every request
after the script is used up.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ScriptedServer:
    """``with ScriptedServer(replies) as srv:`` -> ``srv.api_base``, ``srv.requests``."""

    def __init__(self, replies: list[str], *, prompt_tokens: int = 1000,
                 completion_tokens: int = 400):
        self.replies = list(replies)
        self.requests: list[dict] = []
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with outer._lock:
                    outer.requests.append({"path": self.path, "headers": dict(self.headers),
                                           "body": body})
                    reply = outer.replies.pop(0) if outer.replies else None
                    outer.requests[-1]["answered"] = reply is not None
                if reply is None or not self.path.endswith("/chat/completions"):
                    data = json.dumps({"error": {"message": "script exhausted",
                                                 "type": "server_error"}}).encode()
                    self.send_response(500)
                else:
                    data = json.dumps({
                        "id": f"chatcmpl-{len(outer.requests)}", "object": "chat.completion",
                        "created": int(time.time()), "model": body.get("model", "scripted"),
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": reply}}],
                        "usage": {"prompt_tokens": outer.prompt_tokens,
                                  "completion_tokens": outer.completion_tokens,
                                  "total_tokens": outer.prompt_tokens + outer.completion_tokens},
                    }).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):  # keep test output clean
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}/v1"

    def prompt(self, i: int) -> str:
        """The text of every message of request ``i``, joined."""
        return "\n".join(m.get("content", "") for m in self.requests[i]["body"]["messages"])

    def __enter__(self) -> "ScriptedServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
