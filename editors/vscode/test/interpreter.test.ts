import { test } from "node:test";
import assert from "node:assert/strict";

import {
  chooseInterpreter,
  expandPath,
  installCommand,
  interpreterFromPythonApi,
  parseVersion,
  probeKernelsight,
  serverCommand,
  shellQuote,
  type RunResult,
  type Runner,
} from "../src/interpreter";
import { runProcess } from "../src/processRunner";

const ctx = { workspaceFolder: "/ws", home: "/home/u", env: { VENV: "/opt/venv" } };

test("variables and ~ in the interpreter setting are expanded", () => {
  assert.equal(expandPath("${workspaceFolder}/.venv/bin/python", ctx), "/ws/.venv/bin/python");
  assert.equal(expandPath("~/venv/bin/python", ctx), "/home/u/venv/bin/python");
  assert.equal(expandPath("${env:VENV}/bin/python", ctx), "/opt/venv/bin/python");
  assert.equal(expandPath("${userHome}/p", ctx), "/home/u/p");
  assert.equal(expandPath("  python3.11 ", ctx), "python3.11");
});

test("an unknown variable or a missing folder is an error that names it", () => {
  assert.throws(() => expandPath("${foo}/python", ctx), /\$\{foo\}/);
  assert.throws(() => expandPath("${workspaceFolder}/python", { home: "/h", env: {} }), /workspaceFolder/);
});

test("the setting beats the Python extension, which beats python3", () => {
  const base = { platform: "linux", expansion: ctx };
  assert.deepEqual(chooseInterpreter({ ...base, configured: "/a/python", fromPythonExtension: "/b/python" }),
    { path: "/a/python", source: "setting" });
  assert.deepEqual(chooseInterpreter({ ...base, configured: "", fromPythonExtension: "/b/python" }),
    { path: "/b/python", source: "python-extension" });
  assert.deepEqual(chooseInterpreter({ ...base, configured: undefined, fromPythonExtension: undefined }),
    { path: "python3", source: "default" });
  assert.equal(chooseInterpreter({ ...base, platform: "win32", configured: "", fromPythonExtension: "" }).path,
    "python");
});

test("the Python extension's active environment is resolved to its executable", async () => {
  const api = {
    environments: {
      getActiveEnvironmentPath: () => ({ path: "/envs/a" }),
      resolveEnvironment: () => Promise.resolve({ executable: { uri: { fsPath: "/envs/a/bin/python" } } }),
    },
  };
  assert.equal(await interpreterFromPythonApi(api, undefined), "/envs/a/bin/python");
});

test("an unresolvable selection falls back to its path, the legacy API to a bare execCommand", async () => {
  const unresolved = {
    environments: { getActiveEnvironmentPath: () => ({ path: "/gone/python" }), resolveEnvironment: () => Promise.resolve(undefined) },
  };
  assert.equal(await interpreterFromPythonApi(unresolved, undefined), "/gone/python");
  assert.equal(await interpreterFromPythonApi({ settings: { getExecutionDetails: () => ({ execCommand: ["/x/python"] }) } }, undefined), "/x/python");
  // `conda run ...` is not an interpreter path.
  assert.equal(await interpreterFromPythonApi({ settings: { getExecutionDetails: () => ({ execCommand: ["conda", "run", "-n", "e", "python"] }) } }, undefined), undefined);
  assert.equal(await interpreterFromPythonApi(undefined, undefined), undefined);
});

test("a throwing Python extension does not stop the fallback", async () => {
  const broken = { environments: { getActiveEnvironmentPath: () => { throw new Error("boom"); } } };
  assert.equal(await interpreterFromPythonApi(broken, undefined), undefined);
});

function fake(result: Partial<RunResult>): { run: Runner; calls: string[][] } {
  const calls: string[][] = [];
  const run: Runner = (command, args) => {
    calls.push([command, ...args]);
    return Promise.resolve({ exitCode: 0, stdout: "", stderr: "", timedOut: false, ...result });
  };
  return { run, calls };
}

