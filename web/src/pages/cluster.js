// /cluster: agents and their slots (what runs on each), resource pools (slots, queue, provisioner
// state), instances (type, market, state, uptime, idle time, cost) and the running cost.
import { useState } from "preact/hooks";
import { apiUrl, receivedAt, usePoll } from "../api.js";
import { ErrorBox, Loading, StateBadge } from "../components.js";
import { ago, deviceLabel, duration, epoch, money } from "../format.js";
import { html } from "../html.js";
import { Link } from "../router.js";
import { DataTable } from "../table.js";
import { useNow } from "../widgets.js";

const trialLink = (name) => {
  const m = /^Trial (\d+)/.exec(name || "");
  return m ? html`<${Link} href=${`/trials/${m[1]}`}>${name}</${Link}>` : name;
};

function slotsOf(agent) {
  return Object.values(agent.slots || {}).sort((a, b) => String(a.id).localeCompare(String(b.id), undefined, { numeric: true }));
}

function agentColumns(tasks) {
  const nameOf = (allocId) => (tasks[allocId] && tasks[allocId].name) || allocId;
  return [
    { id: "id", header: "Agent", sortable: true, cell: (a) => html`<span class="mono">${a.id}</span><div class="muted small">${a.hostname}</div>` },
    { id: "pool", header: "Pool", sortable: true, value: (a) => (a.resourcePools || [])[0] },
    { id: "state", header: "State", sortable: true, value: (a) => a.state || (a.connected ? "CONNECTED" : "DISCONNECTED"),
      cell: (a) => html`<${StateBadge} state=${a.state || (a.connected ? "CONNECTED" : "DISCONNECTED")} />${a.draining ? html` <span class="tag">draining</span>` : null}${a.enabled === false ? html` <span class="tag">disabled</span>` : null}` },
    { id: "slots", header: "Slots used", className: "num", value: (a) => slotsOf(a).filter((s) => s.container).length,
      cell: (a) => `${slotsOf(a).filter((s) => s.container).length} / ${slotsOf(a).length}` },
    { id: "devices", header: "Slots", cell: (a) => html`<div class="slots">${slotsOf(a).map((s) => html`<span key=${s.id}
      class=${"slot " + (s.container ? "slot-busy" : "slot-free")} title=${s.container ? `slot ${s.id}: ${nameOf(s.container.id)}` : `slot ${s.id}: free`}>
      ${s.id}: ${deviceLabel(s.device)}</span>`)}</div>` },
    { id: "running", header: "Running", cell: (a) => {
      const ids = Object.keys(a.containers || {});
      return ids.length ? html`${ids.map((id) => html`<div key=${id}>${trialLink(nameOf(id))}</div>`)}` : html`<span class="muted">idle</span>`;
    } },
    { id: "heartbeat", header: "Last heartbeat", value: (a) => a.lastHeartbeat, cell: (a) => ago(a.lastHeartbeat) },
  ];
}

function provisionerState(p, now) {
  if (!p.provider) return html`<span class="muted">static</span>`;
  const st = p.provisioning || {};
  const parts = [];
  const backoff = epoch(st.backoffUntil);
  if (backoff && backoff > now) parts.push(html`<div class="bad">backing off for ${duration(backoff - now)}${st.consecutiveErrors ? ` (${st.consecutiveErrors} errors)` : ""}</div>`);
  if (st.lastError) parts.push(html`<div class="bad small" title=${st.lastError}>launch error ${ago(st.lastErrorAt)}: ${st.lastError}</div>`);
  for (const u of st.unavailable || []) {
    const until = epoch(u.until);
    if (!until || until > now) parts.push(html`<div class="warn small">${u.instanceType}${u.spot ? " (spot)" : ""} unavailable${until ? ` for ${duration(until - now)}` : ""}</div>`);
  }
  if (!parts.length) parts.push(html`<span class="good">ok</span>`);
  return html`<div class="prov"><div class="muted small">${p.provider.type} · ${p.numInstances ?? 0}/${p.provider.maxInstances ?? "∞"} instances</div>${parts}</div>`;
}

