/**
 * Which `kernelsight.*` settings reach the language server, and in what shape.
 *
 * The server merges three layers: its defaults, `[tool.kernelsight]` in the project's
 * pyproject.toml, and what the editor sends through `workspace/configuration` and
 * `initializationOptions`. VS Code's `getConfiguration()` fills in every default from the
 * manifest, which would silently override the project's pyproject.toml; so only the values a
 * user set explicitly (user, workspace or folder scope) are sent. Pure module: no `vscode`
 * import, so node:test can exercise it.
 */

/** The section every setting lives under, in package.json and on the server side. */
export const SECTION = "kernelsight";

/** Settings the extension consumes itself; the server never sees them. */
export const CLIENT_ONLY_KEYS: ReadonlySet<string> = new Set([
  "interpreter",
  "serverArgs",
  "trace.server",
]);

/** What `WorkspaceConfiguration.inspect(key)` returns, reduced to the fields used here. */
export interface InspectedValue {
  defaultValue?: unknown;
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}

/** A JSON object whose nesting follows the dotted setting keys. */
export type SettingsTree = { [key: string]: unknown };

/**
 * The setting keys (relative to the section) that the manifest contributes.
 *
 * @param manifest the parsed package.json of the extension.
 * @returns keys such as `"maxElements"` and `"agent.model"`, in manifest order.
 */
export function contributedKeys(manifest: unknown): string[] {
  const props = (manifest as {
    contributes?: { configuration?: { properties?: Record<string, unknown> } };
  })?.contributes?.configuration?.properties;
  if (!props) {
    return [];
  }
  const prefix = `${SECTION}.`;
  return Object.keys(props)
    .filter((k) => k.startsWith(prefix))
    .map((k) => k.slice(prefix.length));
}

/**
 * The value a user set for one key, the narrowest scope winning (folder > workspace > user);
 * `undefined` when only the manifest default applies.
 */
export function explicitValue(inspected: InspectedValue | undefined): unknown {
  if (!inspected) {
    return undefined;
  }
  for (const v of [inspected.workspaceFolderValue, inspected.workspaceValue, inspected.globalValue]) {
    if (v !== undefined) {
      return v;
    }
  }
  return undefined;
}

/**
 * Sets `tree[a][b] = value` for the dotted key `"a.b"`, creating intermediate objects.
 *
 * @throws Error when a prefix of the key already holds a non-object value.
 */
export function setDotted(tree: SettingsTree, key: string, value: unknown): void {
  const parts = key.split(".");
  let node: SettingsTree = tree;
  for (const part of parts.slice(0, -1)) {
    const next = node[part];
    if (next === undefined) {
      node[part] = {};
    } else if (typeof next !== "object" || next === null || Array.isArray(next)) {
      throw new Error(`setting '${key}' conflicts with the value of '${part}'`);
    }
    node = node[part] as SettingsTree;
  }
  node[parts[parts.length - 1]] = value;
}

/**
 * The settings object the server receives (for `initializationOptions` and as the answer to
 * `workspace/configuration` for the `kernelsight` section).
 *
 * @param keys setting keys relative to the section (see {@link contributedKeys}).
 * @param inspect returns the per-scope values of one key.
 * @returns a nested object with only explicitly set, server-relevant keys; `{}` when the user
 *   changed nothing, so that pyproject.toml and the server defaults apply.
 */
export function serverSettings(
  keys: readonly string[],
  inspect: (key: string) => InspectedValue | undefined,
): SettingsTree {
  const tree: SettingsTree = {};
  for (const key of keys) {
    if (CLIENT_ONLY_KEYS.has(key)) {
      continue;
    }
    const value = explicitValue(inspect(key));
    if (value !== undefined) {
      setDotted(tree, key, value);
    }
  }
  return tree;
}

/**
 * True when a configuration change of `changedKey` (relative to the section) needs the server
 * process restarted rather than a `workspace/didChangeConfiguration`: the interpreter and the
 * command line are fixed when the process starts.
 */
export function needsRestart(affects: (fullKey: string) => boolean): boolean {
  return ["interpreter", "serverArgs"].some((k) => affects(`${SECTION}.${k}`));
}
