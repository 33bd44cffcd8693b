/**
 * The "Show last report" document: the result of the last Optimize or Benchmark command as
 * markdown. The server answers `{ok, reason?, applied?, status?, output?: string[]}`; a
 * markdown string (or a `markdown`/`report` field) is shown as it is, and any other value as a
 * JSON block, so a richer result from a newer server is never lost. Pure module.
 */

export interface LastReport {
  /** `kernelsight.optimize` or `kernelsight.benchmark`. */
  command: string;
  kernel: string;
  /** The document URI, as text. */
  uri: string;
  finishedAt: Date;
  /** The command's result, when the request succeeded. */
  result?: unknown;
  /** The error message, when the request failed or was cancelled. */
  error?: string;
}

const TITLES: Record<string, string> = {
  "kernelsight.optimize": "Optimize",
  "kernelsight.benchmark": "Benchmark",
};

type Fields = Record<string, unknown>;

function asFields(result: unknown): Fields | undefined {
  return result && typeof result === "object" && !Array.isArray(result) ? (result as Fields) : undefined;
}

/** The reason a result reports failure (`ok: false`), or undefined when it succeeded. */
export function failureReason(report: LastReport): string | undefined {
  if (report.error !== undefined) {
    return report.error;
  }
  const r = asFields(report.result);
  if (r && r.ok === false) {
    return typeof r.reason === "string" ? r.reason : typeof r.status === "string" ? r.status : "failed";
  }
  return undefined;
}

function body(result: unknown): string {
  if (typeof result === "string") {
    return result;
  }
  const r = asFields(result);
  if (r) {
    for (const key of ["markdown", "report"]) {
      const v = r[key];
      if (typeof v === "string") {
        return v;
      }
    }
    const parts: string[] = [];
    if (typeof r.applied === "boolean") {
      parts.push(`Rewrite applied: ${r.applied ? "yes" : "no"}` + (typeof r.reason === "string" ? ` (${r.reason})` : ""));
    }
    if (Array.isArray(r.output) && r.output.every((x) => typeof x === "string")) {
      parts.push("```text\n" + r.output.join("\n") + "\n```");
    }
    if (parts.length > 0) {
      return parts.join("\n\n");
    }
  }
  if (result === undefined || result === null) {
    return "_The server returned no result._";
  }
  return "```json\n" + JSON.stringify(result, null, 2) + "\n```";
}

/** Markdown for `report`: a heading with the command and kernel, then the result or error. */
export function reportMarkdown(report: LastReport): string {
  const title = TITLES[report.command] ?? report.command;
  const head = [
    `# ${title}: \`${report.kernel}\``,
    "",
    `File: ${report.uri}  `,
    `Finished: ${report.finishedAt.toISOString()}`,
    "",
  ];
  const failed = failureReason(report);
  const lines = failed !== undefined ? [...head, "**Failed:** " + failed, ""] : [...head];
  if (report.error === undefined) {
    lines.push(body(report.result), "");
  }
  return lines.join("\n");
}

/** The one-line notification shown when a command finishes. */
export function reportSummary(report: LastReport): string {
  const title = TITLES[report.command] ?? report.command;
  const failed = failureReason(report);
  if (failed !== undefined) {
    return `Kernelsight ${title} of ${report.kernel} failed: ${failed}`;
  }
  const r = asFields(report.result);
  if (r && typeof r.summary === "string") {
    return `Kernelsight ${title} of ${report.kernel}: ${r.summary}`;
  }
  if (r && typeof r.applied === "boolean") {
    return `Kernelsight ${title} of ${report.kernel}: ${r.applied ? "rewrite applied" : `nothing applied${typeof r.reason === "string" ? ` (${r.reason})` : ""}`}.`;
  }
  return `Kernelsight ${title} of ${report.kernel} finished.`;
}
