"""Every cache of the analysis and of the server's pipeline stops growing at its bound.

A language server lives for a whole editing day; a cache that grows with the number of
documents or versions seen is a slow leak (issue 9: server RSS stepped up over 10,000
protocol sessions). These tests drive many distinct documents through the analysis API and
the server's pipeline and count entries and live objects: deterministic, no timing. The
bounds themselves are patched down so that a few dozen small documents fill them.
"""
from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz import pathological as P  # noqa: E402

from kernelsight.analysis import api, engine  # noqa: E402
from kernelsight.analysis.config import Config  # noqa: E402
from kernelsight.analysis.kernel import ParsedFile  # noqa: E402

LAUNCH = '''

def launch_{name}(x, z, BLOCK=128):
    n = x.numel()
    grid = (triton.cdiv(n, BLOCK),)
    {name}[grid](x, z, n, BLOCK=BLOCK)
'''


def distinct_document(i: int) -> str:
    """A small file of two kernels, distinct for every ``i``: an annotated one and one
    without annotations launched from a host function whose ``BLOCK`` has a default (so
    the launch inference and the launcher-default lookup run)."""
    plain = "\n".join(line for line in P.copy_kernel(f"plain_{i}").splitlines()
                      if not line.startswith("#@"))
    return (P.HEADER + P.copy_kernel(f"copy_{i}", f"    x = x * {i}.0\n") + plain
            + LAUNCH.format(name=f"plain_{i}"))


def live_parsed_files() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is ParsedFile)


@pytest.mark.timeout(300)
def test_engine_result_cache_stops_at_its_bound(monkeypatch):
    monkeypatch.setattr(engine, "_CACHE_SIZE", 8)
    engine._CACHE.clear()
    sizes = []
    for i in range(24):
        api.analyze_source(distinct_document(i), f"d{i}.py", Config(kernel_budget_ms=60_000))
        sizes.append(len(engine._CACHE))
    assert sizes[:4] == [2, 4, 6, 8]  # two kernels per document
    assert sizes[4:] == [8] * 20
    engine._CACHE.clear()


@pytest.mark.timeout(300)
def test_engine_cache_keys_hold_no_source_text():
    """A key used to hold the kernel's source and every other kernel's: 512 entries of edits
    to a large file held hundreds of MB. Now the texts enter as a digest."""
    engine._CACHE.clear()
    big = "".join(f"    x = x + {i}.0\n" for i in range(2_000))  # about 40 kB per kernel
    text = P.HEADER + P.copy_kernel("big_a", big) + P.copy_kernel("big_b", big)
    api.analyze_source(text, "big.py", Config(kernel_budget_ms=60_000))
    assert len(engine._CACHE) == 2
    for key in engine._CACHE:
        assert len(repr(key)) < 2_000, len(repr(key))
    engine._CACHE.clear()


@pytest.mark.timeout(300)
def test_no_module_level_cache_keeps_past_documents_alive():
    """The launch inference and the launcher defaults used to keep up to 65 ParsedFiles
    (every kernel's tree included) in module-level tables; now they live on the ParsedFile.
    What may stay: the last file's whole-module tree (infer.module_tree)."""
    engine._CACHE.clear()
    baseline = live_parsed_files()
    for i in range(30):
        report = api.analyze_source(distinct_document(i), f"d{i}.py",
                                    Config(kernel_budget_ms=60_000)).report
        assert [k.status for k in report.kernels] == ["analysed", "analysed"], report.kernels
    del report
    assert live_parsed_files() - baseline <= 1
    engine._CACHE.clear()


@pytest.mark.timeout(300)
def test_server_pipeline_caches_stop_at_their_bounds(monkeypatch):
    from kernelsight.server import pipeline

    monkeypatch.setattr(pipeline, "FRONT_CACHE", pipeline.FrontCache(max_entries=4))
    kernel_cache = pipeline.KernelCache(max_entries=6)
    engine._CACHE.clear()
    baseline = live_parsed_files()
    sizes = []
    for i in range(16):
        text = distinct_document(i)
        pipeline.run_analysis(text, f"/tmp/d{i}.py", Config(kernel_budget_ms=60_000),
                              fast=True)
        result = pipeline.run_analysis(text, f"/tmp/d{i}.py", Config(kernel_budget_ms=60_000),
                                       fast=False, cache=kernel_cache)
        assert result.stats.front_cached  # the fast tier's parse was reused
        sizes.append((len(kernel_cache), len(pipeline.FRONT_CACHE._data)))
    assert sizes[:3] == [(2, 1), (4, 2), (6, 3)]
    assert sizes[3] == (6, 4) and set(sizes[3:]) == {(6, 4)}
    del result
    # the front cache's four ParsedFiles (plus the last module tree's) and nothing else
    assert live_parsed_files() - baseline <= 5
    engine._CACHE.clear()


def _straight_kernel(name: str, lines: int) -> str:
    """A kernel of ``lines`` statements: about one hover record per statement."""
    return P.copy_kernel(name, "".join(f"    x = x * 1.0001 + {i % 7}.0\n"
                                       for i in range(lines)))


@pytest.mark.timeout(300)
def test_engine_cache_is_bounded_by_the_records_its_results_hold(monkeypatch):
    """Entry counts alone let 512 results of 200-line kernels (200 hover records each) hold
    100 MB; the records of all cached results are bounded too, the newest always stays."""
    monkeypatch.setattr(engine, "_CACHE_MAX_RECORDS", 250)
    engine._CACHE.clear()
    records = []
    for i in range(8):
        api.analyze_source(P.HEADER + _straight_kernel(f"long_{i}", 60), f"l{i}.py",
                           Config(kernel_budget_ms=60_000))
        per_entry = [engine.result_records(r) for r in engine._CACHE.values()]
        assert min(per_entry) > 60  # the hover records are what is counted
        records.append((len(per_entry), sum(per_entry)))
    assert all(total <= 250 for _, total in records), records
    assert records[-1][0] == records[-2][0] < 8  # it stopped growing, by records
    engine._CACHE.clear()


def test_server_kernel_cache_is_bounded_by_records_and_keeps_the_newest():
    from kernelsight.analysis.engine import KernelAnalysis
    from kernelsight.server import pipeline

    cache = pipeline.KernelCache(max_entries=100, max_records=50)
    big = KernelAnalysis(hovers=[object()] * 19)  # 20 records
    for i in range(10):
        cache.put(("k", i), (big, 0.1))
        assert cache.records <= 50 and len(cache) == min(i + 1, 2)
    huge = KernelAnalysis(hovers=[object()] * 99)  # 100 records: more than the bound alone
    cache.put(("huge",), (huge, 0.1))
    assert len(cache) == 1 and cache.get(("huge",)) == (huge, 0.1)
    cache.put(("huge",), (big, 0.1))  # replacing an entry recounts it
    assert cache.records == 20
