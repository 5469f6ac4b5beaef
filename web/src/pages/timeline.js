// A trial's allocation timeline: its state over time (queued, running, paused, ...) from the
// experiment's event log, read incrementally (?after=last id), with the events listed under the bar.
import { useEffect, useState } from "preact/hooks";
import { getJSON } from "../api.js";
import { dateTime, duration, epoch, stateClass, stateName, TERMINAL } from "../format.js";
import { html } from "../html.js";
import { useNow } from "../widgets.js";

const PAGE = 500; // the master's page of events

function useTrialEvents(experimentId, trialId) {
  const [events, setEvents] = useState([]);
  useEffect(() => {
    let alive = true;
    let timer = null;
    let after = 0;
    let acc = [];
    const tick = async () => {
      try {
        for (;;) {
          const { data } = await getJSON(`/api/v1/experiments/${experimentId}/events?after=${after}`);
          const got = (data && data.events) || [];
          if (!alive) return;
          if (got.length) after = got[got.length - 1].id;
          const mine = got.filter((e) => e.entityType === "trial" && String(e.entityId) === String(trialId));
          if (mine.length) {
            acc = acc.concat(mine);
            setEvents(acc);
          }
          if (got.length < PAGE) break;
        }
      } catch {
        /* shown by the banner; try again */
      }
      if (alive) timer = setTimeout(tick, 2000);
    };
    tick();
    return () => {
      alive = false;
      clearTimeout(timer);
    };
  }, [experimentId, trialId]);
  return events;
}

// [{state, start, end, reason}] from the state transitions; the last one open unless terminal
// (the state before the first transition starts when the trial did)
export function segments(events, nowSec, startSec = null) {
  const out = [];
  const first = events.find((e) => e.toState);
  if (first && first.fromState && startSec !== null && startSec < epoch(first.time)) {
    out.push({ state: first.fromState, start: startSec, end: null, reason: "" });
  }
  for (const e of events) {
    if (!e.toState) continue;
    const t = epoch(e.time);
    if (out.length) out[out.length - 1].end = t;
    out.push({ state: e.toState, start: t, end: null, reason: e.message });
  }
  const last = out[out.length - 1];
  if (last && last.end === null) last.end = TERMINAL.has(last.state) ? last.start : nowSec;
  return out.filter((s) => s.end > s.start || !TERMINAL.has(s.state));
}

export function Timeline({ trial }) {
  const events = useTrialEvents(trial.experimentId, trial.id);
  const now = useNow(1000, !TERMINAL.has(trial.state)) / 1000;
  const segs = segments(events, now, epoch(trial.startTime));
  const t0 = segs.length ? segs[0].start : epoch(trial.startTime);
  const t1 = segs.length ? Math.max(...segs.map((s) => s.end)) : now;
  const span = Math.max(t1 - t0, 1e-6);
  return html`<section class="card" data-testid="allocations">
    <div class="card-head"><h2>Allocation timeline</h2>
      <span class="muted small">${segs.length ? `${dateTime(t0)} – ${TERMINAL.has(trial.state) ? dateTime(t1) : "now"} (${duration(t1 - t0)})` : ""}</span></div>
    ${segs.length === 0 ? html`<div class="muted">No allocation yet.</div>` : html`
      <div class="timeline">
        ${segs.map((s, i) => html`<span key=${i} class=${"tl-seg " + stateClass(s.state)} data-state=${s.state}
          style=${{ left: `${((s.start - t0) / span) * 100}%`, width: `${Math.max(((s.end - s.start) / span) * 100, 0.4)}%` }}
          title=${`${stateName(s.state)} · ${dateTime(s.start)} · ${duration(s.end - s.start)}${s.reason ? " · " + s.reason : ""}`}></span>`)}
      </div>
      <div class="tl-legend">
        ${[...new Set(segs.map((s) => s.state))].map((st) => html`<span key=${st}><i class=${"tl-dot " + stateClass(st)}></i>${stateName(st)}</span>`)}
      </div>`}
    ${events.length ? html`<table class="table events">
      <thead><tr><th>Time</th><th>State</th><th>Why</th></tr></thead>
      <tbody>${events.slice().reverse().slice(0, 50).map((e) => html`<tr key=${e.id} class=${e.level === "error" ? "row-error" : ""}>
        <td class="nowrap">${dateTime(e.time)}</td>
        <td class="nowrap">${e.toState ? html`${e.fromState ? stateName(e.fromState) : "new"} → ${stateName(e.toState)}` : "—"}</td>
        <td class="event-msg" title=${e.message}>${e.message}</td></tr>`)}</tbody>
    </table>` : null}
  </section>`;
}