test("the probe runs `python -m kernelsight --version` and reads the version", async () => {
  const { run, calls } = fake({ stdout: "kernelsight 0.1.0\n" });
  assert.deepEqual(await probeKernelsight("/v/bin/python", run), { kind: "ok", version: "0.1.0" });
  assert.deepEqual(calls, [["/v/bin/python", "-m", "kernelsight", "--version"]]);
});

test("a missing module, a missing interpreter, a crash and a hang are told apart", async () => {
  const missing = await probeKernelsight("python3",
    fake({ exitCode: 1, stderr: "/usr/bin/python3: No module named kernelsight\n" }).run);
  assert.equal(missing.kind, "not-installed");
  assert.match((missing as { detail: string }).detail, /not installed for python3/);

  const noPython = await probeKernelsight("/nope/python", fake({ exitCode: null, spawnError: "ENOENT" }).run);
  assert.deepEqual(noPython, { kind: "no-interpreter", detail: "cannot run '/nope/python' (ENOENT)" });

  const crash = await probeKernelsight("python3",
    fake({ exitCode: 1, stderr: "Traceback...\nImportError: cannot import name 'x'\n" }).run);
  assert.equal(crash.kind, "broken");
  assert.match((crash as { detail: string }).detail, /exited with 1: ImportError: cannot import name 'x'/);

  const brokenInstall = await probeKernelsight("python3",
    fake({ exitCode: 1, stderr: "ModuleNotFoundError: No module named 'kernelsight.commands.check'\n" }).run);
  assert.equal(brokenInstall.kind, "broken");

  const hang = await probeKernelsight("python3", fake({ exitCode: null, timedOut: true }).run, 2000);
  assert.equal(hang.kind, "broken");
  assert.match((hang as { detail: string }).detail, /within 2 s/);
});

test("version strings are parsed from argparse's output", () => {
  assert.equal(parseVersion("kernelsight 0.1.0"), "0.1.0");
  assert.equal(parseVersion("kernelsight 1.2.3rc1\n"), "1.2.3rc1");
  assert.equal(parseVersion("something else"), undefined);
});

test("the server runs as `python -m kernelsight serve` plus the extra arguments", () => {
  assert.deepEqual(serverCommand("/p/python", ["--log-file", "/tmp/ks.log"]),
    { command: "/p/python", args: ["-m", "kernelsight", "serve", "--log-file", "/tmp/ks.log"] });
});

test("install commands quote interpreter paths with spaces for the shell", () => {
  assert.equal(installCommand("/usr/bin/python3", "linux"), "/usr/bin/python3 -m pip install kernelsight");
  assert.equal(shellQuote("/my envs/bin/python", "linux"), "'/my envs/bin/python'");
  assert.equal(shellQuote("it's/python", "linux"), `'it'\\''s/python'`);
  assert.equal(shellQuote("C:\\Program Files\\Python\\python.exe", "win32"), "& 'C:\\Program Files\\Python\\python.exe'");
});

test("the real process runner reports output, exit codes and missing executables", async () => {
  const ok = await runProcess(process.execPath, ["-e", "console.log('kernelsight 9.9.9')"], 10000);
  assert.equal(ok.exitCode, 0);
  assert.equal(parseVersion(ok.stdout), "9.9.9");
  const bad = await runProcess(process.execPath, ["-e", "process.stderr.write('No module named kernelsight'); process.exit(1)"], 10000);
  assert.equal(bad.exitCode, 1);
  assert.match(bad.stderr, /No module named kernelsight/);
  const none = await runProcess("/definitely/not/here/python", [], 10000);
  assert.equal(none.spawnError, "ENOENT");
  const slow = await runProcess(process.execPath, ["-e", "setTimeout(() => {}, 10000)"], 300);
  assert.equal(slow.timedOut, true);
});
