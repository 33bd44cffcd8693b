import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";

import {
  contributedKeys,
  explicitValue,
  needsRestart,
  serverSettings,
  setDotted,
  type InspectedValue,
} from "../src/settings";

const manifest: unknown = JSON.parse(readFileSync(join(__dirname, "..", "..", "package.json"), "utf8"));

test("contributed keys come from the manifest, relative to the kernelsight section", () => {
  const keys = contributedKeys(manifest);
  for (const k of ["interpreter", "select", "ignore", "severity", "maxElements", "solverTimeoutMs",
    "target", "inlayHints", "agent.model", "agent.budget"]) {
    assert.ok(keys.includes(k), `missing ${k}`);
  }
  assert.ok(keys.every((k) => !k.startsWith("kernelsight.")));
});

test("the narrowest scope that set a value wins and defaults count as unset", () => {
  assert.equal(explicitValue({ defaultValue: 1 }), undefined);
  assert.equal(explicitValue({ defaultValue: 1, globalValue: 2 }), 2);
  assert.equal(explicitValue({ globalValue: 2, workspaceValue: 3 }), 3);
  assert.equal(explicitValue({ globalValue: 2, workspaceValue: 3, workspaceFolderValue: 4 }), 4);
  // An explicit false or empty list is a choice, not "unset".
  assert.equal(explicitValue({ defaultValue: true, globalValue: false }), false);
  assert.deepEqual(explicitValue({ defaultValue: ["KS"], workspaceValue: [] }), []);
});

test("only explicitly set server keys are sent, nested by their dots", () => {
  const values: Record<string, InspectedValue> = {
    interpreter: { defaultValue: "", globalValue: "/usr/bin/python3" },
    serverArgs: { defaultValue: [], workspaceValue: ["--log-file", "/tmp/ks.log"] },
    "trace.server": { defaultValue: "off", globalValue: "verbose" },
    select: { defaultValue: ["KS"] },
    ignore: { defaultValue: [], workspaceValue: ["KS6"] },
    maxElements: { defaultValue: 2 ** 34, globalValue: 1024 },
    "agent.model": { defaultValue: "", globalValue: "gpt-x" },
    "agent.budget": { defaultValue: 8, workspaceFolderValue: 3 },
  };
  const sent = serverSettings(Object.keys(values), (k) => values[k]);
  assert.deepEqual(sent, { ignore: ["KS6"], maxElements: 1024, agent: { model: "gpt-x", budget: 3 } });
});

test("nothing set means an empty object, so pyproject.toml settings apply", () => {
  const keys = contributedKeys(manifest);
  assert.deepEqual(serverSettings(keys, () => ({ defaultValue: "x" })), {});
});

test("a dotted key under a scalar is reported instead of overwriting it", () => {
  const tree = { agent: "oops" };
  assert.throws(() => setDotted(tree, "agent.model", "m"), /agent\.model/);
});

test("interpreter and server arguments need a restart, analysis settings do not", () => {
  assert.equal(needsRestart((k) => k === "kernelsight.interpreter"), true);
  assert.equal(needsRestart((k) => k === "kernelsight.serverArgs"), true);
  assert.equal(needsRestart((k) => k === "kernelsight.select"), false);
});

test("every contributed setting has a type, a default and a description", () => {
  const props = (manifest as { contributes: { configuration: { properties: Record<string, Record<string, unknown>> } } })
    .contributes.configuration.properties;
  for (const [key, spec] of Object.entries(props)) {
    assert.ok(spec.type, `${key} has no type`);
    assert.ok("default" in spec, `${key} has no default`);
    assert.ok(spec.markdownDescription ?? spec.description, `${key} has no description`);
  }
});
