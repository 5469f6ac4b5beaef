"""Gives TensorBoard the trials a TensorBoard task shows, then runs it: each trial's event files in
checkpoint storage where Determined's Core API wrote some, else event files written here from the
metrics the master stored (its training and validation reports, paged), kept up to date while the
trial runs.

The standard library only, like service_launcher.py beside it (.pedl/ in the task's context):

    python3 .pedl/tensorboard_runs.py --plan .pedl/tensorboard.json -- python3 -m tensorboard.main ...

The plan (written by the master at launch) is {"experiments": [{"id", "storage_root", "trials"}]};
each trial is the directory experiment/<id>/trial/<id> of the --logdir given to TensorBoard (a link
to its files in storage, or .../training and .../validation written here). Tags are those of
Determined's metric writer: "Determined/<name>" for training, "Determined/val_<name>" for validation.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from typing import Any, BinaryIO

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from service_launcher import _ssl_context  # shipped beside this file

GROUPS = ("training", "validation")
OUT_DIR = "tensorboard"  # under the task's directory
REFRESH_SECONDS = float(os.environ.get("PEDL_TENSORBOARD_REFRESH_SECONDS") or 30.0)  # running trials, this often
TERMINAL = {"STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR", "STATE_DELETED"}


# --- TensorBoard event files (TFRecord framing, the Event and Summary protobufs hand-encoded) ---


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int64 as protobuf writes it
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


_SCALAR_METADATA = _field(1, _field(1, b"scalars")) + _varint(4 << 3) + _varint(1)  # plugin scalars, DATA_CLASS_SCALAR


def scalar_value(tag: str, value: float) -> bytes:
    """A Summary.Value holding a float64 scalar tensor (exact, where simple_value is a float32)."""
    tensor = _varint(1 << 3) + _varint(2) + _field(2, b"") + _field(6, struct.pack("<d", value))  # DT_DOUBLE
    return _field(1, tag.encode()) + _field(9, _SCALAR_METADATA) + _field(8, tensor)


def event(
    wall_time: float, step: int, *, summary_values: list[bytes] | None = None, file_version: str | None = None
) -> bytes:
    out = _varint(1 << 3 | 1) + struct.pack("<d", wall_time) + _varint(2 << 3) + _varint(step)
    if file_version is not None:
        out += _field(3, file_version.encode())
    if summary_values:
        out += _field(5, b"".join(_field(1, v) for v in summary_values))
    return out


def record(data: bytes) -> bytes:
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc(header)) + data + struct.pack("<I", masked_crc(data))


class EventFile:
    """One events.out.tfevents.* file, appended to and flushed report by report."""

    def __init__(self, directory: str, now: float) -> None:
        os.makedirs(directory, exist_ok=True)
        name = f"events.out.tfevents.{int(now)}.{socket.gethostname()}.pedl"
        self._f: BinaryIO = open(os.path.join(directory, name), "ab")  # noqa: SIM115 - open while the task runs
        self._f.write(record(event(now, 0, file_version="brain.Event:2")))

    def write(self, wall_time: float, step: int, values: dict[str, float]) -> None:
        self._f.write(record(event(wall_time, step, summary_values=[scalar_value(k, v) for k, v in values.items()])))

    def flush(self) -> None:
        self._f.flush()


def tags(group: str, metrics: dict[str, Any]) -> dict[str, float]:
    """A report's numbers under the tags Determined's metric writer gives them."""
    out = {}
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if group == "validation" and not name.startswith("val"):
            name = "val_" + name
        out["Determined/" + name] = float(value)
    return out


# --- the master ---


class Master:
    def __init__(self, url: str, token: str) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"}
        self._context = _ssl_context() if self.url.startswith("https") else None

    def _open(self, path: str, params: list[tuple[str, Any]] | None = None) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        req = urllib.request.Request(self.url + path + query, headers=self._headers)
        return urllib.request.urlopen(req, timeout=60, context=self._context)  # the master's URL

    def trial_state(self, trial_id: int) -> str:
        with self._open(f"/api/v1/trials/{trial_id}") as resp:
            return json.load(resp)["trial"]["state"]

    def reports(self, trial_id: int, group: str, start_batches: int = 0) -> Iterator[dict[str, Any]]:
        """The trial's reports of the group in step order (from `start_batches` steps on), one page of the
        master's at a time."""
        params = [("trialIds", trial_id), ("group", group), ("startBatches", start_batches)]
        with self._open("/api/v1/trials/metrics/trial_metrics", params) as resp:
            for line in resp:
                if line.strip():
                    yield from json.loads(line)["result"]["metrics"]


def _seconds(stamp: str | None, default: float) -> float:
    if not stamp:
        return default
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return default


