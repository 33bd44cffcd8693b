/**
 * The status bar item's text, tooltip and click action for each server state. Pure module.
 */

export type ServerState =
  | { kind: "starting" }
  | { kind: "ready"; version?: string }
  | { kind: "busy"; title: string; percentage?: number }
  | { kind: "stopped" }
  | { kind: "not-installed"; python: string }
  | { kind: "failed"; detail: string };

export interface StatusView {
  /** Text with codicons, e.g. `$(check) Kernelsight`. */
  text: string;
  tooltip: string;
  /** The command run on click. */
  command: string;
  /** `warning` and `error` select the theme's status bar background colours. */
  level: "normal" | "warning" | "error";
}

export interface InterpreterInfo {
  path: string;
  source: string;
}

function describeInterpreter(i: InterpreterInfo | undefined): string {
  if (!i) {
    return "";
  }
  const from =
    i.source === "setting"
      ? "kernelsight.interpreter"
      : i.source === "python-extension"
        ? "the Python extension"
        : "the default";
  return `\nPython: ${i.path} (from ${from})`;
}

/** The view of `state`; `interpreter` adds the Python in use to the tooltip. */
export function statusView(state: ServerState, interpreter?: InterpreterInfo): StatusView {
  const py = describeInterpreter(interpreter);
  switch (state.kind) {
    case "starting":
      return {
        text: "$(sync~spin) Kernelsight",
        tooltip: `Kernelsight: starting the language server${py}`,
        command: "kernelsight.showOutput",
        level: "normal",
      };
    case "ready":
      return {
        text: "$(check) Kernelsight",
        tooltip: `${state.version ? `Kernelsight ${state.version}` : "Kernelsight"}: running${py}\nClick for the server log.`,
        command: "kernelsight.showOutput",
        level: "normal",
      };
    case "busy": {
      const pct = state.percentage === undefined ? "" : ` ${Math.round(state.percentage)}%`;
      return {
        text: `$(loading~spin) Kernelsight: ${state.title}${pct}`,
        tooltip: `Kernelsight: ${state.title}${pct}${py}`,
        command: "kernelsight.showOutput",
        level: "normal",
      };
    }
    case "stopped":
      return {
        text: "$(debug-stop) Kernelsight",
        tooltip: `Kernelsight: the language server is stopped. Click to restart it.${py}`,
        command: "kernelsight.restartServer",
        level: "warning",
      };
    case "not-installed":
      return {
        text: "$(warning) Kernelsight: not installed",
        tooltip: `kernelsight is not installed for ${state.python}. Click for how to install it.`,
        command: "kernelsight.howToInstall",
        level: "warning",
      };
    case "failed":
      return {
        text: "$(error) Kernelsight",
        tooltip: `Kernelsight failed: ${state.detail}${py}\nClick for the server log.`,
        command: "kernelsight.showOutput",
        level: "error",
      };
  }
}
