// /experiments?state=&user=&label=&name=&sort=&order=&page=: filtered, sorted and paginated on the
// server; the URL reproduces the view.
import { apiUrl, usePoll } from "../api.js";
import { ErrorBox, ExperimentActions, Labels, Loading, ProgressBar, StateBadge } from "../components.js";
import { metric, trialCount } from "../format.js";
import { html } from "../html.js";
import { Link, setQuery, useQuery } from "../router.js";
import { DataTable } from "../table.js";
import { DebouncedInput, Duration, Pager } from "../widgets.js";

export const PAGE_SIZE = 25;

const STATES = [
  ["", "All states"],
  ["STATE_ACTIVE", "Active"],
  ["STATE_PAUSED", "Paused"],
  ["STATE_STOPPING_COMPLETED", "Stopping"],
  ["STATE_STOPPING_CANCELED", "Being killed"],
  ["STATE_COMPLETED", "Completed"],
  ["STATE_CANCELED", "Canceled"],
  ["STATE_ERROR", "Error"],
];

// the list's column -> the API's sortBy (Determined's enum)
export const SORT_BY = {
  id: "SORT_BY_ID",
  name: "SORT_BY_NAME",
  state: "SORT_BY_STATE",
  progress: "SORT_BY_PROGRESS",
  user: "SORT_BY_USER",
  best: "SORT_BY_SEARCHER_METRIC_VAL",
  trials: "SORT_BY_NUM_TRIALS",
  duration: "SORT_BY_START_TIME",
  pool: "SORT_BY_RESOURCE_POOL",
};

// the best searcher metric and the live trial count, under the names the master may give them
export const bestOf = (e) => e.bestTrialSearcherMetric ?? e.bestSearcherMetric ?? e.bestMetric ?? null;
export const activeTrialsOf = (e) => e.numActiveTrials ?? e.activeTrials ?? null;

function normalizeState(s) {
  if (!s) return "";
  const up = s.toUpperCase();
  return up.startsWith("STATE_") ? up : "STATE_" + up;
}

export function listView(query) {
  const page = Math.max(1, parseInt(query.get("page") || "1", 10) || 1);
  const sort = SORT_BY[query.get("sort")] ? query.get("sort") : "id";
  const order = query.get("order") === "asc" ? "asc" : query.get("order") === "desc" ? "desc" : sort === "id" ? "desc" : "asc";
  return {
    state: normalizeState(query.get("state") || ""),
    user: query.get("user") || "",
    label: query.get("label") || "",
    name: query.get("name") || "",
    archived: query.get("archived") === "1",
    sort,
    order,
    page,
  };
}

export function listUrl(v) {
  return apiUrl("/api/v1/experiments", {
    offset: (v.page - 1) * PAGE_SIZE,
    limit: PAGE_SIZE,
    states: v.state ? [v.state] : [],
    users: v.user ? [v.user] : [],
    labels: v.label ? [v.label] : [],
    name: v.name,
    archived: v.archived ? "" : "false",
    sortBy: SORT_BY[v.sort],
    orderBy: v.order === "asc" ? "ORDER_BY_ASC" : "ORDER_BY_DESC",
  });
}

const COLUMNS = [
  { id: "id", header: "ID", sortable: true, className: "num", cell: (e) => html`<${Link} href=${`/experiments/${e.id}`}>${e.id}</${Link}>` },
  { id: "name", header: "Name", sortable: true, cell: (e) => html`<${Link} href=${`/experiments/${e.id}`}>${e.name || "(unnamed)"}</${Link}>${e.archived ? html` <span class="tag">archived</span>` : null}` },
  { id: "state", header: "State", sortable: true, cell: (e) => html`<${StateBadge} state=${e.state} />` },
  { id: "progress", header: "Progress", sortable: true, cell: (e) => html`<${ProgressBar} value=${e.progress} state=${e.state} />` },
  { id: "user", header: "User", sortable: true, value: (e) => e.username },
  { id: "best", header: "Best metric", sortable: true, className: "num", value: bestOf,
    cell: (e) => html`<span title=${e.searcherMetric}>${metric(bestOf(e))}</span>` },
  { id: "trials", header: "Trials", sortable: true, className: "num", value: (e) => e.numTrials,
    cell: (e) => trialCount(e.numTrials, activeTrialsOf(e)) },
  { id: "duration", header: "Duration", sortable: true, className: "num", cell: (e) => html`<${Duration} start=${e.startTime} end=${e.endTime} />` },
  { id: "labels", header: "Labels", cell: (e) => html`<${Labels} labels=${e.labels} />` },
  { id: "pool", header: "Pool", sortable: true, value: (e) => e.resourcePool },
  { id: "actions", header: "", cell: (e) => html`<${ExperimentActions} exp=${e} compact />` },
];

export function ExperimentsPage() {
  const query = useQuery();
  const view = listView(query);
  const list = usePoll(listUrl(view));
  const data = list.data;
  // a filter or sort change goes back to the first page; typing replaces the history entry
  const filter = (changes) => setQuery({ ...changes, page: "" }, { replace: true });

  return html`<div class="page">
    <div class="page-head">
      <h1>Experiments</h1>
    </div>
    <div class="filters">
      <select data-testid="filter-state" value=${view.state} aria-label="state"
        onChange=${(e) => setQuery({ state: e.currentTarget.value, page: "" })}>
        ${STATES.map(([v, label]) => html`<option key=${v} value=${v}>${label}</option>`)}
      </select>
      <${DebouncedInput} data-testid="filter-user" placeholder="User" aria-label="user" value=${view.user} onChange=${(v) => filter({ user: v })} />
      <${DebouncedInput} data-testid="filter-label" placeholder="Label" aria-label="label" value=${view.label} onChange=${(v) => filter({ label: v })} />
      <${DebouncedInput} data-testid="filter-name" placeholder="Name contains" aria-label="name" value=${view.name} onChange=${(v) => filter({ name: v })} />
      <label class="check"><input type="checkbox" data-testid="filter-archived" checked=${view.archived}
        onChange=${(e) => setQuery({ archived: e.currentTarget.checked ? "1" : "", page: "" })} /> Show archived</label>
    </div>
    ${list.error && !data ? html`<${ErrorBox} error=${list.error} />` : null}
    ${!data && !list.error ? html`<${Loading} />` : null}
    ${data ? html`
      <div class="table-wrap">
        <${DataTable} testid="experiments-table" columns=${COLUMNS} rows=${data.experiments}
          rowKey=${(e) => e.id} rowAttrs=${(e) => ({ "data-experiment-id": e.id, "data-state": e.state })}
          sorting=${[{ id: view.sort, desc: view.order === "desc" }]}
          onSorting=${(s) => s[0] && setQuery({ sort: s[0].id, order: s[0].desc ? "desc" : "asc", page: "" })}
          empty="No experiments match." />
      </div>
      <${Pager} page=${view.page} pageSize=${PAGE_SIZE} total=${data.pagination ? data.pagination.total : data.experiments.length}
        onPage=${(p) => setQuery({ page: p > 1 ? p : "" })} />` : null}
  </div>`;
}
