// /experiments/:id: header (state, progress, description, actions), learning curves, the
// hyperparameter view, trials and the config as YAML.
import { useMemo, useState } from "preact/hooks";
import { mutate, usePoll } from "../api.js";
import { Crumbs, ErrorBox, ExperimentActions, KeyValues, Labels, Loading, NotFound, ProgressBar, StateBadge } from "../components.js";
import { dateTime, flatten, hparamValue, metric, stateName } from "../format.js";
import { html } from "../html.js";
import { Link } from "../router.js";
import { toastError } from "../store.js";
import { DataTable } from "../table.js";
import { Duration } from "../widgets.js";
import { toYaml } from "../yaml.js";
import { HparamView, LearningCurves, useExperimentSeries, validationNames } from "./curves.js";

export function DescriptionEditor({ exp }) {
  const [draft, setDraft] = useState(null); // null: showing the master's value
  const [saving, setSaving] = useState(false);
  const [saved, setSaved] = useState(null); // shown until the master's answer has it
  if (saved !== null && saved === (exp.description || "")) setSaved(null);
  async function save(value) {
    if (value === null || value === (exp.description || "")) {
      setDraft(null);
      return;
    }
    setSaving(true);
    try {
      await mutate("PATCH", `/api/v1/experiments/${exp.id}`, { description: value });
      setSaved(value);
      setDraft(null);
    } catch (err) {
      if (err.status !== 401) toastError(`Description: ${err.message}`);
    } finally {
      setSaving(false);
    }
  }
  return html`<input class=${"description" + (saving ? " saving" : "")} data-testid="experiment-description"
    aria-label="description" placeholder="Add a description…" value=${draft ?? saved ?? exp.description ?? ""}
    onInput=${(e) => setDraft(e.currentTarget.value)}
    onKeyDown=${(e) => {
      if (e.key === "Enter") e.currentTarget.blur();
      if (e.key === "Escape") {
        setDraft(null);
        e.currentTarget.value = exp.description || "";
        setTimeout(() => e.target.blur());
      }
    }}
    onBlur=${() => save(draft)} />`;
}

// the searcher's settings that are set: nested ones as "batches: 1000"
export function searcherItems(searcher) {
  const shown = (v) => {
    if (v && typeof v === "object") {
      return Object.entries(v).filter(([, x]) => x !== null && x !== undefined).map(([k, x]) => `${k}: ${shown(x)}`).join(", ");
    }
    return String(v);
  };
  return Object.entries(searcher).filter(([, v]) => v !== null && v !== undefined && v !== "").map(([k, v]) => [k, shown(v)]);
}

function Header({ exp }) {
  const searcher = (exp.config && exp.config.searcher) || {};
  return html`<section class="card header" data-testid="experiment-header">
    <div class="title-row">
      <h1><span class="muted">Experiment ${exp.id}</span> ${exp.name}</h1>
      <${StateBadge} state=${exp.state} testid="experiment-state" />
      ${exp.archived ? html`<span class="tag">archived</span>` : null}
      <span class="spacer"></span>
      <${ExperimentActions} exp=${exp} />
    </div>
    <${DescriptionEditor} exp=${exp} />
    <div class="header-grid">
      <${KeyValues} items=${[
        ["Progress", html`<${ProgressBar} value=${exp.progress} state=${exp.state} />`],
        ["User", exp.username],
        ["Resource pool", exp.resourcePool],
        ["Started", dateTime(exp.startTime)],
        ["Duration", html`<${Duration} start=${exp.startTime} end=${exp.endTime} />`],
        ["Trials", exp.numTrials],
        ["Labels", html`<${Labels} labels=${exp.labels} />`],
        exp.forkedFrom ? ["Forked from", html`<${Link} href=${`/experiments/${exp.forkedFrom}`}>${exp.forkedFrom}</${Link}>`] : null,
        exp.endReason ? ["End reason", exp.endReason] : null,
      ]} />
      <div class="searcher" data-testid="searcher">
        <h3>Searcher</h3>
        <${KeyValues} items=${searcherItems(searcher)} />
      </div>
    </div>
  </section>`;
}

function trialColumns(hpKeys, searcherMetric) {
  return [
    { id: "id", header: "Trial", sortable: true, className: "num",
      cell: (t) => html`<${Link} href=${`/trials/${t.id}`} onClick=${(e) => e.stopPropagation()}>${t.id}</${Link}>` },
    { id: "state", header: "State", sortable: true,
      cell: (t) => html`<${StateBadge} state=${t.state} />${t.waitReason ? html` <span class="muted small" title=${t.waitReason}>${t.waitReason}</span>` : null}` },
    ...hpKeys.map((k) => ({ id: "hp:" + k, header: k, sortable: true, className: "hp",
      value: (t) => flatten(t.hparams)[k], cell: (t) => hparamValue(flatten(t.hparams)[k]) })),
    { id: "best", header: `Best ${searcherMetric || "metric"}`, sortable: true, className: "num",
      value: (t) => t.searcherMetricValue ?? undefined, cell: (t) => metric(t.searcherMetricValue) },
    { id: "steps", header: "Steps", sortable: true, className: "num", value: (t) => t.totalBatchesProcessed },
    { id: "restarts", header: "Restarts", sortable: true, className: "num" },
    { id: "endReason", header: "End reason", value: (t) => t.endReason || "", cell: (t) => t.endReason || "—" },
    { id: "checkpoints", header: "Checkpoints", sortable: true, className: "num", value: (t) => t.checkpointCount },
    { id: "duration", header: "Duration", className: "num", cell: (t) => html`<${Duration} start=${t.startTime} end=${t.endTime} />` },
  ];
}

