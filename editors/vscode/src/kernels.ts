/**
 * Choosing the kernel a command applies to. The server puts a code lens above each kernel
 * whose command (`kernelsight.optimize`, `kernelsight.benchmark`) already carries the
 * arguments it expects, so the editor never has to guess the server's argument format: it
 * runs the lens command of the kernel under the cursor. Pure module.
 */

/** A code lens reduced to what is needed here (0-based line). */
export interface KernelLens {
  line: number;
  command: string;
  title: string;
  arguments: unknown[];
}

/** Server commands started from the editor. */
export const SERVER_COMMANDS = {
  optimize: "kernelsight.optimize",
  benchmark: "kernelsight.benchmark",
} as const;

export type KernelCommandKind = keyof typeof SERVER_COMMANDS;

/**
 * The lenses of `command`, sorted by line, and the one for the cursor: the nearest lens at or
 * above `cursorLine` (a lens sits on the kernel's first line), or the only lens when the
 * cursor is above every kernel of a one-kernel file.
 *
 * @returns `chosen` undefined when the caller must ask (cursor above several kernels) or when
 *   the file has no kernel (`candidates` empty).
 */
export function pickKernelLens(
  lenses: readonly KernelLens[],
  cursorLine: number,
  command: string,
): { chosen: KernelLens | undefined; candidates: KernelLens[] } {
  const candidates = lenses.filter((l) => l.command === command).sort((a, b) => a.line - b.line);
  let chosen: KernelLens | undefined;
  for (const l of candidates) {
    if (l.line <= cursorLine) {
      chosen = l;
    }
  }
  if (!chosen && candidates.length === 1) {
    chosen = candidates[0];
  }
  return { chosen, candidates };
}

/**
 * The kernel name for a lens: the first `def NAME(` at or below the lens line (decorators and
 * `#@` annotations may sit between), or `line N` when none is found within `lookahead` lines.
 */
export function kernelName(
  lens: KernelLens,
  lineAt: (line: number) => string | undefined,
  lookahead = 40,
): string {
  for (let i = lens.line; i < lens.line + lookahead; i++) {
    const text = lineAt(i);
    if (text === undefined) {
      break;
    }
    const m = /^\s*(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\(/.exec(text);
    if (m) {
      return m[1];
    }
  }
  return `line ${lens.line + 1}`;
}

/** The kernel name a server command carries: its arguments are `[uri, kernel]`. */
export function kernelFromArguments(args: readonly unknown[]): string | undefined {
  return typeof args[1] === "string" && args[1] !== "" ? args[1] : undefined;
}
