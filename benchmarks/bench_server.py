"""Drive `kernelsight serve` through the protocol and time what an editor user feels.

Measures, on a file of five annotated kernels built from examples/kernels:
  * spawn -> initialize response (each run a fresh process);
  * didSave -> publishDiagnostics: (a) nothing changed since the last analysis, (b) after an
    edit inside one kernel (only that kernel is re-analysed), (c) cold (first save after a
    settings change invalidates every kernel);
  * hover latency on loads, stores, directives and tl.* calls;
  * the server's resident memory (VmRSS) after 1,000 incremental edits with periodic saves.

Usage: python benchmarks/bench_server.py [--runs N] [--write-docs docs/performance.md]
Prints a table; --write-docs replaces the server section of the performance page (between
its markers) and leaves every other section alone.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = [sys.executable, "-m", "kernelsight", "serve"]
TARGETS = {"init": 0.5, "save": 0.100, "hover": 0.020, "rss": 150.0}
START, END = "<!-- bench_server:start -->", "<!-- bench_server:end -->"


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


def _strip_bench_parts(text: str) -> str:
    """Drop the bench spec (BENCH dict, ``#@ bench``), the reference and the input maker:
    the editor benchmark is about kernels and their launchers."""
    import ast

    tree = ast.parse(text)
    drop: set[int] = set()
    for node in tree.body:
        names = []
        if isinstance(node, ast.FunctionDef):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        if any(n in ("BENCH", "reference", "make_inputs") for n in names):
            drop.update(range(node.lineno - 1, node.end_lineno))
    lines = [line for i, line in enumerate(text.split("\n"))
             if i not in drop and not line.startswith("#@ bench")]
    return re.sub(r"\n{4,}", "\n\n\n", "\n".join(lines))


def five_kernel_file() -> str:
    """vector_add, softmax, layernorm, matmul and flash_attention from examples/kernels
    (kernels with their launchers), imports once."""
    parts, seen_imports = [], set()
    names = ["vector_add", "softmax", "layernorm", "matmul", "flash_attention"]
    for name in names:
        text = (ROOT / "examples" / "kernels" / f"{name}.py").read_text()
        text = re.sub(r'^""".*?"""\n', "", text, count=1, flags=re.S)  # module docstring
        text = _strip_bench_parts(text)
        out = []
        for line in text.split("\n"):
            if line.startswith(("import ", "from ")):
                if line in seen_imports:
                    continue
                seen_imports.add(line)
            out.append(line)
        parts.append("\n".join(out).strip("\n"))
    return "\n\n\n".join(parts) + "\n"


class Client:
    """A minimal LSP client over the server's stdio."""

    def __init__(self, proc: asyncio.subprocess.Process):
        self.proc = proc
        self.next_id = 0
        self.pending: dict[int, asyncio.Future] = {}
        self.publishes: list[tuple[float, dict]] = []
        self.publish_event = asyncio.Event()
        self.settings: dict = {}
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self):
        while True:
            header = b""
            while not header.endswith(b"\r\n\r\n"):
                chunk = await self.proc.stdout.read(1)
                if not chunk:
                    return
                header += chunk
            length = int(re.search(rb"Content-Length: (\d+)", header).group(1))
            body = json.loads(await self.proc.stdout.readexactly(length))
            now = time.perf_counter()
            if "id" in body and "method" in body:  # server -> client request
                self._send({"jsonrpc": "2.0", "id": body["id"],
                            "result": [self.settings]
                            if body["method"] == "workspace/configuration" else None})
            elif "id" in body:
                fut = self.pending.pop(body["id"], None)
                if fut is not None and not fut.done():
                    fut.set_result((now, body))
            elif body.get("method") == "textDocument/publishDiagnostics":
                self.publishes.append((now, body["params"]))
                self.publish_event.set()

    def _send(self, msg: dict) -> None:
        data = json.dumps(msg).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)

    async def request(self, method: str, params) -> tuple[float, dict]:
        self.next_id += 1
        fut = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = fut
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        await self.proc.stdin.drain()
        return await fut

    def notify(self, method: str, params) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def wait_publish(self, uri: str, version: int, after: int, timeout: float = 60):
        """Time of the first publishDiagnostics for (uri, version) among publishes[after:]."""
        deadline = time.perf_counter() + timeout
        while True:
            for when, params in self.publishes[after:]:
                if params["uri"] == uri and params.get("version") == version:
                    return when, params
            self.publish_event.clear()
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"no diagnostics for {uri} v{version}")
            try:
                await asyncio.wait_for(self.publish_event.wait(), left)
            except asyncio.TimeoutError:
                pass

    async def close(self):
        try:
            await asyncio.wait_for(self.request("shutdown", None), 10)
            self.notify("exit", None)
            await asyncio.wait_for(self.proc.wait(), 10)
        except (asyncio.TimeoutError, ConnectionError):
            self.proc.kill()
        self.reader.cancel()