export function ExperimentPage({ id }) {
  const expPoll = usePoll(`/api/v1/experiments/${encodeURIComponent(id)}`);
  const trialsPoll = usePoll(expPoll.error && expPoll.error.status === 404 ? null : `/api/v1/experiments/${encodeURIComponent(id)}/trials`);
  const exp = expPoll.data && expPoll.data.experiment;
  const trials = trialsPoll.data && trialsPoll.data.trials;
  const [chosen, setChosen] = useState(null);
  const [logScale, setLogScale] = useState(false);
  const [selected, setSelected] = useState(null);

  const searcherMetric = exp ? exp.searcherMetric : "";
  const [listed, setListed] = useState([]); // the names the series answers list (every name reported)
  const names = useMemo(() => [...new Set([...validationNames(trials, searcherMetric), ...listed])], [trials, searcherMetric, listed]);
  const name = chosen && names.includes(chosen) ? chosen : names[0] || "";
  const seriesPoll = useExperimentSeries(exp ? exp.id : null, exp ? name : null, exp ? exp.numTrials : 0);
  const answered = seriesPoll.data && seriesPoll.data.names;
  if (answered && answered.some((n) => !listed.includes(n))) setListed([...new Set([...listed, ...answered])]);
  const hpKeys = useMemo(() => [...new Set((trials || []).flatMap((t) => Object.keys(flatten(t.hparams))))], [trials]);
  const columns = useMemo(() => trialColumns(hpKeys, searcherMetric), [hpKeys.join("\n"), searcherMetric]);
  const yaml = useMemo(() => (exp ? toYaml(exp.config) : ""), [exp && exp.config]);

  if (!/^\d+$/.test(id) || (expPoll.error && expPoll.error.status === 404)) {
    return html`<${NotFound} what=${`Experiment ${id} does not exist.`} />`;
  }
  if (!exp) return expPoll.error ? html`<${ErrorBox} error=${expPoll.error} />` : html`<${Loading} />`;

  // the value each trial shows in the hyperparameter view: its best searcher metric, or the last
  // value of the chosen metric
  const last = new Map(((seriesPoll.data && seriesPoll.data.series) || []).filter((s) => s.name === name)
    .map((s) => [s.trialId, s.values.length ? s.values[s.values.length - 1] : null]));
  const valueOf = (t) => (name === searcherMetric ? t.searcherMetricValue : last.get(t.id));
  const toggle = (tid) => setSelected((cur) => (cur === tid ? null : tid));

  return html`<div class="page">
    <${Crumbs} items=${[["/experiments", "Experiments"], [null, `experiment ${exp.id}`]]} />
    <${Header} exp=${exp} />
    <${LearningCurves} exp=${exp} trials=${trials} seriesPoll=${seriesPoll} name=${name} names=${names} onName=${setChosen}
      logScale=${logScale} onLogScale=${setLogScale} selected=${selected} onSelect=${toggle} />
    <${HparamView} trials=${trials} valueOf=${valueOf} name=${name === searcherMetric ? `best ${name}` : `latest ${name}`}
      selected=${selected} onSelect=${toggle} />
    <section class="card">
      <div class="card-head"><h2>Trials</h2><span class="muted small">${trials ? trials.length : 0} trial(s)${selected ? ` · trial ${selected} highlighted` : ""}</span></div>
      ${trialsPoll.error && !trials ? html`<${ErrorBox} error=${trialsPoll.error} />` : null}
      <div class="table-wrap">
        <${DataTable} testid="trials-table" columns=${columns} rows=${trials || []} rowKey=${(t) => t.id} pageSize=${100}
          initialSort=${[{ id: "id", desc: false }]}
          rowAttrs=${(t) => ({ "data-trial-id": t.id, "data-state": t.state, class: t.id === selected ? "selected clickable" : "clickable",
            onClick: () => toggle(t.id), title: `trial ${t.id}: ${stateName(t.state)}` })}
          empty=${trials ? "No trials yet." : "Loading…"} />
      </div>
    </section>
    <section class="card">
      <div class="card-head"><h2>Configuration</h2></div>
      <pre class="config" data-testid="experiment-config">${yaml}</pre>
    </section>
  </div>`;
}
