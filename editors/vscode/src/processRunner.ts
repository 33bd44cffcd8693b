/**
 * The node implementation of {@link Runner}: runs a short-lived process without a shell and
 * collects its output. Kept apart from interpreter.ts so that the classification logic there
 * is tested with fakes, and this file with real processes.
 */
import { execFile } from "node:child_process";
import type { Runner, RunResult } from "./interpreter";

/** Output beyond this many bytes is dropped: a version probe prints one line. */
const MAX_BUFFER = 1024 * 1024;

export const runProcess: Runner = (command, args, timeoutMs) =>
  new Promise<RunResult>((resolve) => {
    execFile(
      command,
      args,
      { timeout: timeoutMs, maxBuffer: MAX_BUFFER, windowsHide: true, encoding: "utf8" },
      (error, stdout, stderr) => {
        if (!error) {
          resolve({ exitCode: 0, stdout, stderr, timedOut: false });
          return;
        }
        const e = error as NodeJS.ErrnoException & { code?: number | string; killed?: boolean; signal?: string };
        if (typeof e.code === "string") {
          // ENOENT, EACCES...: the interpreter itself could not start.
          resolve({ exitCode: null, stdout, stderr, spawnError: e.code, timedOut: false });
          return;
        }
        const timedOut = Boolean(e.killed) && e.signal === "SIGTERM";
        resolve({
          exitCode: typeof e.code === "number" ? e.code : null,
          stdout,
          stderr,
          timedOut,
        });
      },
    );
  });
