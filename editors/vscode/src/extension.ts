/**
 * VS Code glue: the only module besides the bundle entry that touches the `vscode` API.
 * Everything with logic in it (interpreter choice, the version probe, the settings sent to
 * the server, the status bar states, kernel choice, report rendering) lives in pure modules
 * tested by node:test.
 */
import * as vscode from "vscode";
import {
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  ResponseError,
  RevealOutputChannelOn,
  State,
  WorkDoneProgress,
  type ExecuteCommandParams,
  type LanguageClientOptions,
  type ServerOptions,
} from "vscode-languageclient/node";

import {
  chooseInterpreter,
  installCommand,
  interpreterFromPythonApi,
  probeKernelsight,
  serverCommand,
  type Interpreter,
  type PythonExtensionApi,
} from "./interpreter";
import { kernelFromArguments, kernelName, pickKernelLens, SERVER_COMMANDS, type KernelLens } from "./kernels";
import { runProcess } from "./processRunner";
import { ProgressTracker } from "./progress";
import { reportMarkdown, reportSummary, type LastReport } from "./report";
import { contributedKeys, needsRestart, SECTION, serverSettings, type SettingsTree } from "./settings";
import { statusView, type ServerState } from "./status";

const PYTHON_EXTENSION_ID = "ms-python.python";

let controller: Controller | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  controller = new Controller(context);
  context.subscriptions.push(controller);
  controller.registerCommands();
  await controller.start();
}

export async function deactivate(): Promise<void> {
  await controller?.stop();
  controller = undefined;
}