def client_capabilities() -> dict:
    """VS Code's capabilities as recorded by pytest-lsp (a realistic initialize: structuring
    them is part of the start-up cost), else a minimal set; pull diagnostics left out so that
    the server pushes."""
    try:
        import pytest_lsp
        from lsprotocol import converters

        caps = converters.get_converter().unstructure(
            pytest_lsp.client_capabilities("visual-studio-code"))
        caps.get("textDocument", {}).pop("diagnostic", None)
        return caps
    except ImportError:
        return {"textDocument": {"publishDiagnostics": {"relatedInformation": True,
                                                         "versionSupport": True},
                                 "hover": {"contentFormat": ["markdown"]}},
                "workspace": {"configuration": True}, "window": {"workDoneProgress": True}}


CAPS = client_capabilities()
CAPS_NAME = "VS Code's (as recorded by pytest-lsp)" if "general" in CAPS else "a minimal set"


def server_env() -> dict:
    """The server's environment: ours, minus PYTHONDONTWRITEBYTECODE. An installed package has
    its bytecode compiled at install time; a development shell that forbids writing it would
    charge every start with compiling the server's own modules, which no user pays."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux /proc), NaN elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


async def spawn(timings: list | None = None) -> tuple[Client, float]:
    """A server answering ``initialize``; appends (wall s, server CPU s) to ``timings``."""
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *SERVER, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=open(os.environ.get("BENCH_SERVER_STDERR", os.devnull), "ab"), limit=2 ** 24,
        env=server_env())
    client = Client(proc)
    try:
        when, _ = await asyncio.wait_for(client.request(
            "initialize", {"processId": os.getpid(), "rootUri": ROOT.as_uri(),
                           "capabilities": CAPS}), 60)
    except asyncio.TimeoutError:
        proc.kill()
        raise SystemExit(f"the server did not answer initialize (exit status {proc.returncode})")
    # Read before `initialized`: the CPU the server spent up to its answer (it then waits).
    cpu = cpu_seconds(proc.pid)
    if timings is not None:
        timings.append((when - t0, cpu))
    client.notify("initialized", {})
    return client, when - t0


def _top_mappings(pid: int) -> list:
    """The server's largest resident mappings (MiB, name), to tell heap from libraries."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from server_memory_probe import top_mappings

    return top_mappings(pid, 6)


