// Small live widgets: a ticking duration, a debounced text input, a pager.
import { useEffect, useRef, useState } from "preact/hooks";
import { between, duration } from "./format.js";
import { html } from "./html.js";

export function useNow(everyMs = 1000, active = true) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (!active) return undefined;
    const t = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(t);
  }, [everyMs, active]);
  return now;
}

// start..end (RFC 3339 or epoch seconds); ticks every second while end is missing
export function Duration({ start, end }) {
  useNow(1000, !!start && !end);
  return html`<span class="num">${duration(between(start, end))}</span>`;
}

// a text input whose value reaches onChange after `delay` ms without typing; follows `value` when
// it changes from outside (back / forward)
export function DebouncedInput({ value, onChange, delay = 300, ...rest }) {
  const [text, setText] = useState(value || "");
  const timer = useRef(null);
  const last = useRef(value || "");
  useEffect(() => {
    if ((value || "") !== last.current) {
      last.current = value || "";
      setText(value || "");
    }
  }, [value]);
  useEffect(() => () => clearTimeout(timer.current), []);
  return html`<input type="search" value=${text} ...${rest}
    onInput=${(e) => {
      const v = e.currentTarget.value;
      setText(v);
      clearTimeout(timer.current);
      timer.current = setTimeout(() => {
        last.current = v;
        onChange(v);
      }, delay);
    }}
    onKeyDown=${(e) => {
      if (e.key === "Enter") {
        clearTimeout(timer.current);
        last.current = e.currentTarget.value;
        onChange(e.currentTarget.value);
      }
    }} />`;
}

// page is 1-based
export function Pager({ page, pageSize, total, onPage, testid = "pager" }) {
  const pages = Math.max(1, Math.ceil((total || 0) / pageSize));
  const first = total ? (page - 1) * pageSize + 1 : 0;
  const last = Math.min(page * pageSize, total || 0);
  return html`<div class="pager" data-testid=${testid}>
    <button class="small" data-testid="pager-prev" disabled=${page <= 1} onClick=${() => onPage(page - 1)}>‹ Prev</button>
    <span class="pager-info">${first}–${last} of ${total || 0} · page ${page} of ${pages}</span>
    <button class="small" data-testid="pager-next" disabled=${page >= pages} onClick=${() => onPage(page + 1)}>Next ›</button>
  </div>`;
}