class Controller implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private interpreter: Interpreter | undefined;
  private version: string | undefined;
  private state: ServerState = { kind: "stopped" };
  private lastReport: LastReport | undefined;
  private readonly tracker = new ProgressTracker();
  private readonly output: vscode.LogOutputChannel;
  private readonly statusItem: vscode.StatusBarItem;
  private readonly settingKeys: string[];
  private readonly disposables: vscode.Disposable[] = [];
  private progressCounter = 0;
  /** Serialises start/stop/restart so that two quick config changes cannot race. */
  private lifecycle: Promise<void> = Promise.resolve();

  constructor(private readonly context: vscode.ExtensionContext) {
    this.output = vscode.window.createOutputChannel("Kernelsight", { log: true });
    this.statusItem = vscode.window.createStatusBarItem(
      "kernelsight.status",
      vscode.StatusBarAlignment.Right,
      100,
    );
    this.statusItem.name = "Kernelsight";
    this.settingKeys = contributedKeys(context.extension.packageJSON);
    this.disposables.push(this.output, this.statusItem);
    this.disposables.push(
      vscode.workspace.onDidChangeConfiguration((e) => this.onConfigurationChanged(e)),
    );
    this.render();
    this.statusItem.show();
  }

  dispose(): void {
    for (const d of this.disposables.splice(0)) {
      d.dispose();
    }
  }

  registerCommands(): void {
    const reg = (id: string, fn: (...args: unknown[]) => unknown) =>
      this.disposables.push(vscode.commands.registerCommand(id, fn));
    reg("kernelsight.optimizeKernel", () => this.runKernelCommand("optimize"));
    reg("kernelsight.benchmarkKernel", () => this.runKernelCommand("benchmark"));
    reg("kernelsight.showLastReport", () => this.showLastReport());
    reg("kernelsight.restartServer", () => this.restart());
    reg("kernelsight.showOutput", () => this.output.show(true));
    reg("kernelsight.howToInstall", () => this.showInstallHelp());
  }

  // ---- lifecycle -------------------------------------------------------------------------

  start(): Promise<void> {
    this.lifecycle = this.lifecycle.then(() => this.doStart()).catch((e) => this.fail(e));
    return this.lifecycle;
  }

  stop(): Promise<void> {
    this.lifecycle = this.lifecycle.then(() => this.doStop()).catch((e) => this.fail(e));
    return this.lifecycle;
  }

  restart(): Promise<void> {
    this.lifecycle = this.lifecycle
      .then(() => this.doStop())
      .then(() => this.doStart())
      .catch((e) => this.fail(e));
    return this.lifecycle;
  }

  private async doStart(): Promise<void> {
    this.setState({ kind: "starting" });
    const resource = this.resource();
    const interpreter = await this.resolveInterpreter(resource);
    this.interpreter = interpreter;
    this.output.appendLine(`Python: ${interpreter.path} (${interpreter.source})`);

    const probe = await probeKernelsight(interpreter.path, runProcess);
    if (probe.kind !== "ok") {
      this.output.appendLine(`Probe: ${probe.detail}`);
      this.setState(
        probe.kind === "not-installed"
          ? { kind: "not-installed", python: interpreter.path }
          : { kind: "failed", detail: probe.detail },
      );
      void this.offerInstall(probe.detail, probe.kind === "not-installed");
      return;
    }
    this.version = probe.version;
    this.output.appendLine(`kernelsight ${probe.version}`);

    const extraArgs = vscode.workspace.getConfiguration(SECTION, resource).get<string[]>("serverArgs", []);
    const cmd = serverCommand(interpreter.path, extraArgs);
    const serverOptions: ServerOptions = {
      command: cmd.command,
      args: cmd.args,
      options: { cwd: vscode.workspace.getWorkspaceFolder(resource ?? vscode.Uri.file("/"))?.uri.fsPath },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [
        { scheme: "file", language: "python" },
        { scheme: "untitled", language: "python" },
      ],
      outputChannel: this.output,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      initializationOptions: this.settingsFor(resource),
      middleware: {
        workspace: {
          configuration: async (params, token, next) => {
            const answers: unknown[] | ResponseError<void> = await next(params, token);
            if (answers instanceof ResponseError) {
              return answers;
            }
            const list = answers;
            return params.items.map((item, i) => {
              if (item.section === SECTION) {
                const scope = item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined;
                return this.settingsFor(scope);
              }
              return list[i];
            });
          },
        },
        // Code lens and code action clicks go through the same path as the palette commands,
        // so they get the status bar progress and "Show last report".
        executeCommand: async (command, args, next) => {
          if (command === SERVER_COMMANDS.optimize || command === SERVER_COMMANDS.benchmark) {
            const list = args as unknown[];
            const uri = typeof list[0] === "string" ? list[0] : vscode.window.activeTextEditor?.document.uri.toString() ?? "";
            return this.execute(command, list, kernelFromArguments(list) ?? "kernel", uri);
          }
          const result: unknown = await next(command, args);
          return result;
        },
      },
    };

    const client = new LanguageClient("kernelsight", "Kernelsight", serverOptions, clientOptions);
    this.client = client;
    client.onDidChangeState((e) => {
      if (e.newState === State.Running) {
        this.setState({ kind: "ready", version: this.version });
      } else if (e.newState === State.Starting) {
        this.setState({ kind: "starting" });
      } else if (this.client === client) {
        this.setState({ kind: "stopped" });
      }
    });
    await client.start();
  }

  private async doStop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        // dispose() sends shutdown/exit, waits up to 5 s, then frees the client's resources.
        await client.dispose(5000);
      } catch (e) {
        this.output.appendLine(`stop: ${String(e)}`);
      }
    }
    this.setState({ kind: "stopped" });
  }

  private fail(e: unknown): void {
    const detail = e instanceof Error ? e.message : String(e);
    this.output.appendLine(`Error: ${detail}`);
    this.setState({ kind: "failed", detail });
    void vscode.window
      .showErrorMessage(`Kernelsight: the language server could not start: ${detail}`, "Show log")
      .then((choice) => choice && this.output.show(true));
  }

  // ---- interpreter -----------------------------------------------------------------------

  private resource(): vscode.Uri | undefined {
    return vscode.window.activeTextEditor?.document.uri ?? vscode.workspace.workspaceFolders?.[0]?.uri;
  }

  private async resolveInterpreter(resource: vscode.Uri | undefined): Promise<Interpreter> {
    const configured = vscode.workspace.getConfiguration(SECTION, resource).get<string>("interpreter");
    let fromPython: string | undefined;
    if (!configured) {
      fromPython = await interpreterFromPythonApi(await this.pythonApi(), resource);
    }
    return chooseInterpreter({
      configured,
      fromPythonExtension: fromPython,
      platform: process.platform,
      expansion: {
        workspaceFolder: resource ? vscode.workspace.getWorkspaceFolder(resource)?.uri.fsPath : undefined,
        home: process.env.HOME ?? process.env.USERPROFILE ?? "",
        env: process.env,
      },
    });
  }

  private pythonApiSubscribed = false;

  private async pythonApi(): Promise<PythonExtensionApi | undefined> {
    const ext = vscode.extensions.getExtension<PythonExtensionApi>(PYTHON_EXTENSION_ID);
    if (!ext) {
      return undefined;
    }
    try {
      const api = ext.isActive ? ext.exports : await ext.activate();
      this.followPythonSelection(api);
      return api;
    } catch (e) {
      this.output.appendLine(`Python extension unavailable: ${String(e)}`);
      return undefined;
    }
  }

  /** Restarts the server when the user picks another interpreter in the Python extension. */
  private followPythonSelection(api: PythonExtensionApi): void {
    const envs = (api as { environments?: { onDidChangeActiveEnvironmentPath?: vscode.Event<unknown> } })
      .environments;
    if (this.pythonApiSubscribed || !envs?.onDidChangeActiveEnvironmentPath) {
      return;
    }
    this.pythonApiSubscribed = true;
    this.disposables.push(
      envs.onDidChangeActiveEnvironmentPath(() => {
        if (this.interpreter?.source !== "setting") {
          void this.restart();
        }
      }),
    );
  }

  private async offerInstall(detail: string, notInstalled: boolean): Promise<void> {
    const advice = notInstalled
      ? "Install it in the Python environment of this workspace, or choose the interpreter that has it."
      : "Choose an interpreter with kernelsight installed, or see the Kernelsight output for details.";
    const choice = await vscode.window.showErrorMessage(
      `Kernelsight: ${detail}. ${advice}`,
      "How to install",
      "Install in terminal",
      "Choose interpreter",
    );
    if (choice === "How to install") {
      await this.showInstallHelp();
    } else if (choice === "Install in terminal") {
      const python = this.interpreter?.path ?? "python3";
      const term = vscode.window.createTerminal("Kernelsight install");
      term.show();
      // Typed but not run: the user sees the exact command and presses Enter.
      term.sendText(installCommand(python, process.platform), false);
    } else if (choice === "Choose interpreter") {
      await vscode.commands.executeCommand("workbench.action.openSettings", `${SECTION}.interpreter`);
    }
  }

  private async showInstallHelp(): Promise<void> {
    const readme = vscode.Uri.joinPath(this.context.extensionUri, "README.md");
    await vscode.commands.executeCommand("markdown.showPreview", readme);
  }

  // ---- settings --------------------------------------------------------------------------

  private settingsFor(scope: vscode.Uri | undefined): SettingsTree {
    const cfg = vscode.workspace.getConfiguration(SECTION, scope);
    return serverSettings(this.settingKeys, (k) => cfg.inspect(k));
  }

  private onConfigurationChanged(e: vscode.ConfigurationChangeEvent): void {
    if (!e.affectsConfiguration(SECTION)) {
      return;
    }
    if (needsRestart((key) => e.affectsConfiguration(key))) {
      void this.restart();
      return;
    }
    if (this.client?.state === State.Running) {
      // The server re-reads through workspace/configuration; the payload carries the same
      // explicit-only settings for servers that read it directly.
      void this.client.sendNotification(DidChangeConfigurationNotification.type, {
        settings: { [SECTION]: this.settingsFor(this.resource()) },
      });
    }
  }

  // ---- commands --------------------------------------------------------------------------

  private async runKernelCommand(kind: "optimize" | "benchmark"): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.document.languageId !== "python") {
      void vscode.window.showWarningMessage("Kernelsight: open a Python file with a Triton kernel first.");
      return;
    }
    if (!this.client || this.client.state !== State.Running) {
      void vscode.window.showWarningMessage("Kernelsight: the language server is not running.", "Show log")
        .then((c) => c && this.output.show(true));
      return;
    }
    const doc = editor.document;
    const lenses =
      (await vscode.commands.executeCommand<vscode.CodeLens[]>(
        "vscode.executeCodeLensProvider",
        doc.uri,
        100,
      )) ?? [];
    const plain: KernelLens[] = lenses
      .filter((l) => l.command)
      .map((l) => ({
        line: l.range.start.line,
        command: l.command!.command,
        title: l.command!.title,
        arguments: l.command!.arguments ?? [],
      }));
    const command = SERVER_COMMANDS[kind];
    const lineAt = (i: number) => (i < doc.lineCount ? doc.lineAt(i).text : undefined);
    const { chosen, candidates } = pickKernelLens(plain, editor.selection.active.line, command);
    let lens = chosen;
    if (!lens) {
      if (candidates.length === 0) {
        void vscode.window.showWarningMessage(
          `Kernelsight: no kernel in ${vscode.workspace.asRelativePath(doc.uri)} offers ${kind} (no @triton.jit kernel found, or the server has not analysed it yet).`,
        );
        return;
      }
      const pick = await vscode.window.showQuickPick(
        candidates.map((c) => ({
          label: kernelFromArguments(c.arguments) ?? kernelName(c, lineAt),
          description: `line ${c.line + 1}`,
          lens: c,
        })),
        { placeHolder: `Kernel to ${kind}` },
      );
      if (!pick) {
        return;
      }
      lens = pick.lens;
    }
    await this.execute(command, lens.arguments, kernelFromArguments(lens.arguments) ?? kernelName(lens, lineAt), doc.uri.toString());
  }

  /**
   * Sends `workspace/executeCommand` with a work-done token and records the result as the last
   * report. The server announces its own cancellable progress (window/workDoneProgress/create),
   * which the language client shows as a notification; here the status bar item and the
   * window progress follow the request, and `$/progress` on the client's token when the server
   * reports on it.
   */
  private async execute(command: string, args: unknown[], kernel: string, uri: string): Promise<unknown> {
    const client = this.client;
    if (!client) {
      throw new Error("the Kernelsight language server is not running");
    }
    const token = `kernelsight-${process.pid}-${++this.progressCounter}`;
    const label = command === SERVER_COMMANDS.optimize ? "Optimizing" : "Benchmarking";
    return vscode.window.withProgress(
      { location: vscode.ProgressLocation.Window, title: `Kernelsight: ${label} ${kernel}` },
      async (progress) => {
        let lastPct = 0;
        const sub = client.onProgress(WorkDoneProgress.type, token, (value) => {
          this.tracker.update(token, value);
          const v: { message?: string; percentage?: number } = value;
          const increment = v.percentage !== undefined ? Math.max(0, v.percentage - lastPct) : undefined;
          if (v.percentage !== undefined) {
            lastPct = v.percentage;
          }
          progress.report({ message: v.message, increment });
          this.renderProgress();
        });
        this.tracker.update(token, { kind: "begin", title: `${label} ${kernel}` });
        this.renderProgress();
        const params: ExecuteCommandParams = { command, arguments: args, workDoneToken: token };
        const report: LastReport = { command, kernel, uri, finishedAt: new Date() };
        try {
          report.result = await client.sendRequest(ExecuteCommandRequest.type, params);
        } catch (e) {
          report.error = e instanceof Error ? e.message : String(e);
        } finally {
          sub.dispose();
          this.tracker.update(token, { kind: "end" });
          this.renderProgress();
        }
        report.finishedAt = new Date();
        this.lastReport = report;
        const show = "Show report";
        const notify = report.error === undefined ? vscode.window.showInformationMessage : vscode.window.showErrorMessage;
        void notify(reportSummary(report), show).then((c) => {
          if (c === show) {
            void this.showLastReport();
          }
        });
        return report.result;
      },
    );
  }

  private async showLastReport(): Promise<void> {
    if (!this.lastReport) {
      void vscode.window.showInformationMessage(
        "Kernelsight: no report yet. Run Kernelsight: Optimize kernel or Benchmark kernel first.",
      );
      return;
    }
    const doc = await vscode.workspace.openTextDocument({
      language: "markdown",
      content: reportMarkdown(this.lastReport),
    });
    await vscode.window.showTextDocument(doc, { preview: true });
    await vscode.commands.executeCommand("markdown.showPreviewToSide", doc.uri);
  }

  // ---- status bar ------------------------------------------------------------------------

  private setState(state: ServerState): void {
    this.state = state;
    this.render();
  }

  private renderProgress(): void {
    const cur = this.tracker.current();
    if (cur) {
      this.render({ kind: "busy", title: ProgressTracker.label(cur), percentage: cur.percentage });
    } else {
      this.render();
    }
  }

  private render(override?: ServerState): void {
    const view = statusView(override ?? this.state, this.interpreter);
    this.statusItem.text = view.text;
    this.statusItem.tooltip = view.tooltip;
    this.statusItem.command = view.command;
    this.statusItem.backgroundColor =
      view.level === "normal" ? undefined : new vscode.ThemeColor(`statusBarItem.${view.level}Background`);
  }
}