def vm_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().split("\n"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def bench(runs: int) -> dict:
    load_start = os.getloadavg()[0]
    # The very first start after an install also writes the start-up cache
    # (server/startup.py); it is reported apart from the steady-state starts.
    client, init_first = await spawn()
    await client.close()
    timings: list = []
    for _ in range(runs):
        client, _ = await spawn(timings)
        await client.close()
    init_times = [w for w, _ in timings]
    init_cpu = [c for _, c in timings]

    text = five_kernel_file()
    lines = text.split("\n")
    uri = (ROOT / "benchmarks" / "five_kernels_probe.py").as_uri()
    client, _ = await spawn()
    version = 1
    mark = len(client.publishes)
    client.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "python", "version": version, "text": text}})
    t_open = time.perf_counter()
    await client.wait_publish(uri, version, mark)
    first_publish = time.perf_counter() - t_open
    # the open runs fast then full; wait for the full one (the second publish of v1)
    while sum(1 for _, p in client.publishes if p["uri"] == uri) < 2:
        await asyncio.sleep(0.01)
    open_full = client.publishes[-1][0] - t_open

    async def save_and_time() -> float:
        mark = len(client.publishes)
        t0 = time.perf_counter()
        client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
        when, _ = await client.wait_publish(uri, version, mark)
        return when - t0

    unchanged = [await save_and_time() for _ in range(runs)]

    # Edits inside one kernel body at a time: a comment at the end of a line of that kernel.
    kernel_lines = [i for i, line in enumerate(lines) if line.lstrip().startswith("offs")
                    or "tl.program_id(" in line]
    edited = []
    for k in range(runs):
        line = kernel_lines[k % len(kernel_lines)]
        version += 1
        mark = len(client.publishes)
        col = len(lines[line])
        lines[line] += f"  # e{k}"
        client.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": {"line": line, "character": col},
                                          "end": {"line": line, "character": col}},
                                "text": f"  # e{k}"}]})
        await client.wait_publish(uri, version, mark)  # the debounced fast tier
        edited.append(await save_and_time())

    # Cold: a settings change invalidates every kernel; the server re-analyses the open file
    # (fast tier, then full): time from the notification to the full tier's diagnostics.
    cold = []
    for k in range(max(3, runs // 4)):
        client.settings = {"solverTimeoutMs": 200 + k + 1}
        mark = len(client.publishes)
        t0 = time.perf_counter()
        client.notify("workspace/didChangeConfiguration", {"settings": None})
        while sum(1 for _, p in client.publishes[mark:] if p["uri"] == uri) < 2:
            await asyncio.sleep(0.002)
        cold.append([w for w, p in client.publishes[mark:] if p["uri"] == uri][1] - t0)
    client.settings = {}
    client.notify("workspace/didChangeConfiguration", {"settings": None})
    await asyncio.sleep(0.5)

    current = "\n".join(lines)
    probes = []
    for needle, offset in (("tl.load(", 4), ("tl.store(", 4), ("#@ tensor", 4),
                           ("tl.dot(", 4), ("x = tl.load", 0), ("acc", 1)):
        for i, line in enumerate(current.split("\n")):
            if needle in line:
                probes.append((i, line.index(needle) + offset))
                break
    hovers = []
    for k in range(max(runs * 10, 100)):
        line, char = probes[k % len(probes)]
        t0 = time.perf_counter()
        await client.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                    "position": {"line": line,
                                                                 "character": char}})
        hovers.append(time.perf_counter() - t0)

    rss_before = vm_rss_mb(client.proc.pid)
    edit_line = kernel_lines[0]
    for k in range(1000):
        version += 1
        col = len(lines[edit_line])
        lines[edit_line] += "x"
        client.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": {"line": edit_line, "character": col},
                                          "end": {"line": edit_line, "character": col}},
                                "text": "x"}]})
        if k % 100 == 99:
            client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
            await client.proc.stdin.drain()
            await asyncio.sleep(0.05)
    mark = len(client.publishes)
    client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
    await client.wait_publish(uri, version, 0, timeout=120)
    await asyncio.sleep(1.0)
    rss_after = vm_rss_mb(client.proc.pid)
    mappings = _top_mappings(client.proc.pid)
    await client.close()
    return {"caps": CAPS_NAME, "init": init_times, "init_cpu": init_cpu,
            "init_first": init_first, "load": (load_start, os.getloadavg()[0]),
            "open_first_publish": first_publish, "open_full": open_full,
            "save_unchanged": unchanged, "save_edited": edited, "save_cold": cold,
            "hover": hovers, "rss_before": rss_before, "rss_after": rss_after,
            "rss_mappings": mappings,
            "lines": len(text.split("\n")), "runs": runs}


