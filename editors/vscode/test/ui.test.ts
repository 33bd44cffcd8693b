import { test } from "node:test";
import assert from "node:assert/strict";

import { kernelFromArguments, kernelName, pickKernelLens, type KernelLens } from "../src/kernels";
import { ProgressTracker } from "../src/progress";
import { reportMarkdown, reportSummary } from "../src/report";
import { statusView } from "../src/status";

const lens = (line: number, command = "kernelsight.optimize"): KernelLens =>
  ({ line, command, title: "Optimize", arguments: [{ line }] });

test("the kernel under the cursor is the nearest lens at or above it", () => {
  const lenses = [lens(40), lens(10), lens(25, "kernelsight.benchmark"), lens(25)];
  assert.equal(pickKernelLens(lenses, 30, "kernelsight.optimize").chosen?.line, 25);
  assert.equal(pickKernelLens(lenses, 40, "kernelsight.optimize").chosen?.line, 40);
  assert.equal(pickKernelLens(lenses, 99, "kernelsight.optimize").chosen?.line, 40);
  // Above every kernel of a file with several: the caller asks.
  const above = pickKernelLens(lenses, 3, "kernelsight.optimize");
  assert.equal(above.chosen, undefined);
  assert.deepEqual(above.candidates.map((c) => c.line), [10, 25, 40]);
});

test("a file with one kernel needs no choice, a file with none reports it", () => {
  assert.equal(pickKernelLens([lens(12)], 0, "kernelsight.optimize").chosen?.line, 12);
  assert.deepEqual(pickKernelLens([lens(12, "other")], 20, "kernelsight.optimize"),
    { chosen: undefined, candidates: [] });
});

test("the kernel name is read from the def below the lens", () => {
  const lines = ["#@ tensor X = x_ptr[i: N]", "@triton.jit", "def add_kernel(x_ptr, N):", "    pass"];
  assert.equal(kernelName(lens(0), (i) => lines[i]), "add_kernel");
  assert.equal(kernelName(lens(3), (i) => lines[i]), "line 4");
});

test("the kernel name comes from the server command's [uri, kernel] arguments", () => {
  assert.equal(kernelFromArguments(["file:///k.py", "add_kernel"]), "add_kernel");
  assert.equal(kernelFromArguments(["file:///k.py"]), undefined);
  assert.equal(kernelFromArguments([{ uri: "x" }, 3]), undefined);
});

test("progress shows the newest running task and clears when all end", () => {
  const t = new ProgressTracker();
  t.update("a", { kind: "begin", title: "Analysing", percentage: 0 });
  t.update("b", { kind: "begin", title: "Benchmarking add_kernel" });
  t.update("b", { kind: "report", message: "shape 2/3", percentage: 66 });
  assert.deepEqual(t.current(), { title: "Benchmarking add_kernel", message: "shape 2/3", percentage: 66 });
  assert.equal(ProgressTracker.label(t.current()!), "Benchmarking add_kernel: shape 2/3");
  t.update("b", { kind: "end" });
  assert.equal(t.current()?.title, "Analysing");
  t.update("zzz", { kind: "report", message: "stray" });
  t.update("a", { kind: "end" });
  assert.equal(t.current(), undefined);
});

test("each server state has a distinct status bar text and click action", () => {
  const py = { path: "/v/bin/python", source: "setting" };
  assert.equal(statusView({ kind: "ready", version: "0.1.0" }, py).text, "$(check) Kernelsight");
  assert.match(statusView({ kind: "ready", version: "0.1.0" }, py).tooltip, /Kernelsight 0\.1\.0: running\nPython: \/v\/bin\/python \(from kernelsight\.interpreter\)/);
  assert.equal(statusView({ kind: "stopped" }).command, "kernelsight.restartServer");
  const missing = statusView({ kind: "not-installed", python: "python3" });
  assert.equal(missing.command, "kernelsight.howToInstall");
  assert.equal(missing.level, "warning");
  assert.equal(statusView({ kind: "failed", detail: "x" }).level, "error");
  assert.equal(statusView({ kind: "busy", title: "Optimizing k", percentage: 41.6 }).text,
    "$(loading~spin) Kernelsight: Optimizing k 42%");
});

test("reports render markdown results as they are and other values as JSON", () => {
  const base = { command: "kernelsight.benchmark", kernel: "add_kernel", uri: "file:///k.py",
    finishedAt: new Date("2026-01-02T03:04:05Z") };
  const md = reportMarkdown({ ...base, result: { markdown: "| N | ms |\n|---|---|\n| 4096 | 0.01 |" } });
  assert.match(md, /^# Benchmark: `add_kernel`/);
  assert.match(md, /\| 4096 \| 0\.01 \|/);
  assert.match(reportMarkdown({ ...base, result: { best_ms: 0.5 } }), /```json\n\{\n {2}"best_ms": 0\.5\n\}\n```/);
  assert.match(reportMarkdown({ ...base, error: "the agent extra is not installed" }),
    /\*\*Failed:\*\* the agent extra is not installed/);
  assert.equal(reportSummary({ ...base, result: { summary: "1.8x faster" } }),
    "Kernelsight Benchmark of add_kernel: 1.8x faster");
  assert.equal(reportSummary({ ...base, error: "cancelled" }), "Kernelsight Benchmark of add_kernel failed: cancelled");
});

test("the server's own result shapes become readable reports", () => {
  const base = { kernel: "add_kernel", uri: "file:///k.py", finishedAt: new Date(0) };
  const bench = { ...base, command: "kernelsight.benchmark",
    result: { ok: true, status: "ok", output: ["N=4096  0.010 ms", "N=16M  0.21 ms  1.6 TB/s"] } };
  assert.match(reportMarkdown(bench), /```text\nN=4096 {2}0\.010 ms\nN=16M {2}0\.21 ms {2}1\.6 TB\/s\n```/);
  assert.equal(reportSummary(bench), "Kernelsight Benchmark of add_kernel finished.");

  const missing = { ...base, command: "kernelsight.optimize",
    result: { ok: false, reason: "needs the agent extra (missing: litellm)" } };
  assert.equal(reportSummary(missing), "Kernelsight Optimize of add_kernel failed: needs the agent extra (missing: litellm)");
  assert.match(reportMarkdown(missing), /\*\*Failed:\*\* needs the agent extra/);

  const discarded = { ...base, command: "kernelsight.optimize", result: { ok: true, applied: false, reason: "discarded" } };
  assert.equal(reportSummary(discarded), "Kernelsight Optimize of add_kernel: nothing applied (discarded).");
  assert.match(reportMarkdown(discarded), /Rewrite applied: no \(discarded\)/);
});
