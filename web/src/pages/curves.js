// An experiment's learning curves (every trial's validation metric vs steps, uPlot) and its
// hyperparameter view (the metric vs each hyperparameter, one scatter each).
import { useMemo } from "preact/hooks";
import { apiUrl, usePoll } from "../api.js";
import { colorOf, LineChart } from "../chart.js";
import { flatten, hparamValue, metric } from "../format.js";
import { html } from "../html.js";

export const MAX_POINTS = 1000;

// points per trial asked for: fewer as trials add up (200 curves of 500 points are already more than a
// chart's pixels), in steps, so that a few new trials do not change the URL and refetch every series
export function pointsPerTrial(trialCount) {
  if (trialCount <= 100) return MAX_POINTS;
  if (trialCount <= 250) return 500;
  if (trialCount <= 500) return 250;
  return 100;
}

// the validation metric names the trials reported (their latest report), the searcher's first
export function validationNames(trials, searcherMetric) {
  const names = new Set(searcherMetric ? [searcherMetric] : []);
  for (const t of trials || []) {
    const latest = (t.summaryMetrics || {}).latest_validation;
    for (const k of Object.keys((latest && latest.metrics) || {})) names.add(k);
  }
  return [...names];
}

export function useExperimentSeries(experimentId, name, trialCount) {
  const url = name
    ? apiUrl(`/api/v1/experiments/${experimentId}/metric-series`, { group: "validation", names: name, maxPoints: pointsPerTrial(trialCount || 0) })
    : null;
  return usePoll(url);
}

function HparamList({ hparams }) {
  const flat = flatten(hparams);
  return html`<table class="tip-hparams">
    ${Object.entries(flat).map(([k, v]) => html`<tr key=${k}><td>${k}</td><td>${hparamValue(v)}</td></tr>`)}
  </table>`;
}

export function LearningCurves({ exp, trials, seriesPoll, name, names, onName, logScale, onLogScale, selected, onSelect }) {
  const byId = useMemo(() => new Map((trials || []).map((t) => [t.id, t])), [trials]);
  const raw = seriesPoll.data;
  const series = useMemo(() => {
    const list = ((raw && raw.series) || []).filter((s) => s.name === name).slice().sort((a, b) => a.trialId - b.trialId);
    return list.map((s) => ({ key: s.trialId, label: `trial ${s.trialId}`, steps: s.steps, values: s.values,
      color: colorOf(s.trialId - 1) }));
  }, [raw, name]);
  const points = useMemo(() => JSON.stringify(Object.fromEntries(series.map((s) => [String(s.key), s.steps.length]))), [series]);
  const downsampled = ((raw && raw.series) || []).some((s) => s.downsampled);

  const tooltip = (key, x, y) => {
    const t = byId.get(key);
    return html`<div><b>Trial ${key}</b> · step ${x} · ${name} ${metric(y)}</div>${t ? html`<${HparamList} hparams=${t.hparams} />` : null}`;
  };

  return html`<section class="card">
    <div class="card-head">
      <h2>Learning curves</h2>
      <span class="spacer"></span>
      <label>Metric
        <select data-testid="metric-select" value=${name} onChange=${(e) => onName(e.currentTarget.value)}>
          ${names.map((n) => html`<option key=${n} value=${n}>${n}${n === exp.searcherMetric ? " (searcher)" : ""}</option>`)}
        </select>
      </label>
      <label class="check"><input type="checkbox" data-testid="log-scale" checked=${logScale}
        onChange=${(e) => onLogScale(e.currentTarget.checked)} /> Log scale</label>
    </div>
    ${seriesPoll.error && !raw ? html`<div class="error-box">Learning curves: ${seriesPoll.error.message}</div>` : null}
    <${LineChart} testid="learning-curves" attrs=${{ "data-points": points, "data-metric": name }} series=${series}
      logScale=${logScale} selected=${selected} onSelect=${onSelect} tooltip=${tooltip} yLabel=${name} />
    <div class="muted small">${series.length} trial${series.length === 1 ? "" : "s"}${downsampled ? ` · downsampled to at most ${raw.maxPoints} points per trial` : ""} · click a curve to highlight its trial</div>
  </section>`;
}

