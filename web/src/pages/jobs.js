// /jobs: the job queue of each pool: what waits (position, priority, waiting time, why) and what runs.
import { usePoll } from "../api.js";
import { ErrorBox, Loading, StateBadge } from "../components.js";
import { between, duration } from "../format.js";
import { html } from "../html.js";
import { Link } from "../router.js";
import { DataTable } from "../table.js";
import { useNow } from "../widgets.js";

const QUEUED = new Set(["STATE_QUEUED", "STATE_PENDING"]);

// per pool: queued allocations by priority (1 most urgent), then by when they were queued; then the running ones
export function queueRows(summaries) {
  const byPool = new Map();
  for (const a of Object.values(summaries || {})) {
    const pool = a.resourcePool || "default";
    if (!byPool.has(pool)) byPool.set(pool, []);
    byPool.get(pool).push(a);
  }
  const rows = [];
  for (const pool of [...byPool.keys()].sort()) {
    const list = byPool.get(pool);
    const time = (a) => Date.parse(a.registeredTime || "") || 0;
    const queued = list.filter((a) => QUEUED.has(a.state))
      .sort((a, b) => (a.priority ?? 0) - (b.priority ?? 0) || time(a) - time(b) || String(a.allocationId).localeCompare(String(b.allocationId)));
    const running = list.filter((a) => !QUEUED.has(a.state)).sort((a, b) => time(a) - time(b));
    queued.forEach((a, i) => rows.push({ ...a, pool, position: i + 1 }));
    running.forEach((a) => rows.push({ ...a, pool, position: null }));
  }
  return rows;
}

const trialLink = (name) => {
  const m = /^Trial (\d+) \(Experiment (\d+)\)/.exec(name || "");
  if (!m) return name;
  const trial = html`<${Link} href=${`/trials/${m[1]}`}>Trial ${m[1]}</${Link}>`;
  const exp = html`<${Link} href=${`/experiments/${m[2]}`}>experiment ${m[2]}</${Link}>`;
  return html`${trial}<span class="muted"> of </span>${exp}`;
};

const COLUMNS = [
  { id: "pool", header: "Pool" },
  { id: "position", header: "Position", className: "num", cell: (a) => (a.position ? `#${a.position}` : html`<span class="muted">running</span>`) },
  { id: "name", header: "Job", cell: (a) => trialLink(a.name) },
  { id: "state", header: "State", cell: (a) => html`<${StateBadge} state=${a.state} />` },
  { id: "priority", header: "Priority", className: "num" },
  { id: "slots", header: "Slots", className: "num", value: (a) => a.slotsNeeded },
  { id: "waiting", header: "Waiting", className: "num", cell: (a) => (a.position ? duration(between(a.registeredTime)) : "—") },
  { id: "reason", header: "Why it waits", cell: (a) => (a.position ? a.waitReason || html`<span class="muted">scheduling…</span>` : html`<span class="muted">—</span>`) },
];

export function JobsPage() {
  const tasks = usePoll("/api/v1/tasks");
  const pools = usePoll("/api/v1/resource-pools", 2000);
  useNow(1000); // waiting times tick
  const rows = queueRows(tasks.data && tasks.data.allocationIdToSummary);
  const poolRows = (pools.data && pools.data.resourcePools) || [];
  return html`<div class="page">
    <div class="page-head"><h1>Job queue</h1></div>
    <div class="pool-cards">
      ${poolRows.map((p) => html`<div key=${p.name} class="pool-card" data-pool-summary=${p.name}>
        <b>${p.name}</b>
        <span>${p.queuedTasks ?? 0} queued</span>
        <span>${p.runningTasks ?? 0} running</span>
        <span>${p.slotsUsed ?? 0} / ${p.slotsAvailable ?? 0} slots used</span>
      </div>`)}
    </div>
    <section class="card">
      ${tasks.error && !tasks.data ? html`<${ErrorBox} error=${tasks.error} />` : !tasks.data ? html`<${Loading} />` : html`
        <div class="table-wrap"><${DataTable} testid="jobs-table" columns=${COLUMNS} rows=${rows}
          rowKey=${(a) => a.allocationId}
          rowAttrs=${(a) => ({ "data-job-id": a.allocationId, "data-task-id": a.taskId, "data-pool": a.pool, "data-state": a.state })}
          empty="Nothing is queued or running." /></div>`}
    </section>
  </div>`;
}
