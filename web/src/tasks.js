// Commands, notebooks, shells and TensorBoards as the Tasks page lists them (no DOM: tested by node).

// kind -> its API collection and how the page names it; notebooks and TensorBoards are opened in the browser
export const TASK_KINDS = [
  { kind: "command", plural: "commands", label: "Command", opens: false },
  { kind: "notebook", plural: "notebooks", label: "Notebook", opens: true },
  { kind: "shell", plural: "shells", label: "Shell", opens: false },
  { kind: "tensorboard", plural: "tensorboards", label: "TensorBoard", opens: true },
];

// {plural: answer of GET /api/v1/{plural}} -> one row per live task, newest first
export function taskRows(answers) {
  const rows = [];
  for (const k of TASK_KINDS) {
    const answer = answers[k.plural];
    for (const t of (answer && answer[k.plural]) || []) {
      // the lists also hold tasks that ended in the last day (as det shows them); this page is of live ones
      if (t.state !== "STATE_TERMINATED") rows.push({ ...t, kind: k.kind, kindLabel: k.label, opens: k.opens });
    }
  }
  const time = (t) => Date.parse(t.startTime || "") || 0;
  return rows.sort((a, b) => time(b) - time(a) || String(a.id).localeCompare(String(b.id)));
}

// where a task's service is opened: its serviceAddress (the master's proxy), once it is ready, by its
// owner only (the proxy takes the WebUI's session for the owner alone, not for an admin)
export function canOpen(task, me) {
  return !!task.opens && !!me && task.userId === me.id;
}

export function openUrl(task, me) {
  if (!canOpen(task, me) || !task.isReady) return null;
  return task.serviceAddress || `/proxy/${encodeURIComponent(task.id)}/`;
}
