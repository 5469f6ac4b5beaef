// Formatting: states, durations, times, money, bytes, metric values.

export function stateName(state) {
  if (!state) return "";
  return String(state).replace(/^STATE_/, "").toLowerCase().replace(/_/g, " ");
}

// a CSS class for a state's colour
export function stateClass(state) {
  const s = String(state || "").replace(/^STATE_/, "").toUpperCase();
  if (["ACTIVE", "RUNNING", "CONNECTED", "ASSIGNED"].includes(s)) return "st-running";
  if (["COMPLETED"].includes(s)) return "st-completed";
  if (["ERROR", "STOPPING_ERROR", "GONE", "DISCONNECTED"].includes(s)) return "st-error";
  if (["CANCELED", "STOPPING_CANCELED", "DELETED", "TERMINATED", "TERMINATING"].includes(s)) return "st-canceled";
  if (["PAUSED", "QUEUED", "PENDING", "REQUESTED", "PULLING", "STARTING", "PARTIALLY_DELETED"].includes(s)) return "st-waiting";
  return "st-other";
}

export const TERMINAL = new Set(["STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR"]);
// an active experiment is reported by how far its trials got (Determined's substates of ACTIVE)
export const ACTIVE = new Set(["STATE_ACTIVE", "STATE_QUEUED", "STATE_PULLING", "STATE_STARTING", "STATE_RUNNING"]);

// seconds since the epoch, from an RFC 3339 string or a number of seconds
export function epoch(t) {
  if (t === null || t === undefined || t === "") return null;
  if (typeof t === "number") return t;
  const ms = Date.parse(t);
  return Number.isNaN(ms) ? null : ms / 1000;
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "—";
  let s = Math.max(0, Math.round(seconds));
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  if (d) return `${d}d ${h}h`;
  if (h) return `${h}h ${m}m`;
  if (m) return `${m}m ${s}s`;
  return `${s}s`;
}

// between two times (RFC 3339 or epoch seconds); the second missing: until now
export function between(start, end) {
  const a = epoch(start);
  if (a === null) return null;
  const b = epoch(end) ?? Date.now() / 1000;
  return b - a;
}

export function dateTime(t) {
  const e = epoch(t);
  if (e === null) return "—";
  const d = new Date(e * 1000);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function ago(t) {
  const e = epoch(t);
  if (e === null) return "—";
  return duration(Date.now() / 1000 - e) + " ago";
}

export function money(x) {
  const n = Number(x);
  if (!Number.isFinite(n)) return "—";
  return "$" + n.toFixed(2);
}

export function bytes(n) {
  n = Number(n);
  if (!Number.isFinite(n)) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return (i === 0 ? String(n) : n.toFixed(n < 10 ? 1 : 0)) + " " + units[i];
}

export function metric(v) {
  if (v === null || v === undefined || v === "") return "—";
  const n = Number(v);
  if (!Number.isFinite(n)) return String(v);
  if (n === 0) return "0";
  const a = Math.abs(n);
  if (a >= 1e5 || a < 1e-3) return n.toExponential(3);
  return String(Number(n.toPrecision(4)));
}

export function hparamValue(v) {
  if (v === null || v === undefined) return "—";
  if (typeof v === "number") return metric(v);
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

export function percent(p) {
  const n = Number(p);
  if (!Number.isFinite(n)) return "—";
  return Math.round(Math.min(Math.max(n, 0), 1) * 100) + "%";
}

// trial hparams flattened ("optimizer.lr": 0.1) for tables and tooltips
export function flatten(obj, prefix = "", out = {}) {
  for (const [k, v] of Object.entries(obj || {})) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v && typeof v === "object" && !Array.isArray(v)) flatten(v, key, out);
    else out[key] = v;
  }
  return out;
}

// a device's memory from MiB: whole GiB from 10 GiB up (an H100's 81,559 MiB is "80 GiB"), one
// decimal below; "" when unknown
export function memoryGiB(mib) {
  const n = Number(mib);
  if (!mib || !Number.isFinite(n) || n <= 0) return "";
  const gib = n / 1024;
  return `${gib >= 10 ? Math.round(gib) : Number(gib.toFixed(1))} GiB`;
}

// an agent slot's device (Determined's v1Device, with pedl's memoryMib): "NVIDIA A100, 80 GiB",
// "GPU" without a model, "CPU"
export function deviceLabel(device) {
  const d = device || {};
  const kind = d.type === "TYPE_CUDA" ? "GPU" : "CPU";
  const name = d.brand && d.brand !== "CPU" ? d.brand : kind;
  return [name, memoryGiB(d.memoryMib)].filter(Boolean).join(", ");
}

// an experiment's trials: the total, and how many are live only when some are ("3 (1 active)")
export function trialCount(total, active) {
  const n = total ?? 0;
  return active ? `${n} (${active} active)` : String(n);
}
