import { test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { installFakeVscode, makeFakeVscode } from "./fakeVscode";

type ExtensionModule = typeof import("../src/extension");

function fakePython(dir: string, script: string): string {
  const path = join(dir, "python");
  writeFileSync(path, `#!/bin/sh\n${script}\n`);
  chmodSync(path, 0o755);
  return path;
}

// One fake for the whole file: Node caches extension.js with the `vscode` it first received.
const fake = makeFakeVscode(mkdtempSync(join(tmpdir(), "ks-vscode-")));
const uninstall = installFakeVscode(fake.api);
const ext = createRequire(__filename)("../src/extension") as ExtensionModule;
uninstall();

async function activateWith(settings: Record<string, unknown>, answer?: string) {
  const state = fake.state;
  state.commands.clear();
  state.executed.length = 0;
  state.messages.length = 0;
  state.terminal = undefined;
  state.settings = settings;
  state.answer = answer;
  const context = { subscriptions: [] as { dispose(): void }[], extension: { packageJSON: {} },
    extensionUri: { fsPath: "/ext", path: "/ext", scheme: "file" } };
  await ext.activate(context as never);
  // Let the message promise chain (the chosen action) run.
  await new Promise((r) => setTimeout(r, 50));
  return { state, ext };
}

test("activation registers the palette commands and shows the status item", { skip: process.platform === "win32" }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "ks-py-"));
  const python = fakePython(dir, 'echo "$0: No module named kernelsight" >&2; exit 1');
  const { state, ext } = await activateWith({ interpreter: python });
  for (const id of ["kernelsight.optimizeKernel", "kernelsight.benchmarkKernel", "kernelsight.showLastReport",
    "kernelsight.restartServer", "kernelsight.showOutput", "kernelsight.howToInstall"]) {
    assert.ok(state.commands.has(id), `${id} not registered`);
  }
  assert.equal(state.status.visible, true);
  await ext.deactivate();
});

test("a Python without kernelsight gives a clear error with install actions", { skip: process.platform === "win32" }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "ks-py-"));
  const python = fakePython(dir, 'echo "$0: No module named kernelsight" >&2; exit 1');
  const { state, ext } = await activateWith({ interpreter: python }, "Install in terminal");
  assert.equal(state.status.text, "$(warning) Kernelsight: not installed");
  assert.equal(state.status.command, "kernelsight.howToInstall");
  const err = state.messages.find((m) => m.level === "error");
  assert.ok(err, JSON.stringify(state.messages));
  assert.match(err.text, new RegExp(`kernelsight is not installed for ${python}`));
  assert.deepEqual(err.items, ["How to install", "Install in terminal", "Choose interpreter"]);
  // The install command is typed into a terminal but not run: the user confirms it.
  assert.deepEqual(state.terminal?.sent, [{ text: `${python} -m pip install kernelsight`, addNewLine: false }]);
  await ext.deactivate();
});

test("\"How to install\" opens the bundled README", { skip: process.platform === "win32" }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "ks-py-"));
  const python = fakePython(dir, 'echo "No module named kernelsight" >&2; exit 1');
  const { state, ext } = await activateWith({ interpreter: python }, "How to install");
  const preview = state.executed.find((e) => e.id === "markdown.showPreview");
  assert.ok(preview, JSON.stringify(state.executed));
  assert.equal((preview.args[0] as { fsPath: string }).fsPath, join("/ext", "README.md"));
  await ext.deactivate();
});

test("an interpreter that does not exist is reported, not mistaken for a missing package", async () => {
  const { state, ext } = await activateWith({ interpreter: "/no/such/dir/python" });
  const err = state.messages.find((m) => m.level === "error");
  assert.ok(err);
  assert.match(err.text, /cannot run '\/no\/such\/dir\/python' \(ENOENT\)/);
  assert.equal(state.status.text, "$(error) Kernelsight");
  assert.match(state.status.tooltip, /cannot run/);
  await ext.deactivate();
});

test("a broken kernelsight install shows the failure and its last line in the status bar", { skip: process.platform === "win32" }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "ks-py-"));
  const python = fakePython(dir, `echo "ModuleNotFoundError: No module named 'kernelsight.commands.bench'" >&2; exit 1`);
  const { state, ext } = await activateWith({ interpreter: python });
  assert.equal(state.status.text, "$(error) Kernelsight");
  assert.match(state.status.tooltip, /exited with 1: ModuleNotFoundError: No module named 'kernelsight\.commands\.bench'/);
  assert.equal(state.status.backgroundColor?.id, "statusBarItem.errorBackground");
  await ext.deactivate();
});
