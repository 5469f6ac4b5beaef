// /task-list (the master answers /tasks itself, as Determined's does): the live commands, notebooks,
// shells and TensorBoards of every user, with Open (a notebook's or TensorBoard's service through the
// master's proxy) and Kill.
import { mutate, usePoll } from "../api.js";
import { ErrorBox, Loading, StateBadge } from "../components.js";
import { html } from "../html.js";
import { confirm, toastError, toastInfo } from "../store.js";
import { DataTable } from "../table.js";
import { canOpen, openUrl, TASK_KINDS, taskRows } from "../tasks.js";
import { Duration } from "../widgets.js";

async function killTask(task) {
  const kind = TASK_KINDS.find((k) => k.kind === task.kind);
  const ok = await confirm(`Kill ${task.kind} ${task.id.slice(0, 8)}?`, `${task.description || ""} — it is stopped at once.`, "Kill");
  if (!ok) return;
  try {
    await mutate("POST", `/api/v1/${kind.plural}/${encodeURIComponent(task.id)}/kill`);
    toastInfo(`${kind.label} ${task.id.slice(0, 8)}: kill requested`);
  } catch (err) {
    if (err.status !== 401) toastError(`Kill ${task.kind} ${task.id.slice(0, 8)}: ${err.message}`);
  }
}

function TaskActions({ task, me }) {
  const url = openUrl(task, me);
  return html`<span class="actions">
    ${canOpen(task, me) ? (url
      ? html`<a class="button small" data-action="open" href=${url} target="_blank" rel="noopener">Open</a>`
      : html`<span class="muted" data-action="open-pending">${task.state === "STATE_QUEUED" ? "waiting…" : "starting…"}</span>`) : null}
    <button class="small danger" data-action="kill" onClick=${() => killTask(task)}>Kill</button>
  </span>`;
}

const columns = (me) => [
  { id: "kind", header: "Kind", sortable: true, value: (t) => t.kindLabel },
  { id: "id", header: "ID", cell: (t) => html`<code title=${t.id}>${t.id.slice(0, 8)}</code>` },
  { id: "description", header: "Description", sortable: true },
  { id: "owner", header: "Owner", sortable: true, value: (t) => t.username },
  { id: "state", header: "State", sortable: true, cell: (t) => html`<${StateBadge} state=${t.state} />` },
  { id: "ready", header: "Ready", value: (t) => (t.isReady ? "yes" : "no") },
  { id: "pool", header: "Pool", value: (t) => t.resourcePool },
  { id: "duration", header: "Age", className: "num", cell: (t) => html`<${Duration} start=${t.startTime} />` },
  { id: "actions", header: "", cell: (t) => html`<${TaskActions} task=${t} me=${me} />` },
];

export function TasksPage() {
  const who = usePoll("/api/v1/me", 10000);
  const me = who.data && who.data.user;
  const polls = {};
  for (const k of TASK_KINDS) polls[k.plural] = usePoll(`/api/v1/${k.plural}`); // a fixed list: hooks keep their order
  const answers = Object.fromEntries(Object.entries(polls).map(([p, r]) => [p, r.data]));
  const failed = Object.values(polls).find((r) => r.error && !r.data);
  const loading = Object.values(polls).some((r) => r.loading);
  return html`<div class="page">
    <div class="page-head"><h1>Tasks</h1></div>
    <p class="muted">Commands, notebooks, shells and TensorBoards that are queued or running (<code>pedl cmd|notebook|shell|tensorboard</code> starts them).</p>
    <section class="card">
      ${failed ? html`<${ErrorBox} error=${failed.error} />` : loading ? html`<${Loading} />` : html`
        <div class="table-wrap"><${DataTable} testid="tasks-table" columns=${columns(me)} rows=${taskRows(answers)}
          rowKey=${(t) => t.id}
          rowAttrs=${(t) => ({ "data-task-id": t.id, "data-kind": t.kind, "data-state": t.state, "data-ready": String(!!t.isReady) })}
          empty="No command, notebook, shell or TensorBoard is queued or running." /></div>`}
    </section>
  </div>`;
}
