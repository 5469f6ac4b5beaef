"""Run a node's worker processes together: they start together, their output is prefixed with
their rank, and when one fails the others are stopped, so a trial never hangs on a dead peer."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import BinaryIO

POLL_S = 0.05
PR_SET_PDEATHSIG = 1


def exit_status(returncode: int) -> int:
    """A shell-style exit status: a worker killed by signal N gives 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


class Workers:
    """One process per environment in `envs` (each with its RANK), all running `argv`, supervised
    until they end."""

    def __init__(
        self,
        argv: Sequence[str],
        envs: Sequence[Mapping[str, str]],
        *,
        grace_period: float,
        prefix: bool = True,
        out: BinaryIO | None = None,
        err: BinaryIO | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self._argv = list(argv)
        self._envs = [dict(env) for env in envs]
        self._ranks = [int(env["RANK"]) for env in self._envs]
        self._grace = grace_period
        self._prefix = prefix
        self._out = out or sys.stdout.buffer
        self._err = err or sys.stderr.buffer
        self._say = say or (lambda msg: print(f"pedl launch: {msg}", file=sys.stderr, flush=True))
        self._write_lock = threading.Lock()
        self._procs: list[subprocess.Popen[bytes]] = []
        self._pumps: list[threading.Thread] = []
        self._stop_signal: int | None = None  # a signal the launcher received, to pass on
        self._kill_at: float | None = None

    def run(self) -> int:
        """Start every worker and wait for all of them; the first failure's exit status, else 0."""
        try:
            self._start()
        except OSError as exc:
            self._say(f"cannot run {self._argv[0]!r}: {exc.strerror or exc}")
            self._stop_all(signal.SIGKILL)
            self._reap()
            return 127
        status = self._supervise()
        self._reap()
        return status

    def stop(self, sig: int) -> None:
        """Pass `sig` (SIGTERM, SIGINT) on to every worker; SIGKILL follows after the grace period."""
        self._stop_signal = sig
        if self._kill_at is None:
            self._kill_at = time.monotonic() + self._grace
        self._stop_all(sig)

    def _start(self) -> None:
        preexec = _die_with_parent()
        for env in self._envs:
            self._procs.append(
                subprocess.Popen(
                    self._argv,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    preexec_fn=preexec,
                )
            )
        for rank, proc in zip(self._ranks, self._procs, strict=True):
            tag = f"[rank={rank}] ".encode() if self._prefix else b""
            for pipe, sink in ((proc.stdout, self._out), (proc.stderr, self._err)):
                pump = threading.Thread(target=self._pump, args=(pipe, sink, tag), daemon=True)
                pump.start()
                self._pumps.append(pump)

    def _supervise(self) -> int:
        while True:
            codes = [p.poll() for p in self._procs]
            failed = next(((r, c) for r, c in zip(self._ranks, codes, strict=True) if c not in (None, 0)), None)
            if failed is not None:
                rank, code = failed
                running = sum(c is None for c in codes)
                if self._stop_signal is None:
                    detail = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
                    self._say(f"rank {rank} {detail}" + (f"; stopping the other {running} rank(s)" if running else ""))
                    self.stop(signal.SIGTERM)
                self._wait_rest()
                return exit_status(code)
            if all(c == 0 for c in codes):
                return 0
            if self._kill_at is not None and time.monotonic() >= self._kill_at:
                self._stop_all(signal.SIGKILL)
            time.sleep(POLL_S)

    def _wait_rest(self) -> None:
        while any(p.poll() is None for p in self._procs):
            if self._kill_at is not None and time.monotonic() >= self._kill_at:
                self._stop_all(signal.SIGKILL)
            time.sleep(POLL_S)

    def _stop_all(self, sig: int) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(sig)

    def _reap(self) -> None:
        for proc in self._procs:
            proc.wait()
        for pump in self._pumps:
            pump.join(timeout=5)

    def _pump(self, pipe: BinaryIO, sink: BinaryIO, tag: bytes) -> None:
        for line in iter(pipe.readline, b""):
            if not line.endswith(b"\n"):
                line += b"\n"
            with self._write_lock:
                sink.write(tag + line)
                sink.flush()
        pipe.close()


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn asking Linux to SIGKILL the worker if the launcher dies (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the launcher died before prctl took effect
            os._exit(1)

    return preexec
