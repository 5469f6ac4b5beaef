"""free_port picks below the kernel's ephemeral range, which outgoing connections draw from, so none of
them can take the port between the pick and the listener's bind; it falls back to the OS's pick."""

from __future__ import annotations

import base64
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pedl.common import ports


def test_the_port_is_below_the_ephemeral_range_and_free() -> None:
    first, last = ports.ephemeral_range()
    assert first <= last
    for seed in range(20):
        port = ports.free_port(rng=random.Random(seed))
        assert ports.LOWEST <= port < first
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # nothing listens on it


def test_a_taken_port_is_not_picked(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        monkeypatch.setattr(ports, "LOWEST", taken)  # the only port below the range is the one held
        got = ports.free_port(rng=random.Random(1), below=taken + 1)
        assert got != taken  # every try found it taken, so the OS picked


def test_a_range_with_no_room_below_it_or_an_unreadable_one() -> None:
    port = ports.free_port(below=ports.LOWEST)  # no room below: the OS's pick
    assert port >= ports.LOWEST
    assert ports.ephemeral_range("garbage") == (32768, 60999)
    assert ports.ephemeral_range("1024 65535") == (1024, 65535)


def test_a_services_launcher_picks_its_port_with_the_copy_shipped_beside_it(tmp_path: Path) -> None:
    """In a task's context the launcher runs with whatever python3 the task has, pedl perhaps not installed
    (-S: no site-packages here): it imports the .pedl/pedl_ports.py the master ships beside it."""
    from pedl.master.lifecycle import task_kinds

    for entry in task_kinds.context_files("notebook"):
        target = tmp_path / entry["path"]
        if entry["type"] == 53:
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.write_bytes(base64.b64decode(entry["content"]))
    assert (tmp_path / ".pedl" / "pedl_ports.py").read_bytes() == Path(ports.__file__).read_bytes()
    code = (
        "import sys; sys.path.insert(0, '.pedl'); import service_launcher, pedl_ports; "
        "assert 'pedl' not in sys.modules; print(service_launcher.free_port(), pedl_ports.ephemeral_range()[0])"
    )
    out = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    port, first = (int(word) for word in out.stdout.split())
    assert ports.LOWEST <= port < first
