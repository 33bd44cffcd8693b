"""The long robustness run: mutated kernels through the full analysis, and random LSP sessions
through one real server, in parallel; prints the seed, the duration, crashes, hangs and the
server's resident memory sampled across the run.

Usage:
    python benchmarks/fuzz_long.py [--seed N] [--docs 100000] [--sequences 10000]
        [--workers 2] [--minutes M] [--doc-timeout 60] [--crash-dir DIR] [--json FILE]

Documents: document ``i`` is ``mutate(seed document, Random(f"{seed}/doc/{i}"))`` over the
examples, the shared cases and one-kernel pieces of the real corpus (when downloaded), so any
failure is regenerated from (seed, i) alone; failing documents are also written to
``--crash-dir``. Each goes through ``tests/fuzz/check.py`` (``analyze_source`` with the default
Config, report well-formed, no internal error) in a worker process; a document still running
after ``--doc-timeout`` seconds is a hang (the worker is killed and replaced).

Sequences: sequence ``j`` draws 1-25 operations from ``Random(f"{seed}/seq/{j}")``
(tests/fuzz/protocol.py) against one ``python -m kernelsight serve`` process; an unanswered
request, an InternalError answer or a dead server is a failure (the server is restarted and
the run goes on). Resident memory of the server is read from /proc every 100 sequences.

``--minutes`` stops handing out new work after that many minutes and reports what was done.
Exit status 0 when there were no crashes, no hangs, no protocol failures and flat memory.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import statistics
import sys
import threading
import time
import traceback
from multiprocessing.connection import wait as mp_wait
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


# --------------------------------------------------------------------------- documents

def document_pool() -> tuple[list[str], list[str]]:
    """(local seeds, one-kernel pieces of the corpus)."""
    from fuzz import sources

    local = [t for _, t in sources.local_seeds()]
    chunks: list[str] = []
    for p in sources.corpus_files():
        chunks.extend(sources.kernel_chunks(p.read_bytes().decode("utf-8", "replace")))
    return local, chunks


def make_document(seed: int, i: int, local: list[str], chunks: list[str]) -> str:
    from fuzz import mutate

    rnd = random.Random(f"{seed}/doc/{i}")
    pool = chunks if chunks and rnd.random() < 0.6 else local
    return mutate.mutate(rnd.choice(pool), rnd, donor=rnd.choice(pool))


def _worker(conn, seed: int) -> None:
    from fuzz import check

    local, chunks = document_pool()
    conn.send(("ready", os.getpid()))
    while True:
        msg = conn.recv()
        if msg is None:
            return
        i = msg
        text = make_document(seed, i, local, chunks)
        t0 = time.perf_counter()
        try:
            check.check_document(text, f"doc{i}.py")
            outcome, detail = "ok", ""
        except Exception as exc:  # the property failed: report it, keep going
            outcome = "crash"
            detail = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-3000:]}"
        conn.send((i, outcome, time.perf_counter() - t0, detail, _rss(os.getpid())))


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class DocumentRun:
    def __init__(self, args, stop_at: float):
        self.args = args
        self.stop_at = stop_at
        self.done = 0
        self.crashes: list[dict] = []
        self.hangs: list[dict] = []
        self.seconds: list[float] = []
        self.worker_rss: list[int] = []
        self.ctx = mp.get_context("spawn")

    def _spawn(self):
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker, args=(child, self.args.seed), daemon=True)
        proc.start()
        tag, _ = parent.recv()
        assert tag == "ready"
        return {"proc": proc, "conn": parent, "doc": None, "since": 0.0}

    def _save(self, i: int, kind: str) -> str:
        local, chunks = self._pool
        d = Path(self.args.crash_dir)
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"{kind}-seed{self.args.seed}-doc{i}.py"
        path.write_text(make_document(self.args.seed, i, local, chunks), errors="surrogatepass")
        return str(path)

    def run(self) -> None:
        self._pool = document_pool()
        workers = [self._spawn() for _ in range(self.args.workers)]
        next_doc = 0

        def give(w):
            nonlocal next_doc
            if next_doc < self.args.docs and time.time() < self.stop_at:
                w["doc"], w["since"] = next_doc, time.monotonic()
                w["conn"].send(next_doc)
                next_doc += 1
            else:
                w["doc"] = None

        for w in workers:
            give(w)
        while any(w["doc"] is not None for w in workers):
            busy = [w for w in workers if w["doc"] is not None]
            ready = mp_wait([w["conn"] for w in busy], timeout=1.0)
            for w in busy:
                if w["conn"] in ready:
                    try:
                        i, outcome, secs, detail, rss = w["conn"].recv()
                    except EOFError:  # the worker died (a crash outside Python's reach)
                        i, outcome, secs, detail, rss = w["doc"], "crash", 0.0, \
                            f"worker died: exit {w['proc'].exitcode}", 0
                        w.update(self._spawn())
                    self.done += 1
                    self.seconds.append(secs)
                    if rss:
                        self.worker_rss.append(rss)
                    if outcome != "ok":
                        self.crashes.append({"doc": i, "detail": detail,
                                             "file": self._save(i, "crash")})
                        print(f"CRASH doc {i}: {detail.splitlines()[0]}", flush=True)
                    give(w)
                elif time.monotonic() - w["since"] > self.args.doc_timeout:
                    i = w["doc"]
                    w["proc"].kill()
                    w["proc"].join(5)
                    self.done += 1
                    self.hangs.append({"doc": i, "file": self._save(i, "hang")})
                    print(f"HANG doc {i} (> {self.args.doc_timeout:.0f} s)", flush=True)
                    w.update(self._spawn())
                    give(w)
        for w in workers:
            try:
                w["conn"].send(None)
            except (BrokenPipeError, OSError):
                pass
            w["proc"].join(5)


# --------------------------------------------------------------------------- sequences

class ProtocolRun:
    def __init__(self, args, stop_at: float, seeds: list[str]):
        self.args = args
        self.stop_at = stop_at
        self.seeds = seeds
        self.done = 0
        self.requests = 0
        self.failures: list[dict] = []
        self.rss: list[tuple[int, int]] = []  # (sequence index, KiB)
        self.restarts = 0
        self.final_exit_code = None

    def _start(self, root: Path):
        from fuzz.lsp_client import RawClient

        client = RawClient(cwd=str(root))
        client.initialize(root)
        return client

    def run(self) -> None:
        import tempfile

        from fuzz import protocol

        root = Path(tempfile.mkdtemp(prefix="ksfuzz-long"))
        client = self._start(root)
        gen = protocol.SequenceGenerator(self.seeds, root.as_uri())
        for j in range(self.args.sequences):
            if time.time() >= self.stop_at:
                break
            rnd = random.Random(f"{self.args.seed}/seq/{j}")
            try:
                res = protocol.run_sequence(client, gen, rnd, n_ops=rnd.randint(1, 25),
                                            answer_timeout=self.args.answer_timeout)
                self.requests += res.requests
            except AssertionError as exc:  # ServerDied, NoAnswer, HandlerCrash
                self.failures.append({"sequence": j, "kind": type(exc).__name__,
                                      "detail": str(exc)[:4000]})
                print(f"PROTOCOL {type(exc).__name__} in sequence {j}: "
                      f"{str(exc).splitlines()[0]}", flush=True)
                client.shutdown(timeout=5)
                client = self._start(root)
                self.restarts += 1
            self.done += 1
            if j % 100 == 0:
                self.rss.append((j, client.rss_kib()))
        self.rss.append((self.done, client.rss_kib()))
        alive = client.alive()
        self.final_exit_code = client.shutdown()
        self.alive_at_end = alive


def flat(samples: list[int], tolerance: float = 0.2) -> bool:
    """Memory is flat when the median of the last quarter of the samples is within
    ``tolerance`` (+16 MiB) of the median of the second quarter (after warm-up)."""
    if len(samples) < 8:
        return True
    q = len(samples) // 4
    base = statistics.median(samples[q:2 * q])
    last = statistics.median(samples[3 * q:])
    return last <= base * (1 + tolerance) + 16_384


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--sequences", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--minutes", type=float, default=0.0, help="0 = no time limit")
    ap.add_argument("--doc-timeout", type=float, default=60.0)
    ap.add_argument("--answer-timeout", type=float, default=60.0)
    ap.add_argument("--crash-dir", default="/tmp/ksfuzz-crashes")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(2**31)
    started = time.time()
    stop_at = started + args.minutes * 60 if args.minutes else float("inf")
    print(f"seed={args.seed} docs={args.docs} sequences={args.sequences} "
          f"workers={args.workers} minutes={args.minutes or 'unlimited'}", flush=True)

    docs = DocumentRun(args, stop_at)
    local, chunks = document_pool()
    seq_rnd = random.Random(args.seed)
    seeds = local + seq_rnd.sample(chunks, min(len(chunks), 400))
    # a run without the corpus is much lighter: say which pool the documents come from
    print(f"document pool: {len(local)} local seeds, {len(chunks)} one-kernel corpus pieces"
          f"{'' if chunks else ' (corpus not downloaded)'}", flush=True)
    proto = ProtocolRun(args, stop_at, seeds)
    t_docs = threading.Thread(target=docs.run, name="documents")
    t_proto = threading.Thread(target=proto.run, name="protocol")
    t_docs.start()
    t_proto.start()
    while t_docs.is_alive() or t_proto.is_alive():
        tick = time.time() + 60
        while time.time() < tick and (t_docs.is_alive() or t_proto.is_alive()):
            time.sleep(0.5)
        rss = proto.rss[-1][1] if proto.rss else 0
        print(f"[{(time.time() - started) / 60:5.1f} min] docs {docs.done} "
              f"(crashes {len(docs.crashes)}, hangs {len(docs.hangs)}) | sequences "
              f"{proto.done} (failures {len(proto.failures)}) | server RSS {rss} KiB",
              flush=True)
    t_proto.join()
    duration = time.time() - started
    server_rss = [kib for _, kib in proto.rss]
    secs = sorted(docs.seconds) or [0.0]
    summary = {
        "seed": args.seed,
        "duration_s": round(duration, 1),
        "documents": docs.done,
        "document_crashes": len(docs.crashes),
        "document_hangs": len(docs.hangs),
        "document_seconds": {"mean": round(statistics.mean(secs), 4),
                             "p50": round(secs[len(secs) // 2], 4),
                             "p99": round(secs[int(len(secs) * 0.99)], 4),
                             "max": round(secs[-1], 2)},
        "sequences": proto.done,
        "requests": proto.requests,
        "protocol_failures": len(proto.failures),
        "server_restarts": proto.restarts,
        "server_alive_at_end": getattr(proto, "alive_at_end", False),
        "server_exit_code": proto.final_exit_code,
        "server_rss_kib": proto.rss,
        "server_memory_flat": flat(server_rss),
        "worker_rss_kib": {"first": docs.worker_rss[:1], "max": max(docs.worker_rss or [0]),
                           "last": docs.worker_rss[-1:]},
        "crashes": docs.crashes[:20],
        "hangs": docs.hangs[:20],
        "failures": proto.failures[:20],
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "server_rss_kib"}, indent=1))
    print("server RSS (sequence, KiB):", proto.rss)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    ok = (not docs.crashes and not docs.hangs and not proto.failures
          and summary["server_memory_flat"] and summary["server_alive_at_end"])
    print(f"RESULT seed={args.seed} duration={duration / 60:.1f} min documents={docs.done} "
          f"sequences={proto.done}: {len(docs.crashes)} crashes, {len(docs.hangs)} hangs, "
          f"{len(proto.failures)} protocol failures, server memory "
          f"{'flat' if summary['server_memory_flat'] else 'GROWING'} "
          f"({server_rss[0] if server_rss else 0} -> {server_rss[-1] if server_rss else 0} KiB)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
