"""Protocol fuzzing of the real server (``python -m kernelsight serve`` over stdio).

Random sequences of didOpen / didChange (random, past-the-end, reversed and negative ranges) /
didSave / hover / codeAction / completion / signatureHelp / documentSymbol / codeLens /
inlayHint / didClose / $/cancelRequest on mutated kernels: every request must be answered
(a result, or a proper error for a malformed request), and the server must stay alive and
responsive. One server per test, many sequences through it, as in an editor session.
"""
from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz import protocol, sources  # noqa: E402
from fuzz.lsp_client import RawClient  # noqa: E402
from fuzz.settings import fuzz_settings, maybe_seed  # noqa: E402

SEEDS = [text for _, text in sources.local_seeds()]
CORPUS = sources.corpus_files()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("ksfuzz")
    client = RawClient(cwd=str(root))
    client.initialize(root)
    client.root = root
    yield client
    assert client.alive(), client._death()
    assert client.shutdown() == 0


@pytest.fixture(scope="module")
def pull_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("ksfuzz-pull")
    client = RawClient(cwd=str(root))
    client.initialize(root, pull=True)
    client.root = root
    yield client
    assert client.shutdown() == 0


@pytest.mark.timeout(300)
@maybe_seed
@fuzz_settings(max_examples=60)
@given(rnd_seed=st.integers(min_value=0, max_value=2**32 - 1),
       n_ops=st.integers(min_value=1, max_value=25))
def test_random_sessions_are_answered_and_the_server_stays_up(server, rnd_seed, n_ops):
    gen = protocol.SequenceGenerator(SEEDS, server.root.as_uri())
    protocol.run_sequence(server, gen, random.Random(rnd_seed), n_ops=n_ops,
                          answer_timeout=60)


@pytest.mark.timeout(300)
def test_pull_mode_sessions_are_answered(pull_server):
    gen = protocol.SequenceGenerator(SEEDS, pull_server.root.as_uri())
    rnd = random.Random(7)
    for _ in range(25):
        protocol.run_sequence(pull_server, gen, rnd, n_ops=12, answer_timeout=60)
    assert pull_server.alive()


@pytest.mark.timeout(300)
def test_memory_stays_flat_across_sessions(server):
    """200 sequences after a warm-up: resident memory may not keep growing (the last sample
    may not be more than 25% + 16 MiB above the one in the middle)."""
    gen = protocol.SequenceGenerator(SEEDS, server.root.as_uri())
    rnd = random.Random(11)
    for _ in range(40):  # warm-up: imports, caches, the kernel cache filling up
        protocol.run_sequence(server, gen, rnd, n_ops=10)
    samples = []
    for i in range(200):
        protocol.run_sequence(server, gen, rnd, n_ops=10)
        if i % 20 == 0:
            samples.append(server.rss_kib())
    assert samples[-1] <= samples[len(samples) // 2] * 1.25 + 16_384, samples


@pytest.mark.timeout(300)
@pytest.mark.skipif(not CORPUS, reason="real-kernel corpus not downloaded")
def test_corpus_sample_opened_one_after_another_is_answered(server):
    """A sample of the real corpus (every 40th file): each file opened gets its diagnostics,
    a hover and a code action answered, and is closed; the server ends alive."""
    sample = CORPUS[::40]
    for path in sample:
        uri = path.as_uri()
        text = path.read_bytes().decode("utf-8", errors="replace")
        server.diagnostics.pop(uri, None)
        server.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": text}})
        server.request("textDocument/hover", {"textDocument": {"uri": uri},
                                              "position": {"line": 0, "character": 0}})
        deadline = time.monotonic() + 60
        while uri not in server.diagnostics:
            assert time.monotonic() < deadline, f"no diagnostics for {path}"
            assert server.alive(), server._death()
            time.sleep(0.02)
        server.request("textDocument/codeAction", {
            "textDocument": {"uri": uri},
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 5, "character": 0}},
            "context": {"diagnostics": server.diagnostics[uri][:5]}})
        server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert server.alive()


@pytest.mark.timeout(300)
def test_long_run_script_reports_a_clean_short_run(tmp_path):
    """benchmarks/fuzz_long.py end to end on a tiny budget (so that the script cannot rot
    between long runs): it prints its RESULT line and exits 0 on a clean run."""
    import json
    import subprocess

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "fuzz_long.py"
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [sys.executable, str(script), "--seed", "3", "--docs", "12", "--sequences", "4",
         "--workers", "1", "--crash-dir", str(tmp_path / "crashes"), "--json", str(out)],
        capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "RESULT seed=3" in proc.stdout
    summary = json.loads(out.read_text())
    assert summary["documents"] == 12 and summary["sequences"] == 4
    assert summary["server_alive_at_end"] and summary["server_exit_code"] == 0
