"""End-to-end fixtures: real master and agent processes on loopback ports."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from pedl.cli.model_upload import pack_model_dir
from pedl.devcluster import LocalAgent, Master, agent_connected, wait_for
from tests.support.databases import fresh_postgres_db, migrated_sqlite_template
from tests.support.shared_dirs import enterable_tmp, enterable_twin
from tests.support.tls import HttpsMaster, TlsFiles

MODELS = Path(__file__).parent / "models"
__all__ = ["enterable_tmp"]  # a fixture: a directory every user may enter
pytestmark = pytest.mark.e2e

FAST_AGENTS = {
    "agent_heartbeat_interval": "0.5s",
    "agent_heartbeat_timeout": "3s",
    "agent_reconnect_wait": "8s",
    "task_kill_grace_period": "3s",
}


def rendezvous_ports() -> str:
    """A rendezvous port range of this pytest-xdist worker's own, so concurrent distributed trials
    of different test masters on this one host do not race for the same MASTER_PORT."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    base = 29400 + 100 * (int(worker) % 6 if worker.isdigit() else 0)
    return f"{base}-{base + 99}"


class Cluster:
    """A real master and its local agents; with `tls` the master serves HTTPS and the agents trust
    its CA."""

    def __init__(self, work: Path, db: dict | None, config: dict | None = None, tls: TlsFiles | None = None) -> None:
        self.work = work
        self.tls = tls
        # the tasks run as their users' own uids and write checkpoints at host_path: it lies where they may
        # enter (tmp_path does not), and work/ckpts leads there for the tests that read checkpoint files
        self.ckpts = enterable_twin(work) / "ckpts"
        if not (work / "ckpts").is_symlink():
            work.mkdir(parents=True, exist_ok=True)
            (work / "ckpts").symlink_to(self.ckpts)
        cfg = {
            **FAST_AGENTS,
            "rendezvous_port_range": rendezvous_ports(),
            "checkpoint_storage": {"type": "shared_fs", "host_path": str(self.ckpts)},
            **(config or {}),
        }
        if db:
            cfg["db"] = db
        self.master = HttpsMaster(work, tls, cfg) if tls else Master(work, cfg)
        self.sqlite = "db" not in cfg
        self.agents: dict[str, LocalAgent] = {}

    def start(self) -> Cluster:
        if self.sqlite and not (self.master.data_dir / "pedl.db").exists():
            # a copy of a migrated database: the master's migrations would spend most of a second on fsyncs
            self.master.data_dir.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(migrated_sqlite_template(), self.master.data_dir / "pedl.db")
        self.master.start()
        return self

    def add_agent(self, agent_id: str, slots: int = 1, **kw: Any) -> LocalAgent:
        kw.setdefault("token", self.master.agent_token)
        agent = LocalAgent(self.work, self.master.url, agent_id, slots=slots, **kw)
        if self.tls:
            agent.argv += ["--cert", str(self.tls.ca)]
        agent.start()
        self.agents[agent_id] = agent
        wait_for(lambda: agent_connected(self.master, agent_id), 60, what=f"agent {agent_id} to connect")
        return agent

    def restart_master(self) -> None:
        self.master.kill()
        self.master.start()

    def create(self, config: dict | str, model_dir: Path = MODELS / "steps", activate: bool = True) -> int:
        text = config if isinstance(config, str) else yaml.safe_dump(config)
        body = {"config": text, "modelDefinition": pack_model_dir(model_dir), "activate": activate}
        return self.master.api("POST", "/api/v1/experiments", body)["experiment"]["id"]

    def trials(self, exp_id: int) -> list[dict]:
        return self.master.api("GET", f"/api/v1/experiments/{exp_id}/trials")["trials"]

    def logs(self, trial_id: int) -> str:
        text = self.master.api("GET", f"/api/v1/trials/{trial_id}/logs", follow="false")
        import json

        return "".join(json.loads(line)["result"]["message"] for line in text.splitlines() if line)

    def stop(self) -> None:
        for agent in self.agents.values():
            agent.stop()
        self.master.stop()


def steps_config(name: str = "steps", **hparams: Any) -> dict:
    return {
        "name": name,
        "entrypoint": "python3 train.py",
        "max_restarts": hparams.pop("max_restarts", 2),
        "hyperparameters": {"steps": 10, "delay": 0.05, **hparams},
        "searcher": {
            "name": "single",
            "metric": "validation_loss",
            "max_length": {"batches": hparams.get("steps", 10)},
        },
        "resources": {"slots_per_trial": 1},
    }


@pytest.fixture
def cluster(tmp_path: Path):
    c = Cluster(tmp_path, None).start()
    yield c
    c.stop()


@pytest.fixture
def make_cluster(tmp_path: Path):
    """A factory for a started Cluster with a master config (and `db:` fields) of the test's own;
    every cluster it made is stopped at teardown. A test that also takes `e2e_db` names it before
    `make_cluster`, so the clusters stop before their database is dropped."""
    made: list[Cluster] = []

    def make(config: dict | None = None, db: dict | None = None) -> Cluster:
        c = Cluster(tmp_path, db, config)
        made.append(c)
        return c.start()

    yield make
    for c in reversed(made):
        c.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def any_db_cluster(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "postgres":
        from tests.conftest import require_postgres

        require_postgres()
        with fresh_postgres_db() as db:
            c = Cluster(tmp_path, db).start()
            yield c
            c.stop()
        return
    c = Cluster(tmp_path, None).start()
    yield c
    c.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def e2e_db(request: pytest.FixtureRequest):
    """`db:` fields of a fresh PostgreSQL database, or None for SQLite: for tests that build their
    own Cluster with a special master config.

    Both databases for the tests of what a database keeps over a restart or a kill (faults, recovery,
    metric batches); one, named with `parametrize("e2e_db", [...], indirect=True)` (or any_db_cluster),
    for those about processes, containers and scheduling, whose SQL the tests of tests/master run on
    both: each such test costs 10-25 s of a 2-core CI box per database."""
    if request.param == "sqlite":
        yield None
        return
    from tests.conftest import require_postgres

    require_postgres()
    with fresh_postgres_db() as db:
        yield db
