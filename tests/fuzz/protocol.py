"""Random LSP sessions: didOpen / didChange (valid, past-the-end, reversed and negative
ranges) / didSave / hover / codeAction / completion / signatureHelp / documentSymbol /
codeLens / inlayHint / didClose / $/cancelRequest, driven by a ``random.Random``.

``run_sequence`` sends one sequence like an editor would (notifications and requests
interleaved, requests not awaited one by one), then requires an answer to every request
within ``answer_timeout`` and a live, responsive server at the end.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from itertools import count

from . import mutate
from .lsp_client import NoAnswer, RawClient, ResponseError, ServerDied

# JSON-RPC error codes that are a proper answer to a malformed or cancelled request.
_ACCEPTABLE_ERRORS = {-32602, -32600, -32601, -32800, -32801}
INTERNAL_ERROR = -32603

_doc_serial = count()
MAX_OPEN_TABS = 8


class HandlerCrash(AssertionError):
    """The server answered with InternalError: a handler raised."""


@dataclass
class _Doc:
    uri: str
    text: str
    version: int
    open: bool = True


@dataclass
class SequenceResult:
    ops: list[str] = field(default_factory=list)
    requests: int = 0
    errors: list[str] = field(default_factory=list)  # acceptable error answers


def _position(rnd: random.Random, text: str, invalid: bool = True) -> dict:
    """A position on a line of ``text`` (75%), past its end, huge, or (``invalid``) negative."""
    lines = text.split("\n")
    r = rnd.random()
    if r < 0.75:
        line = rnd.randrange(len(lines))
        return {"line": line, "character": rnd.randrange(len(lines[line]) + 1)}
    if r < 0.9:  # past the end of the line or of the document
        return {"line": rnd.randrange(len(lines) + 5),
                "character": rnd.choice((0, 200, 10_000))}
    if r < 0.97:
        return {"line": rnd.choice((10**6, 2**31 - 1)), "character": rnd.choice((0, 2**31 - 1))}
    if invalid:
        return {"line": -1, "character": -5}  # invalid by the protocol (uinteger)
    return {"line": 0, "character": 2**31 - 1}


def _range(rnd: random.Random, text: str, invalid: bool = True) -> dict:
    a, b = _position(rnd, text, invalid), _position(rnd, text, invalid)
    if rnd.random() < 0.8 and (b["line"], b["character"]) < (a["line"], a["character"]):
        a, b = b, a  # mostly well-ordered; sometimes reversed
    return {"start": a, "end": b}


def _snippet(rnd: random.Random, seeds: list[str]) -> str:
    r = rnd.random()
    if r < 0.3:
        return rnd.choice(mutate.JUNK)
    if r < 0.4:
        return ""
    src = rnd.choice(seeds)
    lines = src.splitlines(keepends=True) or [""]
    i = rnd.randrange(len(lines))
    return "".join(lines[i:i + rnd.randint(1, 8)])


def _apply(text: str, rng: dict, new: str) -> str:
    """What a client that clamps positions would hold after the edit (for later positions)."""
    lines = text.split("\n")

    def off(p):
        line = min(max(p["line"], 0), len(lines) - 1)
        ch = min(max(p["character"], 0), len(lines[line]))
        if p["line"] >= len(lines):
            line, ch = len(lines) - 1, len(lines[-1])
        return sum(len(x) + 1 for x in lines[:line]) + ch

    s, e = off(rng["start"]), off(rng["end"])
    if e < s:
        s, e = e, s
    return text[:s] + new + text[e:]


class SequenceGenerator:
    """Draws operations over a small set of documents per sequence."""

    def __init__(self, seeds: list[str], root_uri: str = "file:///tmp/ksfuzz"):
        self.seeds = seeds
        self.root_uri = root_uri.rstrip("/")
        self.tabs: list[str] = []  # documents left open by earlier sequences

    def new_doc(self, rnd: random.Random) -> _Doc:
        n = next(_doc_serial)
        text = rnd.choice(self.seeds)
        if rnd.random() < 0.7:
            text = mutate.mutate(text, rnd, donor=rnd.choice(self.seeds))
        ext = ".py" if rnd.random() < 0.95 else rnd.choice((".md", ".txt", ""))
        return _Doc(uri=f"{self.root_uri}/d{n}{ext}", text=text, version=rnd.randint(0, 3))


def run_sequence(client: RawClient, gen: SequenceGenerator, rnd: random.Random,
                 n_ops: int = 12, answer_timeout: float = 60.0) -> SequenceResult:
    """Send one random sequence and check every request was answered.

    Raises:
        ServerDied, NoAnswer, HandlerCrash: the property failed.
    """
    res = SequenceResult()
    docs: list[_Doc] = []
    pending: list[tuple[int, str]] = []

    def request(method: str, params) -> None:
        pending.append((client.send_request(method, params), method))
        res.requests += 1

    def pick() -> _Doc | None:
        if not docs or rnd.random() < 0.05:
            return None
        return rnd.choice(docs)

    def ident(d: _Doc | None) -> dict:
        return {"uri": d.uri if d is not None else f"{gen.root_uri}/never-opened.py"}

    for _ in range(n_ops):
        op = rnd.choices(
            ("open", "change", "save", "hover", "action", "completion", "signature", "symbols",
             "lens", "inlay", "close", "cancel"),
            weights=(3, 8, 2, 3, 2, 2, 1, 1, 1, 1, 1, 1))[0]
        if op != "open" and not docs:
            op = "open"
        d = pick()
        text = d.text if d is not None else ""
        res.ops.append(op)
        if op == "open":
            d = gen.new_doc(rnd)
            docs.append(d)
            lang = "python" if d.uri.endswith(".py") else rnd.choice(("markdown", "plaintext"))
            client.notify("textDocument/didOpen", {"textDocument": {
                "uri": d.uri, "languageId": lang, "version": d.version, "text": d.text}})
        elif op == "change":
            changes = []
            new_text = text
            for _ in range(rnd.randint(1, 3)):
                if rnd.random() < 0.1:
                    full = _snippet(rnd, gen.seeds) if rnd.random() < 0.5 else \
                        mutate.mutate(text or rnd.choice(gen.seeds), rnd)
                    changes.append({"text": full})
                    new_text = full
                else:
                    rng = _range(rnd, new_text)
                    snippet = _snippet(rnd, gen.seeds)
                    changes.append({"range": rng, "text": snippet})
                    new_text = _apply(new_text, rng, snippet)
            version = (d.version if d else 0) + rnd.choice((1, 1, 1, 2, 0, -1))
            if d is not None:
                d.version, d.text = version, new_text
            client.notify("textDocument/didChange", {
                "textDocument": {"uri": ident(d)["uri"], "version": version},
                "contentChanges": changes})
        elif op == "save":
            params = {"textDocument": ident(d)}
            if rnd.random() < 0.2:
                params["text"] = text
            client.notify("textDocument/didSave", params)
        elif op == "hover":
            request("textDocument/hover", {"textDocument": ident(d),
                                           "position": _position(rnd, text)})
        elif op == "action":
            diags = list((client.diagnostics.get(ident(d)["uri"]) or []))
            if rnd.random() < 0.3:
                diags.append({"range": _range(rnd, text), "message": "made up",
                              "code": rnd.choice(("KS101", "KS999", 7, "")), "source": "x"})
            rnd.shuffle(diags)
            request("textDocument/codeAction", {
                "textDocument": ident(d), "range": _range(rnd, text),
                "context": {"diagnostics": diags[:rnd.randint(0, 5)],
                            **({"only": ["quickfix"]} if rnd.random() < 0.2 else {})}})
        elif op == "completion":
            ctx = {"triggerKind": 1} if rnd.random() < 0.5 else \
                {"triggerKind": 2, "triggerCharacter": rnd.choice((".", "(", " ", "@"))}
            request("textDocument/completion", {"textDocument": ident(d),
                                                "position": _position(rnd, text),
                                                "context": ctx})
        elif op == "signature":
            request("textDocument/signatureHelp", {"textDocument": ident(d),
                                                   "position": _position(rnd, text)})
        elif op == "symbols":
            request("textDocument/documentSymbol", {"textDocument": ident(d)})
        elif op == "lens":
            request("textDocument/codeLens", {"textDocument": ident(d)})
        elif op == "inlay":
            request("textDocument/inlayHint", {"textDocument": ident(d),
                                               "range": _range(rnd, text)})
        elif op == "close":
            if d is not None:
                docs.remove(d)
            client.notify("textDocument/didClose", {"textDocument": ident(d)})
        elif op == "cancel" and pending:
            client.notify("$/cancelRequest", {"id": rnd.choice(pending)[0]})
    # Close what is still open, except sometimes: a few documents stay open across sequences,
    # as tabs of an editor do; at most MAX_OPEN_TABS, the oldest closed first, so that the
    # server's memory is measured on a bounded workload.
    for d in docs:
        if rnd.random() < 0.9:
            client.notify("textDocument/didClose", {"textDocument": {"uri": d.uri}})
        else:
            gen.tabs.append(d.uri)
    while len(gen.tabs) > MAX_OPEN_TABS:
        client.notify("textDocument/didClose", {"textDocument": {"uri": gen.tabs.pop(0)}})
    pending.append((client.send_request("workspace/executeCommand",
                                         {"command": "kernelsight.status", "arguments": []}),
                    "status"))
    for rid, method in pending:
        try:
            client.wait(rid, answer_timeout)
        except ResponseError as exc:
            code = exc.error.get("code")
            if code not in _ACCEPTABLE_ERRORS:
                raise HandlerCrash(f"{method}: {exc}\nops: {res.ops}") from None
            res.errors.append(f"{method}: {code}")
        except NoAnswer as exc:
            raise NoAnswer(f"{method}: {exc}\nops: {res.ops}") from None
    if not client.alive():
        raise ServerDied(client._death())
    return res