// one scatter per hyperparameter that varies across the trials: x the hparam, y the trial's metric
export function HparamView({ trials, valueOf, name, selected, onSelect }) {
  const rows = (trials || []).map((t) => ({ id: t.id, hp: flatten(t.hparams), y: valueOf(t) })).filter((r) => r.y != null && Number.isFinite(r.y));
  const keys = [...new Set((trials || []).flatMap((t) => Object.keys(flatten(t.hparams))))];
  const varying = keys.filter((k) => new Set((trials || []).map((t) => JSON.stringify(flatten(t.hparams)[k]))).size > 1);
  return html`<section class="card">
    <div class="card-head"><h2>Hyperparameters</h2><span class="muted small">${name} vs each hyperparameter that varies</span></div>
    ${varying.length === 0
      ? html`<div class="muted">No hyperparameter varies across the trials.</div>`
      : html`<div class="scatters" data-testid="hparam-view">
          ${varying.map((k) => html`<${Scatter} key=${k} label=${k} name=${name} selected=${selected} onSelect=${onSelect}
            points=${rows.filter((r) => r.hp[k] !== undefined).map((r) => ({ id: r.id, x: r.hp[k], y: r.y }))} />`)}
        </div>`}
  </section>`;
}

const W = 300;
const H = 200;
const PAD = { l: 52, r: 10, t: 10, b: 34 };

function Scatter({ label, name, points, selected, onSelect }) {
  const numeric = points.every((p) => typeof p.x === "number");
  const cats = numeric ? [] : [...new Set(points.map((p) => hparamValue(p.x)))].sort();
  const xs = points.map((p) => (numeric ? p.x : cats.indexOf(hparamValue(p.x))));
  const ys = points.map((p) => p.y);
  const positive = numeric && xs.length > 1 && xs.every((x) => x > 0);
  const logX = positive && Math.max(...xs) / Math.min(...xs) >= 100;
  const tx = (x) => (logX ? Math.log10(x) : x);
  const [x0, x1] = extent(xs.map(tx), !numeric);
  const [y0, y1] = extent(ys, false);
  const sx = (x) => PAD.l + ((tx(x) - x0) / (x1 - x0)) * (W - PAD.l - PAD.r);
  const sy = (y) => H - PAD.b - ((y - y0) / (y1 - y0)) * (H - PAD.t - PAD.b);
  const decades = [];
  for (let k = Math.ceil(x0); logX && k <= Math.floor(x1); k++) decades.push(k);
  const xticks = !numeric ? cats.map((_, i) => i) : decades.length >= 2 ? decades : [x0, (x0 + x1) / 2, x1];
  const xtickLabel = (v, i) => (numeric ? metric(logX ? Math.pow(10, v) : v) : cats[i]);
  return html`<figure class="scatter">
    <svg viewBox=${`0 0 ${W} ${H}`} width=${W} height=${H} role="img" aria-label=${`${name} vs ${label}`}>
      <rect x=${PAD.l} y=${PAD.t} width=${W - PAD.l - PAD.r} height=${H - PAD.t - PAD.b} class="plot-bg" />
      ${[y0, (y0 + y1) / 2, y1].map((v) => html`<text key=${"y" + v} x=${PAD.l - 4} y=${sy(v) + 3} class="tick" text-anchor="end">${metric(v)}</text>`)}
      ${xticks.map((v, i) => {
        const px = numeric ? PAD.l + ((v - x0) / (x1 - x0)) * (W - PAD.l - PAD.r) : sx(v);
        const anchor = numeric && xticks.length > 1 && i === xticks.length - 1 ? "end" : numeric && i === 0 ? "start" : "middle";
        return html`<text key=${"x" + i} x=${px} y=${H - PAD.b + 14} class="tick" text-anchor=${anchor}>${xtickLabel(v, i)}</text>`;
      })}
      <text x=${(PAD.l + W - PAD.r) / 2} y=${H - 4} class="axis-label" text-anchor="middle">${label}${logX ? " (log)" : ""}</text>
      ${points.map((p, i) => html`<circle key=${p.id} cx=${sx(xs[i])} cy=${sy(p.y)} r=${p.id === selected ? 6 : 4}
        class=${p.id === selected ? "dot selected" : "dot"} fill=${colorOf(p.id - 1)} onClick=${() => onSelect(p.id)}>
        <title>trial ${p.id}: ${label}=${hparamValue(p.x)}, ${name}=${metric(p.y)}</title></circle>`)}
    </svg>
  </figure>`;
}

function extent(vals, categorical) {
  if (!vals.length) return [0, 1];
  let lo = Math.min(...vals);
  let hi = Math.max(...vals);
  if (categorical) return [lo - 0.5, hi + 0.5];
  if (lo === hi) {
    const d = Math.abs(lo) * 0.1 || 1;
    return [lo - d, hi + d];
  }
  const pad = (hi - lo) * 0.06;
  return [lo - pad, hi + pad];
}