function poolColumns(perHour, now) {
  return [
    { id: "name", header: "Pool", sortable: true, cell: (p) => html`<b>${p.name}</b>${p.description ? html`<div class="muted small">${p.description}</div>` : null}` },
    { id: "type", header: "Scheduler", cell: (p) => html`${String(p.schedulerType || "").replace("SCHEDULER_TYPE_", "").toLowerCase()}${p.preemptible ? " · preemptive" : ""}` },
    { id: "agents", header: "Agents", className: "num", value: (p) => p.numAgents },
    { id: "slots", header: "Slots used", className: "num", value: (p) => p.slotsUsed,
      cell: (p) => html`<span class="slot-bar"><span style=${{ width: `${p.slotsAvailable ? Math.min(100, (100 * p.slotsUsed) / p.slotsAvailable) : 0}%` }}></span></span> ${p.slotsUsed ?? 0} / ${p.slotsAvailable ?? 0}` },
    { id: "queue", header: "Queued", className: "num", value: (p) => p.queuedTasks,
      cell: (p) => html`${p.queuedTasks ?? 0}${p.pendingSlots ? html` <span class="muted small">(${p.pendingSlots} slots)</span>` : null}` },
    { id: "provisioner", header: "Provisioner", cell: (p) => provisionerState(p, now) },
    { id: "cost", header: "Cost / hour", className: "num", value: (p) => perHour[p.name] || 0, cell: (p) => money(perHour[p.name] || 0) },
  ];
}

function instanceColumns(now, since) {
  const end = (i) => epoch(i.terminatedAt) ?? now;
  const live = (i) => !i.terminatedAt;
  return [
    { id: "id", header: "Instance", sortable: true, cell: (i) => html`<span class="mono">${i.id}</span>${i.adopted ? html` <span class="tag">adopted</span>` : null}` },
    { id: "pool", header: "Pool", sortable: true, value: (i) => i.resourcePool },
    { id: "type", header: "Type", sortable: true, value: (i) => i.instanceType, cell: (i) => html`${i.instanceType}<span class="muted small"> · ${i.slots} slot${i.slots === 1 ? "" : "s"}</span>` },
    { id: "market", header: "Market", sortable: true, value: (i) => (i.spot ? "spot" : "on-demand") },
    { id: "state", header: "State", sortable: true, cell: (i) => html`<${StateBadge} state=${i.state} />${i.terminationReason ? html`<div class="muted small">${i.terminationReason}</div>` : null}` },
    { id: "uptime", header: "Uptime", className: "num", value: (i) => end(i) - epoch(i.launchedAt), cell: (i) => duration(end(i) - epoch(i.launchedAt)) },
    { id: "idle", header: "Idle", className: "num", value: (i) => i.idleSeconds,
      cell: (i) => (i.idleSeconds == null || !live(i) ? "—" : duration(i.idleSeconds + since)) },
    { id: "price", header: "$ / hour", className: "num", value: (i) => i.pricePerHour, cell: (i) => money(i.pricePerHour) },
    { id: "cost", header: "Cost so far", className: "num", value: (i) => i.cost,
      cell: (i) => money((i.cost || 0) + (live(i) ? ((i.pricePerHour || 0) * since) / 3600 : 0)) },
  ];
}

const CLUSTER_POLL_MS = 1500;

