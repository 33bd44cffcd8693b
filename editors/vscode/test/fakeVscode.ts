/**
 * A recording stand-in for the `vscode` module, enough for extension.ts to activate in plain
 * node. Unknown members (classes vscode-languageclient extends at load time) become empty
 * classes; the members extension.ts calls record what they were asked to do.
 */
import Module from "node:module";
import { join } from "node:path";

export interface Message {
  level: "error" | "warning" | "info";
  text: string;
  items: string[];
}

export interface FakeState {
  commands: Map<string, (...args: unknown[]) => unknown>;
  executed: { id: string; args: unknown[] }[];
  messages: Message[];
  status: { text: string; tooltip: string; command: string | undefined; visible: boolean; backgroundColor?: { id: string } };
  terminal: { name: string; sent: { text: string; addNewLine: boolean | undefined }[] } | undefined;
  log: string[];
  /** The answer given to the next message shown (a button title), then cleared. */
  answer: string | undefined;
  settings: Record<string, unknown>;
}

interface FakeUri {
  scheme: string;
  fsPath: string;
  path: string;
  toString(): string;
}

function uriFile(p: string): FakeUri {
  return { scheme: "file", fsPath: p, path: p, toString: () => `file://${p}` };
}

export function makeFakeVscode(workspaceDir: string): { api: Record<string, unknown>; state: FakeState } {
  const state: FakeState = {
    commands: new Map(),
    executed: [],
    messages: [],
    status: { text: "", tooltip: "", command: undefined, visible: false },
    terminal: undefined,
    log: [],
    answer: undefined,
    settings: {},
  };
  const disposable = { dispose: () => undefined };
  const show = (level: Message["level"]) => (text: string, ...items: string[]) => {
    state.messages.push({ level, text, items });
    const answer = state.answer;
    state.answer = undefined;
    return Promise.resolve(answer !== undefined && items.includes(answer) ? answer : undefined);
  };
  const folder = { uri: uriFile(workspaceDir), name: "ws", index: 0 };
  const known: Record<string, unknown> = {
    Uri: {
      file: uriFile,
      parse: (s: string) => uriFile(s.replace(/^file:\/\//, "")),
      joinPath: (base: FakeUri, ...parts: string[]) => uriFile(join(base.fsPath, ...parts)),
    },
    StatusBarAlignment: { Left: 1, Right: 2 },
    ProgressLocation: { SourceControl: 1, Window: 10, Notification: 15 },
    ThemeColor: class {
      constructor(public id: string) {}
    },
    window: {
      activeTextEditor: undefined,
      createOutputChannel: () => ({
        appendLine: (l: string) => state.log.push(l),
        append: (l: string) => state.log.push(l),
        show: () => undefined,
        dispose: () => undefined,
        info: (l: string) => state.log.push(l),
        warn: (l: string) => state.log.push(l),
        error: (l: string) => state.log.push(l),
      }),
      createStatusBarItem: () => {
        const item = state.status as FakeState["status"] & Record<string, unknown>;
        item.show = () => { item.visible = true; };
        item.hide = () => { item.visible = false; };
        item.dispose = () => undefined;
        return item;
      },
      showErrorMessage: show("error"),
      showWarningMessage: show("warning"),
      showInformationMessage: show("info"),
      createTerminal: (name: string) => {
        const term = { name, sent: [] as { text: string; addNewLine: boolean | undefined }[] };
        state.terminal = term;
        return { show: () => undefined, sendText: (text: string, addNewLine?: boolean) => term.sent.push({ text, addNewLine }) };
      },
    },
    workspace: {
      workspaceFolders: [folder],
      getWorkspaceFolder: () => folder,
      onDidChangeConfiguration: () => disposable,
      getConfiguration: () => ({
        get: <T>(key: string, def?: T) => (key in state.settings ? state.settings[key] as T : def),
        inspect: (key: string) => ({ defaultValue: undefined, globalValue: state.settings[key] }),
      }),
    },
    commands: {
      registerCommand: (id: string, fn: (...args: unknown[]) => unknown) => {
        state.commands.set(id, fn);
        return disposable;
      },
      executeCommand: (id: string, ...args: unknown[]) => {
        state.executed.push({ id, args });
        return Promise.resolve(undefined);
      },
    },
    extensions: { getExtension: () => undefined },
  };
  const api = new Proxy(known, {
    get(target, prop: string) {
      if (!(prop in target)) {
        target[prop] = class {};
      }
      return target[prop];
    },
  });
  return { api, state };
}

type Loader = (request: string, parent: unknown, isMain: boolean) => unknown;

/** Makes `require("vscode")` return `api` until the returned function is called. */
export function installFakeVscode(api: unknown): () => void {
  const mod = Module as unknown as { _load: Loader };
  const original = mod._load;
  mod._load = function (request: string, parent: unknown, isMain: boolean): unknown {
    if (request === "vscode") {
      return api;
    }
    return original.call(this, request, parent, isMain);
  };
  return () => {
    mod._load = original;
  };
}
