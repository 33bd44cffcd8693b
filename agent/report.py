"""The run report: markdown plus a PNG of the best speedup over the candidates.

``write_report`` reads only the run record (``agent.record.RunRecord``), so a report can be
rebuilt from any run directory, also one whose run was interrupted.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .record import RunRecord


def _fmt(x: Any, spec: str = ".3f", none: str = "-") -> str:
    if x is None:
        return none
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return str(x)
    try:
        return format(x, spec)
    except (TypeError, ValueError):
        return str(x)


def _cell(v: Any) -> str:
    if isinstance(v, dict):
        return " ".join(f"{k}={x}" for k, x in v.items())
    if isinstance(v, float):
        return _fmt(v, ".4g")
    return "" if v is None else str(v)


def best_curve(entries: list[dict[str, Any]]) -> list[tuple[int, float | None]]:
    """(candidate index, best accepted score up to and including it) for each candidate."""
    best = None
    out = []
    for i, e in enumerate(entries):
        s = e.get("score")
        if e.get("status") in ("seed", "accepted", "passed") and isinstance(s, (int, float)):
            best = s if best is None else max(best, s)
        out.append((i, best))
    return out


def plot_best(entries: list[dict[str, Any]], path: str | Path) -> Path | None:
    """Write the best-speedup-so-far curve to ``path`` (matplotlib, Agg backend).

    Returns the path, or None when no candidate was timed (an empty plot would suggest a
    measurement that did not happen).
    """
    curve = best_curve(entries)
    if not any(b is not None for _, b in curve):
        return None
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError:  # the agent extra is not installed: the markdown still has the table
        return None

    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    xs = [i for i, b in curve if b is not None]
    ys = [b for _, b in curve if b is not None]
    ax.step(xs, ys, where="post", label="best accepted", color="tab:blue")
    pts = [(i, e["score"]) for i, e in enumerate(entries)
           if isinstance(e.get("score"), (int, float))]
    if pts:
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=12, color="tab:gray",
                   label="timed candidates", zorder=3)
    ax.axhline(1.0, color="tab:red", lw=0.8, ls="--", label="baseline")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    values = ys + [p[1] for p in pts] + [1.0]
    if max(values) / max(min(values), 1e-9) > 5:
        ax.set_yscale("log")  # a 20x climb and the 1.0 line both stay readable
    ax.set_xlabel("candidate")
    ax.set_ylabel("speedup over the baseline (geomean)")
    ax.legend(loc="best", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return Path(path)


def per_size_rows(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-shape timing rows of one candidate's timing stage (whatever the harness recorded)."""
    for st in entry.get("stages") or []:
        if st.get("stage") == "timing":
            rows = st.get("data", {}).get("shapes") or st.get("data", {}).get("rows") or []
            return [r for r in rows if isinstance(r, dict)]
    return []


def write_report(record: RunRecord, *, result: dict[str, Any],
                 planner_table: list[dict[str, Any]] | None = None) -> Path:
    """Write ``report.md`` (and ``best_speedup.png`` when something was timed) into the run
    directory; returns the markdown's path.

    ``result`` holds ``best_id``, ``seed_score``, ``best_score``, ``stop_reason``, ``device``,
    ``proposer``, ``timed`` and ``notes``.
    """
    entries = [e.data for e in record.entries]
    meta = record.meta
    totals = record.totals()
    png = plot_best(entries, record.root / "best_speedup.png")
    lines = [f"# Optimization report: `{meta.get('file')}::{meta.get('kernel')}`", ""]
    lines += [f"- proposer: {result.get('proposer')}",
              f"- device: {result.get('device') or 'unknown'}",
              f"- stopped: {result.get('stop_reason')}",
              f"- candidates evaluated: {len(entries)}",
              f"- LLM calls: {totals['llm_calls']}, tokens: {totals['tokens']} "
              f"(prompt {totals['prompt_tokens']}, completion {totals['completion_tokens']}), "
              f"dollars: ${totals['dollars']:.4f}",
              f"- wall time: {record.wall_seconds() / 60:.1f} min"]
    seed, best = result.get("seed_score"), result.get("best_score")
    if not result.get("timed"):
        lines.append("- **no timing**: this machine could not time the kernels, so no candidate "
                     "is claimed faster; candidates were gated (invariants, compile, "
                     "correctness) only.")
    else:
        lines.append(f"- seed: {_fmt(seed)}x the baseline; best: {_fmt(best)}x "
                     f"({result.get('best_id')})" + (
                         f", {best / seed:.2f}x the seed" if seed and best else ""))
    for note in result.get("notes") or []:
        lines.append(f"- note: {note}")
    lines.append("")
    if png:
        lines += [f"![best speedup over candidates]({png.name})", ""]
    best_entry = next((e for e in entries if e.get("id") == result.get("best_id")), None)
    rows = per_size_rows(best_entry) if best_entry else []
    if rows:
        keys = [k for k in rows[0] if k not in ("error", "feedback", "seed")
                and isinstance(rows[0][k], (int, float, str, bool, dict, type(None)))]
        lines += ["## Per size (best candidate)", "", "| " + " | ".join(keys) + " |",
                  "|" + "---|" * len(keys)]
        for r in rows:
            lines.append("| " + " | ".join(_cell(r.get(k)) for k in keys) + " |")
        lines.append("")
    flagged = [e for e in entries if e.get("status") == "flagged"]
    if flagged:
        lines += ["## Held for review", ""]
        lines += [f"- {e['id']}: {e.get('flagged')}" for e in flagged]
        lines.append("")
    lines += ["## Candidates", "",
              "| id | parent | proposer | strategy | launch | status | stage | score | summary |",
              "|---|---|---|---|---|---|---|---|---|"]
    for e in entries:
        summary = ""
        for st in e.get("stages") or []:
            if not st.get("ok"):
                summary = st.get("summary", "")
                break
        else:
            summary = (e.get("stages") or [{}])[-1].get("summary", "") if e.get("stages") else \
                (e.get("error") or "")
        launch = ", ".join(f"{k}={v}" for k, v in (e.get("launch") or {}).items())
        lines.append(f"| {e.get('id')} | {e.get('parent') or '-'} | {e.get('proposer')} | "
                     f"{e.get('strategy') or '-'} | {launch or '-'} | {e.get('status')} | "
                     f"{e.get('failed_stage') or '-'} | {_fmt(e.get('score'))} | "
                     f"{str(summary).replace('|', '/')[:120]} |")
    lines.append("")
    if planner_table:
        lines += ["## Strategies (bandit)", "", "| strategy | pulls | mean reward |",
                  "|---|---|---|"]
        lines += [f"| {r['strategy']} | {r['pulls']} | {_fmt(r['mean_reward'], '.2f')} |"
                  for r in planner_table]
        lines.append("")
    diff = result.get("diff")
    if diff:
        lines += ["## Diff of the best candidate against the original", "", "```diff",
                  diff.rstrip(), "```", ""]
    return record.write_file("report.md", "\n".join(lines))