def table(r: dict) -> str:
    ms = lambda s: f"{s * 1000:.0f} ms" if s >= 0.01 else f"{s * 1000:.1f} ms"
    ok = lambda v, tgt: "yes" if v <= tgt else "NO"
    rows = [
        ("spawn -> initialize response", f"{ms(statistics.median(r['init']))}",
         ms(p95(r["init"])), "<= 500 ms", ok(p95(r["init"]), TARGETS["init"])),
        ("server CPU time up to its initialize response", ms(statistics.median(r["init_cpu"])),
         ms(p95(r["init_cpu"])), "", ""),
        ("didSave -> publishDiagnostics, one kernel edited",
         ms(statistics.median(r["save_edited"])), ms(p95(r["save_edited"])), "<= 100 ms",
         ok(p95(r["save_edited"]), TARGETS["save"])),
        ("didSave -> publishDiagnostics, nothing changed",
         ms(statistics.median(r["save_unchanged"])), ms(p95(r["save_unchanged"])), "", ""),
        ("settings change -> full diagnostics, cold (5 kernels)",
         ms(statistics.median(r["save_cold"])), ms(p95(r["save_cold"])), "", ""),
        ("hover", ms(statistics.median(r["hover"])), ms(p95(r["hover"])), "<= 20 ms",
         ok(p95(r["hover"]), TARGETS["hover"])),
        ("server RSS after 1,000 edits", f"{r['rss_after']:.0f} MB",
         f"(before: {r['rss_before']:.0f} MB)", "<= 150 MB",
         ok(r["rss_after"], TARGETS["rss"])),
    ]
    out = ["| measurement | median | p95 | target | met |", "|---|---|---|---|---|"]
    out += [f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in rows]
    return "\n".join(out)


def write_docs(path: Path, r: dict, tbl: str) -> None:
    load = "{:.1f} at the start, {:.1f} at the end".format(*r["load"])
    section = (
        f"{START}\n## Language server\n\n"
        f"Measured by `python benchmarks/bench_server.py --runs {r['runs']}` on "
        f"{time.strftime('%Y-%m-%d')}: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, 1-minute load average "
        f"{load}. The file has {r['lines']} lines and 5 kernels "
        "(vector_add, softmax, layernorm, matmul and flash_attention from examples/kernels, "
        f"bench specs left out); client capabilities: {r.get('caps', 'a minimal set')}. "
        "Opening it: first diagnostics (fast tier) after "
        f"{r['open_first_publish'] * 1000:.0f} ms, full analysis after "
        f"{r['open_full'] * 1000:.0f} ms. The first start after an install took "
        f"{r['init_first'] * 1000:.0f} ms (it writes the start-up cache of "
        f"server/startup.py; later starts read it).\n\n{tbl}\n\n"
        "\"One kernel edited\" is the everyday case: the per-kernel cache re-analyses only the "
        "kernel whose text changed. \"Cold\" follows a settings change, which invalidates every "
        "kernel's cached result.\n"
        f"{END}\n")
    old = path.read_text() if path.exists() else "# Performance\n"
    if START in old and END in old:
        new = old[:old.index(START)] + section.rstrip("\n") + old[old.index(END) + len(END):]
    else:
        new = old.rstrip("\n") + "\n\n" + section
    path.write_text(new)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=20, help="samples per measurement")
    ap.add_argument("--write-docs", metavar="PATH", help="update the server section of PATH")
    ap.add_argument("--json", metavar="PATH", help="write the raw samples as JSON")
    args = ap.parse_args()
    result = asyncio.run(bench(args.runs))
    tbl = table(result)
    print(tbl)
    print("server's largest resident mappings at the end (MiB):",
          ", ".join(f"{name} {mib:.0f}" for mib, name in result.get("rss_mappings", [])))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    if args.write_docs:
        write_docs(Path(args.write_docs), result, tbl)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
