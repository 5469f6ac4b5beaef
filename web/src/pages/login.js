// /login?redirect=PATH: POST /api/v1/auth/session sets the session cookies, then go to PATH.
import { useState } from "preact/hooks";
import { send } from "../api.js";
import { html } from "../html.js";
import { navigate, useQuery } from "../router.js";

// only a path on this site: never another origin ("//host", "https://...")
export function safeRedirect(target) {
  if (!target || !target.startsWith("/") || target.startsWith("//") || target.startsWith("/\\")) return "/experiments";
  if (target === "/login" || target.startsWith("/login?")) return "/experiments";
  return target;
}

export function LoginPage() {
  const query = useQuery();
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);

  async function submit(e) {
    e.preventDefault();
    if (!username) {
      setError("Enter a username.");
      return;
    }
    setBusy(true);
    setError("");
    try {
      await send("POST", "/api/v1/auth/session", { body: { username, password }, authRedirect: false });
      navigate(safeRedirect(query.get("redirect")), { replace: true });
    } catch (err) {
      if (err.status === 401 || err.status === 403) setError(err.message || "Wrong username or password.");
      else if (err.status === 0 || err.status >= 502) setError("The master is unreachable.");
      else setError(err.message);
    } finally {
      setBusy(false);
    }
  }

  return html`<div class="login-wrap">
    <form class="login" onSubmit=${submit}>
      <h1>pedl</h1>
      <label>Username
        <input name="username" autocomplete="username" autofocus value=${username}
          onInput=${(e) => setUsername(e.currentTarget.value)} />
      </label>
      <label>Password
        <input name="password" type="password" autocomplete="current-password" value=${password}
          onInput=${(e) => setPassword(e.currentTarget.value)} />
      </label>
      ${error ? html`<div class="login-error" data-testid="login-error" role="alert">${error}</div>` : null}
      <button type="submit" class="primary" disabled=${busy}>${busy ? "Logging in…" : "Log in"}</button>
    </form>
  </div>`;
}
