// The master's API as the page speaks it (docs/webui.md): the cookie session (same-origin
// credentials), X-CSRF-Token on state changes, 401 -> the login page, ETag / If-None-Match on GETs
// (304: reuse the cached JSON), and the "master unreachable" state on network errors, 502 and 503.
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { masterDown } from "./store.js";
import { navigate } from "./router.js";

const MUTATING = new Set(["POST", "PUT", "PATCH", "DELETE"]);
const UNREACHABLE = new Set([502, 503, 504]);
const CACHE_MAX = 300;

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

// url -> {etag, text, data}: the last answer of each GET, so a 304 reuses its JSON
const cache = new Map();

export function cookie(name) {
  for (const part of document.cookie.split(";")) {
    const [k, ...v] = part.trim().split("=");
    if (k === name) return decodeURIComponent(v.join("="));
  }
  return "";
}

export function loginPath() {
  const here = location.pathname + location.search;
  return "/login?redirect=" + encodeURIComponent(here);
}

function messageOf(status, body, text) {
  if (body && typeof body === "object") {
    const m = body.message || (body.error && (body.error.error || body.error.message)) || body.detail;
    if (typeof m === "string" && m) return m;
  }
  return text && text.length < 300 ? text : `HTTP ${status}`;
}

// fetch with the session's credentials; flips masterDown; throws ApiError for every non-2xx but 304.
export async function send(method, url, { body, headers = {}, signal, authRedirect = true } = {}) {
  const h = { Accept: "application/json", ...headers };
  if (body !== undefined) h["Content-Type"] = "application/json";
  if (MUTATING.has(method)) {
    const token = cookie("pedl_csrf");
    if (token) h["X-CSRF-Token"] = token;
  }
  let resp;
  try {
    resp = await fetch(url, {
      method,
      headers: h,
      credentials: "same-origin",
      cache: "no-store",
      signal,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    if (err && err.name === "AbortError") throw err;
    masterDown.set(true);
    throw new ApiError(0, "the master is unreachable");
  }
  if (UNREACHABLE.has(resp.status)) {
    masterDown.set(true);
    throw new ApiError(resp.status, "the master is unreachable");
  }
  masterDown.set(false);
  if (resp.status === 401 && authRedirect) {
    if (location.pathname !== "/login") navigate(loginPath(), { replace: true });
    throw new ApiError(401, "please log in");
  }
  if (!resp.ok && resp.status !== 304) {
    const text = await resp.text().catch(() => "");
    let parsed = null;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    throw new ApiError(resp.status, messageOf(resp.status, parsed, text), parsed);
  }
  return resp;
}

// A state change; answers the parsed JSON ({} when empty). Every poll refreshes at once after it.
export async function mutate(method, url, body, opts = {}) {
  const resp = await send(method, url, { ...opts, body });
  const text = await resp.text();
  refreshAll();
  return text ? JSON.parse(text) : {};
}

const inflight = new Map();

// when each parsed answer arrived: values the master computed "as of now" (idle time, cost so far)
// go on from there while 304s keep the same answer
const received = new WeakMap();
export function receivedAt(data) {
  return (data && received.get(data)) || Date.now();
}

// GET with If-None-Match: answers {data, changed}; a 304 (or the same bytes) answers the cached object.
export function getJSON(url) {
  if (inflight.has(url)) return inflight.get(url);
  const p = (async () => {
    const cached = cache.get(url);
    const headers = cached && cached.etag ? { "If-None-Match": cached.etag } : {};
    const resp = await send("GET", url, { headers });
    if (resp.status === 304 && cached) {
      touch(url, cached);
      return { data: cached.data, changed: false };
    }
    const text = await resp.text();
    if (cached && cached.text === text) {
      touch(url, { ...cached, etag: resp.headers.get("ETag") || cached.etag });
      return { data: cached.data, changed: false };
    }
    const data = text ? JSON.parse(text) : null;
    if (data && typeof data === "object") received.set(data, Date.now());
    touch(url, { etag: resp.headers.get("ETag"), text, data });
    return { data, changed: true };
  })();
  inflight.set(url, p);
  p.finally(() => inflight.delete(url)).catch(() => {});
  return p;
}

function touch(url, entry) {
  cache.delete(url);
  cache.set(url, entry);
  if (cache.size > CACHE_MAX) cache.delete(cache.keys().next().value);
}

export function cachedData(url) {
  const c = url && cache.get(url);
  return c ? c.data : undefined;
}

// every live poll, so that a mutation (or the tab coming back) refreshes them all at once
const pollers = new Set();
export function refreshAll() {
  pollers.forEach((fn) => fn());
}
document.addEventListener("visibilitychange", () => {
  if (!document.hidden) refreshAll();
});

// Poll a GET every `everyMs` with ETags; re-renders only when the data changed (or an error came or
// went). url null: nothing. Answers {data, error, loading, refresh}.
export function usePoll(url, everyMs = 1000) {
  const [state, setState] = useState(() => ({ url, data: cachedData(url), error: null }));
  const tickRef = useRef(null);
  useEffect(() => {
    if (!url) return undefined;
    let alive = true;
    let timer = null;
    let running = false;
    let again = false;
    const tick = async () => {
      clearTimeout(timer);
      if (!alive) return;
      if (running) {
        again = true; // a refresh asked for while a fetch runs: fetch again right after it
        return;
      }
      if (document.hidden) {
        timer = setTimeout(tick, everyMs);
        return;
      }
      running = true;
      try {
        const { data } = await getJSON(url);
        if (alive) setState((prev) => (prev.url === url && prev.data === data && !prev.error ? prev : { url, data, error: null }));
      } catch (err) {
        if (alive && err.name !== "AbortError") {
          setState((prev) => {
            const same = prev.url === url && prev.error && prev.error.status === err.status && prev.error.message === err.message;
            return same ? prev : { url, data: prev.url === url ? prev.data : undefined, error: err };
          });
        }
      } finally {
        running = false;
      }
      if (alive) timer = setTimeout(tick, again ? 0 : everyMs);
      again = false;
    };
    tickRef.current = tick;
    pollers.add(tick);
    tick();
    return () => {
      alive = false;
      clearTimeout(timer);
      pollers.delete(tick);
    };
  }, [url, everyMs]);
  const refresh = useCallback(() => tickRef.current && tickRef.current(), []);
  if (state.url !== url) return { data: cachedData(url), error: null, loading: !!url && cachedData(url) === undefined, refresh };
  return { data: state.data, error: state.error, loading: state.data === undefined && !state.error, refresh };
}

export const poll = usePoll;

// Build a URL with query parameters; arrays repeat the key, empty values are left out.
export function apiUrl(path, params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === "") continue;
    if (Array.isArray(v)) v.forEach((x) => q.append(k, String(x)));
    else q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}
