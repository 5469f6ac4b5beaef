// The app: layout (nav, who am I, banner, toasts, dialog) and the routes of docs/webui.md.
import "uplot/dist/uPlot.min.css";
import "./style.css";
import { render } from "preact";
import { useEffect } from "preact/hooks";
import { mutate, usePoll } from "./api.js";
import { ConfirmDialog, MasterDownBanner, NotFound, Toasts } from "./components.js";
import { html } from "./html.js";
import { CheckpointPage } from "./pages/checkpoint.js";
import { ClusterPage } from "./pages/cluster.js";
import { ExperimentPage } from "./pages/experiment.js";
import { ExperimentsPage } from "./pages/experiments.js";
import { JobsPage } from "./pages/jobs.js";
import { LoginPage } from "./pages/login.js";
import { TasksPage } from "./pages/tasks.js";
import { TrialPage } from "./pages/trial.js";
import { Link, match, navigate, useLocation } from "./router.js";
import { toastError } from "./store.js";

const ROUTES = [
  ["/experiments", ExperimentsPage],
  ["/experiments/:id", ExperimentPage],
  ["/trials/:id", TrialPage],
  ["/checkpoints/:uuid", CheckpointPage],
  ["/cluster", ClusterPage],
  ["/jobs", JobsPage],
  ["/task-list", TasksPage],
];

const TITLES = { "/experiments": "Experiments", "/cluster": "Cluster", "/jobs": "Job queue", "/task-list": "Tasks" };

function Redirect({ to }) {
  useEffect(() => navigate(to, { replace: true }), [to]);
  return null;
}

async function logout() {
  try {
    await mutate("DELETE", "/api/v1/auth/session", undefined, { authRedirect: false });
  } catch (err) {
    if (err.status && err.status !== 401) {
      toastError(`Log out: ${err.message}`);
      return;
    }
  }
  navigate("/login", { replace: true });
}

function Nav({ path }) {
  const me = usePoll("/api/v1/me", 10000);
  const user = me.data && me.data.user;
  const item = (href, label) => {
    const active = path === href || path.startsWith(href + "/") || (href === "/experiments" && path.startsWith("/trials/"));
    return html`<${Link} href=${href} class=${active ? "active" : ""}>${label}</${Link}>`;
  };
  return html`<header class="topbar">
    <${Link} href="/experiments" class="brand">pedl</${Link}>
    <nav data-testid="nav">
      ${item("/experiments", "Experiments")}
      ${item("/cluster", "Cluster")}
      ${item("/jobs", "Job queue")}
      ${item("/task-list", "Tasks")}
    </nav>
    <span class="spacer"></span>
    <span class="whoami" data-testid="whoami">${user ? user.username : ""}</span>
    <button class="link-button" data-testid="logout" onClick=${logout}>Log out</button>
  </header>`;
}

function App() {
  const loc = useLocation();
  const path = loc.path;
  useEffect(() => {
    const m = /^\/(experiments|trials|checkpoints)\/([^/]+)$/.exec(path);
    const what = { experiments: "Experiment", trials: "Trial", checkpoints: "Checkpoint" };
    const title = TITLES[path] || (m ? `${what[m[1]]} ${decodeURIComponent(m[2]).slice(0, 8)}` : path === "/login" ? "Log in" : "");
    document.title = title ? `${title} · pedl` : "pedl";
  }, [path]);

  if (path === "/login") {
    return html`<${MasterDownBanner} /><${LoginPage} /><${Toasts} />`;
  }
  let page;
  if (path === "/" || path === "") page = html`<${Redirect} to="/experiments" />`;
  else {
    const found = match(ROUTES, path);
    if (found) {
      const [Page, params] = found;
      page = html`<${Page} key=${path} ...${params} />`;
    } else page = html`<${NotFound} />`;
  }
  return html`
    <${Nav} path=${path} />
    <${MasterDownBanner} />
    <main class="content">${page}</main>
    <${Toasts} />
    <${ConfirmDialog} />`;
}

render(html`<${App} />`, document.getElementById("app"));
