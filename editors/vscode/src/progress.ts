/**
 * Folds `$/progress` work-done notifications (begin/report/end per token) into the one line
 * the status bar shows. Several tokens can be active (an analysis and a benchmark); the most
 * recently begun one is shown. Pure module.
 */

export type WorkDoneValue =
  | { kind: "begin"; title: string; message?: string; percentage?: number; cancellable?: boolean }
  | { kind: "report"; message?: string; percentage?: number; cancellable?: boolean }
  | { kind: "end"; message?: string };

export interface ActiveProgress {
  title: string;
  message?: string;
  percentage?: number;
}

export class ProgressTracker {
  private readonly active = new Map<string, ActiveProgress>();

  /** Applies one notification; a report or end for an unknown token is ignored. */
  update(token: string | number, value: WorkDoneValue): void {
    const key = String(token);
    if (value.kind === "begin") {
      // Re-inserting moves the key last, so a newer task is shown first.
      this.active.delete(key);
      this.active.set(key, {
        title: value.title,
        message: value.message,
        percentage: value.percentage,
      });
      return;
    }
    const cur = this.active.get(key);
    if (!cur) {
      return;
    }
    if (value.kind === "end") {
      this.active.delete(key);
      return;
    }
    this.active.set(key, {
      title: cur.title,
      message: value.message ?? cur.message,
      percentage: value.percentage ?? cur.percentage,
    });
  }

  /** The progress to show, or undefined when nothing runs. */
  current(): ActiveProgress | undefined {
    let last: ActiveProgress | undefined;
    for (const v of this.active.values()) {
      last = v;
    }
    return last;
  }

  /** A one-line label: `title: message`. */
  static label(p: ActiveProgress): string {
    return p.message ? `${p.title}: ${p.message}` : p.title;
  }
}
