// /trials/:id: header, training and validation charts (metric selector, smoothing), the live log,
// checkpoints and the allocation timeline.
import { useMemo, useState } from "preact/hooks";
import { apiUrl, mutate, usePoll } from "../api.js";
import { LineChart, smooth } from "../chart.js";
import { Crumbs, ErrorBox, KeyValues, Loading, NotFound, StateBadge } from "../components.js";
import { dateTime, flatten, hparamValue, metric, TERMINAL } from "../format.js";
import { html } from "../html.js";
import { Link } from "../router.js";
import { confirm, toastError } from "../store.js";
import { Duration } from "../widgets.js";
import { CheckpointsTable } from "./checkpoint.js";
import { TrialLogs } from "./logs.js";
import { Timeline } from "./timeline.js";

const MAX_POINTS = 2000;

function namesOf(trial, group) {
  const latest = (trial.summaryMetrics || {})[`latest_${group}`];
  return Object.keys((latest && latest.metrics) || {}).sort();
}

function GroupChart({ trial, group, title, smoothing, preferred }) {
  const [listed, setListed] = useState([]); // the names the series answers list
  const names = [...new Set([...namesOf(trial, group), ...listed])].sort();
  const [chosen, setChosen] = useState(null);
  const name = chosen && names.includes(chosen) ? chosen : names.includes(preferred) ? preferred : names[0] || "";
  const url = name ? apiUrl(`/api/v1/trials/${trial.id}/metric-series`, { group, names: name, maxPoints: MAX_POINTS }) : null;
  const poll = usePoll(url);
  const raw = poll.data;
  if (raw && raw.names && raw.names.some((n) => !listed.includes(n))) setListed([...new Set([...listed, ...raw.names])]);
  const series = useMemo(() => {
    const s = ((raw && raw.series) || []).find((x) => x.name === name);
    if (!s) return [];
    const out = [{ key: "raw", label: name, steps: s.steps, values: s.values, color: smoothing ? "#9db8f0" : "#2563eb" }];
    if (smoothing) out.push({ key: "smoothed", label: `${name} (smoothed)`, steps: s.steps, values: smooth(s.values, smoothing), color: "#2563eb" });
    return out;
  }, [raw, name, smoothing]);
  const tooltip = (key, x, y) => html`<div>step ${x} · ${key === "smoothed" ? "smoothed " : ""}${name} ${metric(y)}</div>`;
  return html`<div class="chart-box" data-group=${group}>
    <div class="card-head">
      <h3>${title}</h3>
      <span class="spacer"></span>
      ${names.length ? html`<select data-testid=${`metric-select-${group}`} aria-label=${`${group} metric`} value=${name}
        onChange=${(e) => setChosen(e.currentTarget.value)}>
        ${names.map((n) => html`<option key=${n} value=${n}>${n}</option>`)}
      </select>` : null}
    </div>
    ${poll.error && !raw ? html`<div class="error-box">${poll.error.message}</div>` : null}
    <${LineChart} testid=${`chart-${group}`} series=${series} tooltip=${tooltip} height=${240} yLabel=${name}
      attrs=${{ "data-points": String(series.length ? series[0].steps.length : 0), "data-metric": name }} />
  </div>`;
}

function TrialCharts({ trial, searcherMetric }) {
  const [smoothing, setSmoothing] = useState(0);
  return html`<section class="card" data-testid="trial-charts">
    <div class="card-head">
      <h2>Metrics</h2>
      <span class="spacer"></span>
      <label>Smoothing
        <input type="range" min="0" max="0.99" step="0.01" value=${smoothing} data-testid="smoothing"
          onInput=${(e) => setSmoothing(Number(e.currentTarget.value))} />
        <span class="num small">${smoothing.toFixed(2)}</span>
      </label>
    </div>
    <div class="chart-grid">
      <${GroupChart} trial=${trial} group="training" title="Training" smoothing=${smoothing} preferred="loss" />
      <${GroupChart} trial=${trial} group="validation" title="Validation" smoothing=${smoothing} preferred=${searcherMetric} />
    </div>
  </section>`;
}

async function killTrial(trial) {
  if (!(await confirm(`Kill trial ${trial.id}?`, "It stops at once; the experiment goes on with its other trials.", "Kill"))) return;
  try {
    await mutate("POST", `/api/v1/trials/${trial.id}/kill`);
  } catch (err) {
    if (err.status !== 401) toastError(`Kill trial ${trial.id}: ${err.message}`);
  }
}

function Header({ trial, exp }) {
  const hp = flatten(trial.hparams);
  return html`<section class="card header" data-testid="trial-header">
    <div class="title-row">
      <h1><span class="muted">Trial</span> ${trial.id}</h1>
      <${StateBadge} state=${trial.state} testid="trial-state" />
      <span class="muted">of <${Link} href=${`/experiments/${trial.experimentId}`}>experiment ${trial.experimentId}${exp ? ` (${exp.name})` : ""}</${Link}></span>
      <span class="spacer"></span>
      ${!TERMINAL.has(trial.state) ? html`<button class="danger" data-action="kill-trial" onClick=${() => killTrial(trial)}>Kill trial</button>` : null}
    </div>
    <div class="header-grid">
      <${KeyValues} items=${[
        [`Best ${exp ? exp.searcherMetric : "metric"}`, metric(trial.searcherMetricValue)],
        ["Steps", trial.totalBatchesProcessed],
        ["Restarts", trial.restarts],
        ["Checkpoints", trial.checkpointCount],
        ["Started", dateTime(trial.startTime)],
        ["Duration", html`<${Duration} start=${trial.startTime} end=${trial.endTime} />`],
        trial.endReason ? ["End reason", trial.endReason] : null,
        trial.waitReason ? ["Waiting", trial.waitReason] : null,
      ]} />
      <div>
        <h3>Hyperparameters</h3>
        <${KeyValues} items=${Object.entries(hp).map(([k, v]) => [k, hparamValue(v)])} />
      </div>
    </div>
  </section>`;
}

export function TrialPage({ id }) {
  const valid = /^\d+$/.test(id);
  const poll = usePoll(valid ? `/api/v1/trials/${id}` : null);
  const trial = poll.data && poll.data.trial;
  const expPoll = usePoll(trial ? `/api/v1/experiments/${trial.experimentId}` : null, 5000);
  const exp = expPoll.data && expPoll.data.experiment;
  if (!valid || (poll.error && poll.error.status === 404)) return html`<${NotFound} what=${`Trial ${id} does not exist.`} />`;
  if (!trial) return poll.error ? html`<${ErrorBox} error=${poll.error} />` : html`<${Loading} />`;
  return html`<div class="page">
    <${Crumbs} items=${[["/experiments", "Experiments"], [`/experiments/${trial.experimentId}`, `experiment ${trial.experimentId}`],
      [null, `trial ${trial.id}`]]} />
    <${Header} trial=${trial} exp=${exp} />
    <${TrialCharts} trial=${trial} searcherMetric=${exp ? exp.searcherMetric : ""} />
    <${TrialLogs} trialId=${trial.id} state=${trial.state} />
    <section class="card">
      <div class="card-head"><h2>Checkpoints</h2></div>
      <${CheckpointsTable} trialId=${trial.id} />
    </section>
    <${Timeline} trial=${trial} />
  </div>`;
}
