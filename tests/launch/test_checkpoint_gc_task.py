"""The checkpoint GC task's script (pedl/launch/checkpoint_gc_task.py) run as a real process, as an agent
runs it: from a copy of the task's context (its .pedl/ beside a spec), against a temp dir, reporting to a
small HTTP server that stands in for the master."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import BytesIO
from pathlib import Path

import pytest

from pedl.master.checkpoints import gc_tasks as checkpoint_gc_tasks
from pedl.master.lifecycle import checkpoint_gc_task_rows

UUIDS = [f"00000000-0000-4000-8000-00000000000{i}" for i in range(4)]


class Master:
    def __init__(self) -> None:
        self.reports: list[tuple[str, str, dict]] = []  # (path, authorization, body)
        master = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                master.reports.append((self.path, self.headers["Authorization"], body))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def master() -> Iterator[Master]:
    m = Master()
    yield m
    m.server.shutdown()
    m.server.server_close()


def run_task(workdir: Path, items: list[checkpoint_gc_tasks.Item], master: Master) -> subprocess.CompletedProcess:
    """Unpack the context the master builds for these items and run its entrypoint there, with no pedl
    on the path (the task has only the standard library and the files beside the script)."""
    spec = {
        "checkpoints": [{"uuid": i.uuid, "dir": i.dir, "delete": i.delete, "entries": list(i.entries)} for i in items]
    }
    with tarfile.open(fileobj=BytesIO(checkpoint_gc_tasks._context(spec)), mode="r:gz") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(workdir, filter="data")
        else:  # Python before 3.11.4 (Debian 12's 3.11.2): the master built this archive
            tar.extractall(workdir)
    env = {
        "PATH": os.environ["PATH"],
        "DET_MASTER": master.url,
        "DET_ALLOCATION_ID": "task-1.1",
        "DET_SESSION_TOKEN": "tok",
    }
    argv = [sys.executable if a == "python3" else a for a in checkpoint_gc_task_rows.entrypoint()]
    return subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=60, check=False)


def checkpoint(base: Path, uuid: str, files: dict[str, bytes]) -> Path:
    root = base / uuid
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def test_it_deletes_what_it_is_given_never_following_links_and_reports_what_is_left(
    tmp_path: Path, master: Master
) -> None:
    base, outside = tmp_path / "ckpts", tmp_path / "outside"
    (outside / "d").mkdir(parents=True)
    (outside / "keep.txt").write_text("precious")
    whole = checkpoint(base, UUIDS[0], {"model.pt": b"m" * 10, "sub/x": b"x"})
    (whole / "link").symlink_to(outside)  # a link inside: unlinked, its target kept
    part = checkpoint(base, UUIDS[1], {"model.pt": b"m" * 10, "state": b"s" * 5, "logs/a": b"a", "logs/b": b"b"})
    (part / "dirlink").symlink_to(outside / "d", target_is_directory=True)
    gone = base / UUIDS[2]  # already gone: fine, nothing left
    items = [
        checkpoint_gc_tasks.Item(UUIDS[0], str(whole)),
        checkpoint_gc_tasks.Item(UUIDS[1], str(part), delete=False, entries=("state", "logs/", "missing")),
        checkpoint_gc_tasks.Item(UUIDS[2], str(gone)),
    ]
    done = run_task(tmp_path / "work", items, master)
    assert done.returncode == 0, done.stderr
    assert not whole.exists() and (outside / "keep.txt").read_text() == "precious" and (outside / "d").is_dir()
    assert sorted(p.name for p in part.iterdir()) == ["dirlink", "model.pt"]
    [(path, auth, body)] = master.reports
    assert (path, auth) == ("/api/v1/allocations/task-1.1/checkpoint_gc", "Bearer tok")
    # the listing leaves the link out, as the master's own listing does (pedl/common/checkpoint_files.py)
    assert body == {
        "checkpoints": [
            {"uuid": UUIDS[0], "resources": {}},
            {"uuid": UUIDS[1], "resources": {"model.pt": 10}},
            {"uuid": UUIDS[2], "resources": {}},
        ]
    }
    assert f"checkpoint {UUIDS[1]}: 3 entries removed; 1 entries (10 bytes) left" in done.stdout


def test_no_entries_lists_again_and_a_checkpoint_left_empty_goes(tmp_path: Path, master: Master) -> None:
    kept = checkpoint(tmp_path, UUIDS[0], {"a": b"aa", "b/c": b"c"})
    emptied = checkpoint(tmp_path, UUIDS[1], {"only": b"o"})
    done = run_task(
        tmp_path / "work",
        [
            checkpoint_gc_tasks.Item(UUIDS[0], str(kept), delete=False),
            checkpoint_gc_tasks.Item(UUIDS[1], str(emptied), delete=False, entries=("only",)),
        ],
        master,
    )
    assert done.returncode == 0, done.stderr
    assert master.reports[0][2]["checkpoints"] == [
        {"uuid": UUIDS[0], "resources": {"a": 2, "b/": 0, "b/c": 1}},
        {"uuid": UUIDS[1], "resources": {}},
    ]
    assert kept.is_dir() and not emptied.exists()


def test_a_symlink_for_a_checkpoint_or_above_an_entry_fails_and_is_not_reported(tmp_path: Path, master: Master) -> None:
    real = checkpoint(tmp_path / "elsewhere", UUIDS[0], {"f": b"f"})
    (tmp_path / "ckpts").mkdir()
    swapped = tmp_path / "ckpts" / UUIDS[0]
    swapped.symlink_to(real, target_is_directory=True)  # swapped in after the master checked it
    fine = checkpoint(tmp_path / "ckpts", UUIDS[1], {"f": b"f"})
    through = checkpoint(tmp_path / "ckpts", UUIDS[2], {"g": b"g"})
    (through / "dirlink").symlink_to(real, target_is_directory=True)
    done = run_task(
        tmp_path / "work",
        [
            checkpoint_gc_tasks.Item(UUIDS[0], str(swapped)),
            checkpoint_gc_tasks.Item(UUIDS[1], str(fine)),
            checkpoint_gc_tasks.Item(UUIDS[2], str(through), delete=False, entries=("dirlink/f",)),
        ],
        master,
    )
    assert done.returncode == 1
    assert (real / "f").exists() and swapped.is_symlink() and not fine.exists() and (through / "g").exists()
    assert master.reports[0][2] == {"checkpoints": [{"uuid": UUIDS[1], "resources": {}}]}
    assert f"checkpoint {UUIDS[0]}: FAILED" in done.stdout and f"checkpoint {UUIDS[2]}: FAILED" in done.stdout