class TrialWriter:
    """The event files of one trial written from its stored metrics: one file per group, each report
    written once (the cursor is the last report's steps and id)."""

    def __init__(self, master: Master, trial_id: int, directory: str) -> None:
        self.master = master
        self.trial_id = trial_id
        self.directory = directory
        self._files: dict[str, EventFile] = {}
        self._after: dict[str, tuple[int, int]] = {}

    def catch_up(self) -> int:
        written = 0
        for group in GROUPS:
            after = self._after.get(group, (-1, -1))
            for rep in self.master.reports(self.trial_id, group, max(after[0], 0)):
                key = (int(rep.get("totalBatches") or 0), int(rep.get("id") or 0))
                if key <= after:
                    continue
                after = key
                values = rep.get("metrics") or {}
                values = values.get("validation_metrics" if group == "validation" else "avg_metrics") or {}
                scalars = tags(group, values)
                if not scalars:
                    continue
                if group not in self._files:
                    self._files[group] = EventFile(os.path.join(self.directory, group), time.time())
                self._files[group].write(_seconds(rep.get("endTime"), time.time()), key[0], scalars)
                written += 1
            self._after[group] = after
            if group in self._files:
                self._files[group].flush()
        return written


def has_files(directory: str) -> bool:
    return any(files for _root, _dirs, files in os.walk(directory))


def runs(plan: dict[str, Any], cluster_id: str, master: Master, out_dir: str) -> list[TrialWriter]:
    """Lays out the TensorBoard log directory, one run directory per trial, experiment/<id>/trial/<id>:
    a link to the trial's event files in checkpoint storage, or the files written here from its stored
    metrics; returns the writers of the latter."""
    writers: list[TrialWriter] = []
    for exp in plan.get("experiments", []):
        exp_id = int(exp["id"])
        for trial_id in (int(t) for t in exp.get("trials", [])):
            name = f"experiment/{exp_id}/trial/{trial_id}"
            path = os.path.join(out_dir, name)
            stored = None
            if exp.get("storage_root") and cluster_id:
                stored = os.path.join(
                    exp["storage_root"], cluster_id, "tensorboard", "experiment", str(exp_id), "trial", str(trial_id)
                )
            if stored is not None and os.path.isdir(stored) and has_files(stored):
                print(f"pedl: {name}: the event files in {stored}", flush=True)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                if not os.path.islink(path):
                    os.symlink(stored, path)  # TensorBoard follows it as it walks the log directory
                continue
            os.makedirs(path, exist_ok=True)
            writer = TrialWriter(master, trial_id, path)
            try:
                count = writer.catch_up()
                print(f"pedl: {name}: {count} reports written as event files from the stored metrics", flush=True)
            except (OSError, ValueError, KeyError) as exc:  # the refresh tries again
                print(f"pedl: {name}: cannot read the stored metrics yet ({exc})", file=sys.stderr, flush=True)
            writers.append(writer)
    return writers


def refresh(master: Master, writers: list[TrialWriter], stop: threading.Event) -> None:
    """Keeps writing the reports of trials still running; a trial that has ended is written one last time."""
    live = list(writers)
    while live and not stop.wait(REFRESH_SECONDS):
        for writer in list(live):
            try:
                ended = master.trial_state(writer.trial_id) in TERMINAL
                writer.catch_up()
            except urllib.error.HTTPError as exc:
                ended = exc.code == 404  # deleted with its experiment: nothing more will come
                print(f"pedl: cannot refresh trial {writer.trial_id} ({exc})", file=sys.stderr, flush=True)
            except (OSError, ValueError, KeyError) as exc:  # the master away, or a garbled answer: next time
                print(f"pedl: cannot refresh trial {writer.trial_id} ({exc}); retrying", file=sys.stderr, flush=True)
                continue
            if ended:
                live.remove(writer)


def main(argv: list[str]) -> int:
    if argv[:1] != ["--plan"] or "--" not in argv:
        print("usage: tensorboard_runs.py --plan PLAN.json -- TENSORBOARD ARGV...", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        plan = json.load(f)
    command = argv[argv.index("--") + 1 :]
    master = Master(os.environ["DET_MASTER"], os.environ["DET_SESSION_TOKEN"])
    out_dir = os.path.abspath(OUT_DIR)
    os.makedirs(out_dir, exist_ok=True)
    writers = runs(plan, os.environ.get("DET_CLUSTER_ID", ""), master, out_dir)
    proc = subprocess.Popen([*command, "--logdir", out_dir])  # the master's argv
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: proc.send_signal(signum))
    stop = threading.Event()
    threading.Thread(target=refresh, args=(master, writers, stop), daemon=True).start()
    code = proc.wait()
    stop.set()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
