/**
 * Finding the Python interpreter that runs the server and checking that kernelsight is
 * installed in it. Pure module: the process runner and the Python extension are passed in,
 * so node:test covers every branch without VS Code.
 */

/** Where the interpreter path came from, shown in the status bar tooltip. */
export type InterpreterSource = "setting" | "python-extension" | "default";

export interface Interpreter {
  /** Executable path or a command name looked up on PATH. */
  path: string;
  source: InterpreterSource;
}

/** Values used to expand `${...}` variables and `~` in the `kernelsight.interpreter` setting. */
export interface ExpansionContext {
  workspaceFolder?: string;
  home: string;
  env: Record<string, string | undefined>;
}

/**
 * Expands `${workspaceFolder}`, `${userHome}`, `${env:NAME}` and a leading `~` in a
 * configured interpreter path, the variables VS Code users write in settings.json.
 *
 * @throws Error naming the variable when `${workspaceFolder}` is used without an open folder
 *   or an unknown `${...}` variable appears.
 */
export function expandPath(raw: string, ctx: ExpansionContext): string {
  let out = raw.trim();
  if (out === "~" || out.startsWith("~/") || out.startsWith("~\\")) {
    out = ctx.home + out.slice(1);
  }
  return out.replace(/\$\{([^}]+)\}/g, (_m, name: string) => {
    if (name === "workspaceFolder") {
      if (!ctx.workspaceFolder) {
        throw new Error("kernelsight.interpreter uses ${workspaceFolder} but no folder is open");
      }
      return ctx.workspaceFolder;
    }
    if (name === "userHome") {
      return ctx.home;
    }
    if (name.startsWith("env:")) {
      return ctx.env[name.slice(4)] ?? "";
    }
    throw new Error(`kernelsight.interpreter: unknown variable \${${name}}`);
  });
}

/** The interpreter used when neither the setting nor the Python extension names one. */
export function defaultInterpreter(platform: string): string {
  // The Windows installer puts `python` (and the `py` launcher) on PATH, not `python3`.
  return platform === "win32" ? "python" : "python3";
}

/**
 * Picks the interpreter: the `kernelsight.interpreter` setting, else the Python extension's
 * selected environment, else `python3` (`python` on Windows).
 */
export function chooseInterpreter(opts: {
  configured: string | undefined;
  fromPythonExtension: string | undefined;
  platform: string;
  expansion: ExpansionContext;
}): Interpreter {
  if (opts.configured && opts.configured.trim() !== "") {
    return { path: expandPath(opts.configured, opts.expansion), source: "setting" };
  }
  if (opts.fromPythonExtension && opts.fromPythonExtension.trim() !== "") {
    return { path: opts.fromPythonExtension, source: "python-extension" };
  }
  return { path: defaultInterpreter(opts.platform), source: "default" };
}

/** The subset of the ms-python.python extension API read here (stable since 2023). */
export interface PythonExtensionApi {
  environments?: {
    getActiveEnvironmentPath(resource?: unknown): { path: string } | undefined;
    resolveEnvironment?(
      env: { path: string } | string,
    ): Promise<{ executable?: { uri?: { fsPath: string } } } | undefined>;
  };
  settings?: {
    getExecutionDetails?(resource?: unknown): { execCommand?: string[] };
  };
}

/**
 * The executable of the environment selected in the Python extension for `resource`, or
 * `undefined` when the extension is absent or has no selection. Never throws: a broken
 * extension must not keep kernelsight from starting with its fallback.
 */
export async function interpreterFromPythonApi(
  api: PythonExtensionApi | undefined,
  resource: unknown,
): Promise<string | undefined> {
  if (!api) {
    return undefined;
  }
  try {
    const envs = api.environments;
    if (envs) {
      const active = envs.getActiveEnvironmentPath(resource);
      if (active?.path) {
        const resolved = envs.resolveEnvironment
          ? await envs.resolveEnvironment(active)
          : undefined;
        // An unresolvable selection (deleted venv) still has a path worth reporting later.
        return resolved?.executable?.uri?.fsPath ?? active.path;
      }
    }
    const exec = api.settings?.getExecutionDetails?.(resource)?.execCommand;
    // execCommand may be ["conda", "run", ...]; only a bare interpreter path is usable here.
    if (exec && exec.length === 1 && exec[0]) {
      return exec[0];
    }
  } catch {
    return undefined;
  }
  return undefined;
}

/** Outcome of running a short-lived process. */
export interface RunResult {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  /** Node's error code when the process could not start (e.g. `ENOENT`, `EACCES`). */
  spawnError?: string;
  timedOut: boolean;
}

export type Runner = (command: string, args: string[], timeoutMs: number) => Promise<RunResult>;

export type Probe =
  | { kind: "ok"; version: string }
  | { kind: "no-interpreter"; detail: string }
  | { kind: "not-installed"; detail: string }
  | { kind: "broken"; detail: string };

/** Extracts `0.1.0` from `kernelsight 0.1.0` (argparse's `--version` output). */
export function parseVersion(text: string): string | undefined {
  const m = /kernelsight\s+v?(\d+(?:\.\d+)*[^\s]*)/i.exec(text);
  return m ? m[1] : undefined;
}

function lastLine(text: string): string {
  const lines = text.trim().split(/\r?\n/);
  return lines[lines.length - 1] ?? "";
}

/**
 * Runs `<python> -m kernelsight --version` and classifies the outcome.
 *
 * @param timeoutMs the limit for the probe; the CLI imports nothing heavy for `--version`,
 *   so a few seconds is generous even on a cold disk.
 */
export async function probeKernelsight(
  python: string,
  run: Runner,
  timeoutMs = 15000,
): Promise<Probe> {
  const r = await run(python, ["-m", "kernelsight", "--version"], timeoutMs);
  if (r.spawnError) {
    return {
      kind: "no-interpreter",
      detail: `cannot run '${python}' (${r.spawnError})`,
    };
  }
  if (r.timedOut) {
    return {
      kind: "broken",
      detail: `'${python} -m kernelsight --version' did not finish within ${timeoutMs / 1000} s`,
    };
  }
  const out = `${r.stdout}\n${r.stderr}`;
  // Only the package itself missing; a missing submodule is a broken install, not a missing one.
  if (/No module named '?kernelsight'?\s*$/m.test(out)) {
    return { kind: "not-installed", detail: `kernelsight is not installed for ${python}` };
  }
  const version = parseVersion(out);
  if (r.exitCode === 0 && version) {
    return { kind: "ok", version };
  }
  return {
    kind: "broken",
    detail: `'${python} -m kernelsight --version' exited with ${r.exitCode}: ${lastLine(out) || "no output"}`,
  };
}

/** Quotes a path for a POSIX shell or PowerShell when it holds spaces or quotes. */
export function shellQuote(arg: string, platform: string): string {
  if (/^[\w@%+=:,./\\-]+$/.test(arg)) {
    return arg;
  }
  if (platform === "win32") {
    return `& '${arg.replace(/'/g, "''")}'`;
  }
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** The terminal command that installs kernelsight (with the editor extra-free base install). */
export function installCommand(python: string, platform: string): string {
  return `${shellQuote(python, platform)} -m pip install kernelsight`;
}

/** The process that serves the language server over stdio. */
export function serverCommand(
  python: string,
  extraArgs: readonly string[],
): { command: string; args: string[] } {
  return { command: python, args: ["-m", "kernelsight", "serve", ...extraArgs] };
}
