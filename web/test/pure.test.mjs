// Pure helpers of the WebUI (no DOM): `npm test` in web/ (node --test).
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  between, bytes, deviceLabel, duration, flatten, memoryGiB, metric, money, stateClass, stateName, trialCount,
} from "../src/format.js";
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

test("an agent slot's device reads as model and memory", () => {
  assert.equal(memoryGiB(81559), "80 GiB");
  assert.equal(memoryGiB(23028), "22 GiB");
  assert.equal(memoryGiB(8192), "8 GiB");
  assert.equal(memoryGiB(1536), "1.5 GiB");
  assert.equal(memoryGiB(0), "");
  assert.equal(memoryGiB(undefined), "");
  assert.equal(deviceLabel({ type: "TYPE_CUDA", brand: "NVIDIA H100 80GB HBM3", memoryMib: 81559 }), "NVIDIA H100 80GB HBM3, 80 GiB");
  assert.equal(deviceLabel({ type: "TYPE_CUDA", brand: "GRID T4-8Q" }), "GRID T4-8Q"); // NVML knew no size
  assert.equal(deviceLabel({ type: "TYPE_CUDA", brand: "", memoryMib: 16384 }), "GPU, 16 GiB");
  assert.equal(deviceLabel({ type: "TYPE_CPU", brand: "CPU" }), "CPU");
  assert.equal(deviceLabel(undefined), "CPU");
});

test("an experiment's trials: the total, the live ones only when there are some", () => {
  assert.equal(trialCount(3, 0), "3");
  assert.equal(trialCount(3, 1), "3 (1 active)");
  assert.equal(trialCount(3, null), "3"); // a master that does not say
  assert.equal(trialCount(undefined, undefined), "0");
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

test("snapColumns leaves few distinct steps to uPlot and snaps many, keeping every point in order", async () => {
  const { snapColumns } = await import("../src/snap.js");
  assert.equal(snapColumns([[[1, 2, 3], [1, 2, 3]], [[2, 4], [5, 6]]], 10), null);
  const a = [Array.from({ length: 50 }, (_, i) => i * 2), Array.from({ length: 50 }, (_, i) => i)];
  const b = [Array.from({ length: 50 }, (_, i) => i * 2 + 1), Array.from({ length: 50 }, (_, i) => -i)];
  const [xs, ya, yb] = snapColumns([a, b], 20);
  assert.equal(xs.length, 20);
  assert.equal(xs[0], 0);
  assert.equal(xs[19], 99);
  // more points than columns: a series keeps its first points, in order, one per column
  assert.deepEqual(ya.filter((y) => y != null), Array.from({ length: 20 }, (_, i) => i));
  const c = [[0, 10, 11, 12, 99], [5, 1, 2, 3, 4]];
  const [, yc] = snapColumns([c, a], 20);
  assert.deepEqual(yc.filter((y) => y != null), [5, 1, 2, 3, 4]); // 10, 11, 12 share a column: nudged right
  assert.equal(yc[0], 5);
  assert.equal(yc[19], 4);
  assert.ok(yc.indexOf(1) < yc.indexOf(2) && yc.indexOf(2) < yc.indexOf(3));
});

test("tasks of every kind in one list, newest first, opened through the proxy once ready", async () => {
  const { openUrl, taskRows } = await import("../src/tasks.js");
  const rows = taskRows({
    commands: { commands: [{ id: "c1", userId: 2, startTime: "2026-01-01T00:00:02Z", isReady: true },
      { id: "c0", userId: 2, startTime: "2026-01-01T00:00:04Z", state: "STATE_TERMINATED" }] }, // ended: not shown
    notebooks: { notebooks: [{ id: "n1", userId: 2, startTime: "2026-01-01T00:00:03Z", isReady: true, serviceAddress: "/proxy/n1/" }] },
    tensorboards: { tensorboards: [{ id: "t1", userId: 2, startTime: "2026-01-01T00:00:01Z", isReady: false }] },
    shells: undefined,
  });
  const me = { id: 2 };
  assert.deepEqual(rows.map((r) => [r.id, r.kind]), [["n1", "notebook"], ["c1", "command"], ["t1", "tensorboard"]]);
  assert.equal(openUrl(rows[0], me), "/proxy/n1/");
  assert.equal(openUrl(rows[0], { id: 1 }), null); // another user's: the proxy would refuse the session
  assert.equal(openUrl(rows[1], me), null); // a command has nothing to open
  assert.equal(openUrl(rows[2], me), null); // not ready yet
  assert.equal(openUrl({ ...rows[2], isReady: true }, me), "/proxy/t1/");
});
