// A small history-API router: the current location as a store, navigate(), <Link>, and route matching.
import { html } from "./html.js";
import { createStore, useStore } from "./store.js";

const read = () => ({ path: location.pathname, search: location.search });
export const currentLocation = createStore(read());

addEventListener("popstate", () => currentLocation.set(read()));

export function navigate(to, { replace = false } = {}) {
  const now = location.pathname + location.search;
  if (to === now) return;
  if (replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  currentLocation.set(read());
  if (!replace) scrollTo(0, 0);
}

export function useLocation() {
  return useStore(currentLocation);
}

export function useQuery() {
  const loc = useLocation();
  return new URLSearchParams(loc.search);
}

// Replace some query parameters (empty values are dropped) and go there.
export function setQuery(changes, { replace = false } = {}) {
  const q = new URLSearchParams(location.search);
  for (const [k, v] of Object.entries(changes)) {
    if (v === undefined || v === null || v === "") q.delete(k);
    else q.set(k, String(v));
  }
  const s = q.toString();
  navigate(location.pathname + (s ? "?" + s : ""), { replace });
}

// routes: [[pattern, Component]]; a pattern like "/trials/:id". Returns [Component, params] or null.
export function match(routes, path) {
  for (const [pattern, component] of routes) {
    const keys = [];
    const re = new RegExp(
      "^" + pattern.replace(/\/:([a-zA-Z]+)/g, (_, k) => (keys.push(k), "/([^/]+)")) + "/?$",
    );
    const m = re.exec(path);
    if (m) {
      const params = {};
      keys.forEach((k, i) => (params[k] = decodeURIComponent(m[i + 1])));
      return [component, params];
    }
  }
  return null;
}

function follow(e) {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const href = e.currentTarget.getAttribute("href");
  if (!href || !href.startsWith("/") || href.startsWith("//")) return;
  e.preventDefault();
  navigate(href);
}

// an <a> that the router follows without a page load (modified clicks open a tab as usual)
export function Link({ href, children, onClick, ...rest }) {
  const click = (e) => {
    if (onClick) onClick(e);
    follow(e);
  };
  return html`<a href=${href} ...${rest} onClick=${click}>${children}</a>`;
}
