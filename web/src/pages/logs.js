// A trial's log: the NDJSON stream of /trials/:id/logs?follow=true, appended as lines arrive (keyed,
// so only new lines are added to the DOM), with search, follow (keep the newest line in view) and download.
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import { send } from "../api.js";
import { TERMINAL } from "../format.js";
import { html } from "../html.js";
import { toastError } from "../store.js";

export const SHOWN_MAX = 5000;

export function parseLines(buffer, onLine) {
  const parts = buffer.split("\n");
  const rest = parts.pop();
  for (const part of parts) {
    if (!part.trim()) continue;
    try {
      const obj = JSON.parse(part);
      if (obj && obj.result) onLine(obj.result);
    } catch {
      /* a broken line: skip it */
    }
  }
  return rest;
}

const text = (l) => String(l.message ?? l.log ?? "").replace(/\n$/, "");

function useLogStream(trialId, finished) {
  const [lines, setLines] = useState([]);
  const all = useRef([]);
  const lastId = useRef(-1);
  const [streaming, setStreaming] = useState(false);
  const finishedRef = useRef(finished);
  finishedRef.current = finished;

  useEffect(() => {
    let alive = true;
    let ctrl = null;
    let retry = null;
    let flushTimer = null;
    const flush = () => {
      flushTimer = null;
      if (alive) setLines(all.current.slice());
    };
    const push = (l) => {
      const id = Number(l.id);
      if (Number.isFinite(id)) {
        if (id <= lastId.current) return; // sent again after a reconnect
        lastId.current = id;
      }
      all.current.push({ id: l.id, text: text(l), level: l.level, time: l.timestamp });
      if (!flushTimer) flushTimer = setTimeout(flush, 100);
    };
    async function run() {
      ctrl = new AbortController();
      setStreaming(true);
      try {
        const resp = await send("GET", `/api/v1/trials/${trialId}/logs?follow=true`, {
          signal: ctrl.signal, headers: { Accept: "application/x-ndjson" } });
        const reader = resp.body.getReader();
        const decoder = new TextDecoder();
        let buf = "";
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          buf = parseLines(buf + decoder.decode(value, { stream: true }), push);
        }
        parseLines(buf + "\n", push);
      } catch (err) {
        if (err.name === "AbortError" || !alive) return;
        if (err.status === 404 || err.status === 401) {
          setStreaming(false);
          return;
        }
      }
      if (!alive) return;
      setStreaming(false);
      // the stream ends when the trial has ended; otherwise (the master went away) pick it up again
      if (!finishedRef.current) retry = setTimeout(run, 2000);
    }
    run();
    return () => {
      alive = false;
      clearTimeout(retry);
      clearTimeout(flushTimer);
      if (ctrl) ctrl.abort();
    };
  }, [trialId]);

  return { lines, streaming };
}

async function download(trialId) {
  try {
    const resp = await send("GET", `/api/v1/trials/${trialId}/logs`, { headers: { Accept: "application/x-ndjson" } });
    const out = [];
    parseLines((await resp.text()) + "\n", (l) => out.push(`${l.timestamp || ""} ${text(l)}`));
    const url = URL.createObjectURL(new Blob([out.join("\n") + "\n"], { type: "text/plain" }));
    const a = document.createElement("a");
    a.href = url;
    a.download = `trial-${trialId}-logs.txt`;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (err) {
    if (err.status !== 401) toastError(`Download logs: ${err.message}`);
  }
}

const timeOf = (t) => (t ? String(t).replace(/^.*T/, "").replace(/(\.\d{3})\d*/, "$1").replace("Z", "") : "");

export function TrialLogs({ trialId, state }) {
  const finished = TERMINAL.has(state);
  const { lines, streaming } = useLogStream(trialId, finished);
  const [follow, setFollow] = useState(true);
  const [search, setSearch] = useState("");
  const box = useRef(null);

  const matching = useMemo(() => {
    const q = search.trim().toLowerCase();
    return q ? lines.filter((l) => l.text.toLowerCase().includes(q)) : lines;
  }, [lines, search]);
  const shown = matching.length > SHOWN_MAX ? matching.slice(-SHOWN_MAX) : matching;

  useLayoutEffect(() => {
    if (follow && box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [shown, follow]);

  return html`<section class="card">
    <div class="card-head">
      <h2>Logs</h2>
      <span class="muted small">${lines.length} line${lines.length === 1 ? "" : "s"}${streaming && !finished ? " · live" : ""}</span>
      <span class="spacer"></span>
      <input type="search" placeholder="Search" aria-label="search logs" data-testid="log-search" value=${search}
        onInput=${(e) => setSearch(e.currentTarget.value)} />
      <label class="check"><input type="checkbox" data-testid="log-follow" checked=${follow}
        onChange=${(e) => setFollow(e.currentTarget.checked)} /> Follow</label>
      <button class="small" data-testid="log-download" onClick=${() => download(trialId)}>Download</button>
    </div>
    ${matching.length > SHOWN_MAX ? html`<div class="muted small">showing the last ${SHOWN_MAX} of ${matching.length} lines</div>` : null}
    <div class="logs" data-testid="trial-logs" ref=${box}>
      ${shown.map((l) => html`<div key=${l.id} class=${"log-line" + (l.level && /ERROR|CRITICAL/.test(l.level) ? " log-error" : "")}><span class="log-time">${timeOf(l.time) + " "}</span>${l.text}</div>`)}
      ${shown.length === 0 ? html`<div class="muted log-empty">${search ? "No line matches." : "No log lines yet."}</div>` : null}
    </div>
  </section>`;
}
