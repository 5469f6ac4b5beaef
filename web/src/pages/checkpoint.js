// /checkpoints/:uuid and the checkpoints table of a trial.
import { apiUrl, usePoll } from "../api.js";
import { Crumbs, ErrorBox, KeyValues, Loading, NotFound, StateBadge } from "../components.js";
import { bytes, dateTime, metric } from "../format.js";
import { html } from "../html.js";
import { Link } from "../router.js";
import { DataTable } from "../table.js";
import { toYaml } from "../yaml.js";

export const sizeOf = (c) => Object.values(c.resources || {}).reduce((a, b) => a + (Number(b) || 0), 0);
export const stepsOf = (c) => (c.metadata && c.metadata.steps_completed) ?? null;
// the files are gone once a checkpoint is deleted, and going while `deleting`; the master offers no download then
export const downloadable = (c) =>
  Object.keys(c.resources || {}).length > 0 && c.state !== "STATE_DELETED" && !c.deleting;

function DownloadLink({ c }) {
  if (!downloadable(c)) return html`<span class="muted">—</span>`;
  return html`<a data-testid="checkpoint-download" href=${`/api/v1/checkpoints/${c.uuid}/download`} download=${`${c.uuid}.tar`}>Download</a>`;
}

const COLUMNS = [
  { id: "uuid", header: "UUID", cell: (c) => html`<${Link} class="mono" href=${`/checkpoints/${c.uuid}`}>${c.uuid}</${Link}>` },
  { id: "steps", header: "Steps", sortable: true, className: "num", value: stepsOf },
  { id: "size", header: "Size", sortable: true, className: "num", value: sizeOf, cell: (c) => (sizeOf(c) ? bytes(sizeOf(c)) : "—") },
  { id: "state", header: "State", sortable: true, cell: (c) => html`<${StateBadge} state=${c.state} />` },
  { id: "metric", header: "Searcher metric", className: "num", value: (c) => (c.training || {}).searcherMetric, cell: (c) => metric((c.training || {}).searcherMetric) },
  { id: "time", header: "Reported", value: (c) => c.reportTime, cell: (c) => dateTime(c.reportTime) },
  { id: "download", header: "", cell: (c) => html`<${DownloadLink} c=${c} />` },
];

export function CheckpointsTable({ trialId }) {
  const poll = usePoll(apiUrl("/api/v1/checkpoints", { trialId }));
  const rows = poll.data && poll.data.checkpoints;
  if (poll.error && !rows) return html`<${ErrorBox} error=${poll.error} />`;
  return html`<div class="table-wrap">
    <${DataTable} testid="checkpoints-table" columns=${COLUMNS} rows=${rows || []} rowKey=${(c) => c.uuid} pageSize=${20}
      initialSort=${[{ id: "steps", desc: true }]}
      rowAttrs=${(c) => ({ "data-checkpoint-uuid": c.uuid, "data-state": c.state })}
      empty=${rows ? "No checkpoints yet." : "Loading…"} />
  </div>`;
}

export function CheckpointPage({ uuid }) {
  const poll = usePoll(`/api/v1/checkpoints/${encodeURIComponent(uuid)}`, 2000);
  const c = poll.data && poll.data.checkpoint;
  if (poll.error && [400, 404].includes(poll.error.status)) return html`<${NotFound} what=${`Checkpoint ${uuid} does not exist.`} />`;
  if (!c) return poll.error ? html`<${ErrorBox} error=${poll.error} />` : html`<${Loading} />`;
  const t = c.training || {};
  const val = (t.validationMetrics && t.validationMetrics.avgMetrics) || {};
  const files = Object.entries(c.resources || {}).sort(([a], [b]) => a.localeCompare(b));
  return html`<div class="page">
    <${Crumbs} items=${[["/experiments", "Experiments"], t.experimentId ? [`/experiments/${t.experimentId}`, `experiment ${t.experimentId}`] : null,
      t.trialId ? [`/trials/${t.trialId}`, `trial ${t.trialId}`] : null, [null, "checkpoint"]]} />
    <section class="card header" data-testid="checkpoint-header">
      <div class="title-row">
        <h1><span class="muted">Checkpoint</span> <span class="mono">${c.uuid}</span></h1>
        <${StateBadge} state=${c.state} testid="checkpoint-state" />
        <span class="spacer"></span>
        ${downloadable(c) ? html`<a class="button" data-testid="checkpoint-download" href=${`/api/v1/checkpoints/${c.uuid}/download`} download=${`${c.uuid}.tar`}>Download (.tar)</a>` : null}
      </div>
      <${KeyValues} items=${[
        ["Steps", stepsOf(c) ?? "—"],
        ["Size", sizeOf(c) ? bytes(sizeOf(c)) : "—"],
        ["Reported", dateTime(c.reportTime)],
        t.trialId ? ["Trial", html`<${Link} href=${`/trials/${t.trialId}`}>${t.trialId}</${Link}>`] : null,
        t.searcherMetric !== undefined ? ["Searcher metric", metric(t.searcherMetric)] : null,
      ]} />
    </section>
    <div class="two-col">
      <section class="card">
        <div class="card-head"><h2>Validation metrics</h2></div>
        <${KeyValues} items=${Object.entries(val).map(([k, v]) => [k, metric(v)])} />
        <div class="card-head spaced"><h2>Metadata</h2></div>
        <pre class="config">${toYaml(c.metadata || {})}</pre>
      </section>
      <section class="card">
        <div class="card-head"><h2>Files</h2><span class="muted small">${files.length}</span></div>
        <table class="table" data-testid="checkpoint-files">
          <thead><tr><th>Path</th><th class="num">Size</th></tr></thead>
          <tbody>${files.map(([p, s]) => html`<tr key=${p}><td class="mono">${p}</td><td class="num">${bytes(s)}</td></tr>`)}</tbody>
        </table>
      </section>
    </div>
  </div>`;
}