export function ClusterPage() {
  const [showAll, setShowAll] = useState(false);
  const [showGone, setShowGone] = useState(false);
  // these views have no 304 (part of their state lives in the master's memory): polled every 1.5 s,
  // which keeps the page under 2 s behind at two thirds of the master's CPU of a 1 s poll
  const agents = usePoll("/api/v1/agents", CLUSTER_POLL_MS);
  const pools = usePoll("/api/v1/resource-pools", CLUSTER_POLL_MS);
  const instances = usePoll(apiUrl("/api/v1/instances", { all: showAll ? "true" : "" }), CLUSTER_POLL_MS);
  const tasks = usePoll("/api/v1/tasks", CLUSTER_POLL_MS);
  const now = useNow(1000) / 1000;
  const taskMap = (tasks.data && tasks.data.allocationIdToSummary) || {};
  const inst = (instances.data && instances.data.instances) || [];
  // what the master computed as of its answer, carried on while 304s keep that answer
  const since = Math.max(0, now - receivedAt(instances.data) / 1000);
  const perHour = {};
  let soFar = 0;
  for (const i of inst) {
    if (!i.terminatedAt) perHour[i.resourcePool] = (perHour[i.resourcePool] || 0) + (i.pricePerHour || 0);
    soFar += (i.cost || 0) + (!i.terminatedAt ? ((i.pricePerHour || 0) * since) / 3600 : 0);
  }
  const totalPerHour = Object.values(perHour).reduce((a, b) => a + b, 0);
  const allAgents = (agents.data && agents.data.agents) || [];
  const agentRows = showGone ? allAgents : allAgents.filter((a) => a.state !== "GONE");
  const gone = allAgents.length - allAgents.filter((a) => a.state !== "GONE").length;
  const poolRows = (pools.data && pools.data.resourcePools) || [];

  return html`<div class="page">
    <div class="page-head"><h1>Cluster</h1><span class="spacer"></span>
      <div class="cost-total" data-testid="cost-total" title="running cost of the live instances">
        <b>${money(totalPerHour)}/h</b> running · ${money(soFar)} so far</div>
    </div>
    <section class="card">
      <div class="card-head"><h2>Resource pools</h2></div>
      ${pools.error && !pools.data ? html`<${ErrorBox} error=${pools.error} />` : !pools.data ? html`<${Loading} />` : html`
        <div class="table-wrap"><${DataTable} testid="pools-table" columns=${poolColumns(perHour, now)} rows=${poolRows}
          rowKey=${(p) => p.name} rowAttrs=${(p) => ({ "data-pool": p.name })} empty="No resource pools." /></div>`}
    </section>
    <section class="card">
      <div class="card-head"><h2>Agents</h2><span class="muted small">${agentRows.length}</span><span class="spacer"></span>
        ${gone ? html`<label class="check"><input type="checkbox" data-testid="agents-gone" checked=${showGone}
          onChange=${(e) => setShowGone(e.currentTarget.checked)} /> Include ${gone} gone</label>` : null}</div>
      ${agents.error && !agents.data ? html`<${ErrorBox} error=${agents.error} />` : !agents.data ? html`<${Loading} />` : html`
        <div class="table-wrap"><${DataTable} testid="agents-table" columns=${agentColumns(taskMap)} rows=${agentRows}
          rowKey=${(a) => a.id} rowAttrs=${(a) => ({ "data-agent-id": a.id })} initialSort=${[{ id: "id", desc: false }]}
          empty="No agents are connected." /></div>`}
    </section>
    <section class="card">
      <div class="card-head"><h2>Instances</h2><span class="muted small">${inst.length}</span><span class="spacer"></span>
        <label class="check"><input type="checkbox" data-testid="instances-all" checked=${showAll}
          onChange=${(e) => setShowAll(e.currentTarget.checked)} /> Include terminated</label></div>
      ${instances.error && !instances.data ? html`<${ErrorBox} error=${instances.error} />` : !instances.data ? html`<${Loading} />` : html`
        <div class="table-wrap"><${DataTable} testid="instances-table" columns=${instanceColumns(now, since)} rows=${inst}
          rowKey=${(i) => i.id} rowAttrs=${(i) => ({ "data-instance-id": i.id, "data-state": i.state })}
          empty="No instances: the provisioners have launched none (or all are terminated)." /></div>
`}
    </section>
  </div>`;
}
