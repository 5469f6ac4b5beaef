// Pure helpers of the WebUI (no DOM): `npm test` in web/ (node --test).
import assert from "node:assert/strict";
import { test } from "node:test";
import { between, bytes, duration, flatten, metric, money, stateClass, stateName } from "../src/format.js";
import { toYaml } from "../src/yaml.js";

test("money has a dollar sign and two decimals", () => {
  assert.equal(money(0), "$0.00");
  assert.equal(money(1.005 * 1000), "$1005.00");
  assert.equal(money(0.1 + 0.2), "$0.30");
  assert.equal(money("x"), "—");
});

test("durations and spans", () => {
  assert.equal(duration(0), "0s");
  assert.equal(duration(61), "1m 1s");
  assert.equal(duration(3 * 3600 + 120), "3h 2m");
  assert.equal(duration(2 * 86400 + 3600), "2d 1h");
  assert.equal(duration(null), "—");
  assert.equal(between("2024-01-01T00:00:00Z", "2024-01-01T00:01:30Z"), 90);
  assert.equal(between(100, 160), 60);
});

test("states read as words and map to a colour class", () => {
  assert.equal(stateName("STATE_STOPPING_COMPLETED"), "stopping completed");
  assert.equal(stateClass("STATE_ACTIVE"), "st-running");
  assert.equal(stateClass("STATE_ERROR"), "st-error");
  assert.equal(stateClass("STATE_QUEUED"), "st-waiting");
});

test("metrics, bytes, flattened hparams", () => {
  assert.equal(metric(0.123456), "0.1235");
  assert.equal(metric(1234567), "1.235e+6");
  assert.equal(metric(null), "—");
  assert.equal(bytes(1536), "1.5 KiB");
  assert.deepEqual(flatten({ opt: { lr: 0.1, name: "sgd" }, bs: 32 }), { "opt.lr": 0.1, "opt.name": "sgd", bs: 32 });
});

test("YAML of a config: block style, quoting only where needed", () => {
  const cfg = {
    name: "mnist",
    description: "a: b",
    labels: [],
    hyperparameters: { lr: { type: "log", minval: -3 }, layers: [1, 2] },
    searcher: { name: "grid", max_length: { batches: 1000 }, smaller_is_better: true, source: null },
    resources: [{ a: 1, b: "yes" }],
    empty: "",
  };
  assert.equal(toYaml(cfg), [
    "name: mnist",
    'description: "a: b"',
    "labels: []",
    "hyperparameters:",
    "  lr:",
    "    type: log",
    "    minval: -3",
    "  layers:",
    "    - 1",
    "    - 2",
    "searcher:",
    "  name: grid",
    "  max_length:",
    "    batches: 1000",
    "  smaller_is_better: true",
    "  source: null",
    "resources:",
    "  - a: 1",
    '    b: "yes"',
    'empty: ""',
    "",
  ].join("\n"));
});
