// Shared pieces: state badges, progress bars, toasts, the confirmation dialog, experiment actions.
import { useEffect, useRef } from "preact/hooks";
import { mutate } from "./api.js";
import { ACTIVE, percent, stateClass, stateName, TERMINAL } from "./format.js";
import { html } from "./html.js";
import { Link } from "./router.js";
import { confirm, confirmation, dismissToast, masterDown, toastError, toastInfo, toasts, useStore } from "./store.js";

export function StateBadge({ state, testid }) {
  return html`<span class=${"badge " + stateClass(state)} data-testid=${testid} data-state=${state}>${stateName(state)}</span>`;
}

export function ProgressBar({ value, state }) {
  const n = Number(value);
  const p = Number.isFinite(n) ? Math.min(Math.max(n, 0), 1) : 0;
  return html`<span class="progress" title=${percent(p)}>
    <span class=${"progress-fill " + stateClass(state)} style=${{ width: `${(p * 100).toFixed(1)}%` }}></span>
    <span class="progress-label">${Number.isFinite(n) ? percent(p) : "—"}</span>
  </span>`;
}

export function Loading() {
  return html`<div class="loading">Loading…</div>`;
}

export function ErrorBox({ error }) {
  return html`<div class="error-box">${error.message || String(error)}</div>`;
}

export function NotFound({ what }) {
  return html`<div class="not-found" data-testid="not-found">
    <h1>Not found</h1>
    <p>${what || "There is no page at this address."}</p>
    <p><a href="/experiments">Back to the experiments</a></p>
  </div>`;
}

export function MasterDownBanner() {
  const down = useStore(masterDown);
  if (!down) return null;
  return html`<div class="banner-down" data-testid="master-down" role="alert">
    The master is unreachable. Retrying…
  </div>`;
}

export function Toasts() {
  const list = useStore(toasts);
  return html`<div class="toasts" aria-live="polite">
    ${list.map((t) => html`<div key=${t.id} class=${"toast toast-" + t.kind}
      data-testid=${t.kind === "error" ? "toast-error" : "toast-info"} role=${t.kind === "error" ? "alert" : "status"}>
      <span>${t.message}</span>
      <button class="toast-close" aria-label="dismiss" onClick=${() => dismissToast(t.id)}>×</button>
    </div>`)}
  </div>`;
}

export function ConfirmDialog() {
  const c = useStore(confirmation);
  const yes = useRef(null);
  useEffect(() => {
    if (!c) return undefined;
    yes.current && yes.current.focus();
    const onKey = (e) => e.key === "Escape" && answer(false);
    addEventListener("keydown", onKey);
    return () => removeEventListener("keydown", onKey);
  }, [c]);
  if (!c) return null;
  function answer(ok) {
    confirmation.set(null);
    c.resolve(ok);
  }
  return html`<div class="modal-backdrop" onClick=${(e) => e.target === e.currentTarget && answer(false)}>
    <div class="modal" role="dialog" aria-modal="true" data-testid="confirm">
      <h2>${c.title}</h2>
      <p>${c.body}</p>
      <div class="modal-buttons">
        <button data-testid="confirm-no" onClick=${() => answer(false)}>Cancel</button>
        <button data-testid="confirm-yes" class="primary" ref=${yes} onClick=${() => answer(true)}>${c.yesLabel}</button>
      </div>
    </div>
  </div>`;
}

const ACTIONS = {
  pause: { label: "Pause", verb: "Pause", body: "Its trials checkpoint and stop; activate it to go on." },
  activate: { label: "Activate", verb: "Activate", body: "Its trials are scheduled again." },
  kill: { label: "Kill", verb: "Kill", body: "Its trials are stopped at once. This cannot be undone.", danger: true },
  archive: { label: "Archive", verb: "Archive", body: "It is hidden from the list unless you show archived experiments." },
  unarchive: { label: "Unarchive", verb: "Unarchive", body: "It shows in the list again." },
};

// which actions an experiment offers in its state (the master still has the last word)
export function actionsFor(exp) {
  const out = [];
  if (ACTIVE.has(exp.state)) out.push("pause");
  if (exp.state === "STATE_PAUSED") out.push("activate");
  if (!TERMINAL.has(exp.state) && !["STATE_STOPPING_CANCELED", "STATE_STOPPING_ERROR"].includes(exp.state)) out.push("kill");
  out.push(exp.archived ? "unarchive" : "archive");
  return out;
}

export async function runAction(exp, action) {
  const a = ACTIONS[action];
  const ok = await confirm(`${a.verb} experiment ${exp.id}?`, `${exp.name || ""} — ${a.body}`, a.verb);
  if (!ok) return;
  try {
    await mutate("POST", `/api/v1/experiments/${exp.id}/${action}`);
    toastInfo(`Experiment ${exp.id}: ${action} requested`);
  } catch (err) {
    if (err.status !== 401) toastError(`${a.verb} experiment ${exp.id}: ${err.message}`);
  }
}

export function ExperimentActions({ exp, compact }) {
  return html`<span class="actions">
    ${actionsFor(exp).map((action) => html`<button key=${action} data-action=${action}
      class=${(compact ? "small " : "") + (ACTIONS[action].danger ? "danger" : "")}
      onClick=${(e) => {
        e.stopPropagation();
        runAction(exp, action);
      }}>${ACTIONS[action].label}</button>`)}
  </span>`;
}

export function Labels({ labels }) {
  if (!labels || !labels.length) return html`<span class="muted">—</span>`;
  return html`<span class="labels">${labels.map((l) => html`<span key=${l} class="label">${l}</span>`)}</span>`;
}

export function KeyValues({ items }) {
  return html`<dl class="kv">
    ${items.filter(Boolean).map(([k, v]) => html`<div key=${k}><dt>${k}</dt><dd>${v}</dd></div>`)}
  </dl>`;
}

// [[href, label], ..., [null, label]]: where the page sits
export function Crumbs({ items }) {
  return html`<nav class="crumbs" aria-label="breadcrumbs">
    ${items.filter(Boolean).map(([href, label], i) => html`<span key=${i}>${i ? html`<span class="sep">›</span>` : null}${href
      ? html`<${Link} href=${href}>${label}</${Link}>` : label}</span>`)}
  </nav>`;
}
