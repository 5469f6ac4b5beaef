"""master.yaml: loading from a file, errors that name the file, line and field path, defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from pedl.config.loading import ConfigError
from pedl.config.master_config import (
    DatabaseConfig,
    MasterConfig,
    load_master_config,
)


def write(tmp_path: Path, text: str, name: str = "master.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def fields_of(exc: ConfigError) -> list[str]:
    return [p["field"] for p in exc.fields]


def test_no_file_gives_defaults() -> None:
    cfg = load_master_config(None)
    assert cfg.port == 8080
    assert [p.pool_name for p in cfg.resource_pools] == ["default"]
    assert cfg.db is None


def test_empty_file_gives_defaults(tmp_path: Path) -> None:
    cfg = load_master_config(write(tmp_path, ""))
    assert [p.pool_name for p in cfg.resource_pools] == ["default"]
    assert cfg.default_compute_resource_pool == "default"
    assert cfg.default_aux_resource_pool == "default"
    pool = cfg.resource_pools[0]
    assert pool.scheduler.type == "priority"
    assert pool.scheduler.fitting_policy == "best"
    assert pool.scheduler.default_priority == 42


def test_full_file_loads(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
port: 9000
data_dir: /var/lib/pedl
cluster_name: lab
agent_heartbeat_timeout: 1m
session_ttl: 12h
resource_pools:
  - pool_name: gpu
    description: the big ones
    max_slots_per_trial: 8
    scheduler:
      fitting_policy: worst
      default_priority: 10
  - pool_name: cpu
default_compute_resource_pool: gpu
default_aux_resource_pool: cpu
checkpoint_storage:
  type: shared_fs
  host_path: /mnt/ckpt
  storage_path: pedl
""",
    )
    cfg = load_master_config(path)
    assert cfg.port == 9000
    assert cfg.data_dir == Path("/var/lib/pedl")
    assert cfg.agent_heartbeat_timeout == 60.0
    assert cfg.session_ttl == 12 * 3600.0
    assert [p.pool_name for p in cfg.resource_pools] == ["gpu", "cpu"]
    gpu = cfg.pool("gpu")
    assert gpu is not None and gpu.scheduler.fitting_policy == "worst" and gpu.max_slots_per_trial == 8
    assert cfg.pool("nope") is None
    assert cfg.effective_checkpoint_storage().host_path == "/mnt/ckpt"


def test_data_dir_expands_home(tmp_path: Path) -> None:
    cfg = load_master_config(write(tmp_path, "data_dir: ~/pedl-data\n"))
    assert "~" not in str(cfg.data_dir)
    assert cfg.data_dir == Path.home() / "pedl-data"


def test_default_checkpoint_storage_is_under_data_dir(tmp_path: Path) -> None:
    cfg = MasterConfig(data_dir=tmp_path)
    storage = cfg.effective_checkpoint_storage()
    assert storage.type == "shared_fs"
    assert storage.host_path == str(tmp_path / "checkpoints")


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError, match="absent.yaml"):
        load_master_config(path)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("port: 8080\nresource_pools: [\n", 3),
        ("port: 8080\ncluster_name: x\n  bad: : y\n", 3),
        ("port: 8080\ncluster_name: 'unterminated\n", 3),
        ("\tport: 1\n", 1),
    ],
)
def test_malformed_yaml_names_file_and_line(tmp_path: Path, text: str, line: int) -> None:
    path = write(tmp_path, text, "broken-master.yaml")
    with pytest.raises(ConfigError) as info:
        load_master_config(path)
    message = str(info.value)
    assert "malformed YAML" in message
    assert str(path) in message
    assert f"line {line}" in message


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("bogus: 1\n", "bogus"),
        ("resource_pools:\n  - pool_name: a\n    scheduler:\n      bogus: 1\n", "resource_pools[0].scheduler.bogus"),
        ("resource_pools:\n  - pool_name: a\n  - pool_name: b\n    colour: red\n", "resource_pools[1].colour"),
        ("db:\n  host: x\n  passwd: y\n", "db.passwd"),
        ("checkpoint_storage:\n  host_path: /x\n  bucket: b\n", "checkpoint_storage.bucket"),
    ],
)
def test_unknown_key_names_the_field_path(tmp_path: Path, text: str, field: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_master_config(path)
    assert {"field": field, "message": "unknown key"} in info.value.fields
    assert f"{field}: unknown key" in str(info.value)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("port: abc\n", "port"),
        ("port: 70000\n", "port"),
        ("agent_heartbeat_interval: soon\n", "agent_heartbeat_interval"),
        ("agent_reconnect_wait: -3\n", "agent_reconnect_wait"),
        ("resource_pools: default\n", "resource_pools"),
        (
            "resource_pools:\n  - pool_name: a\n    scheduler:\n      fitting_policy: random\n",
            "resource_pools[0].scheduler.fitting_policy",
        ),
        (
            "resource_pools:\n  - pool_name: a\n    scheduler:\n      default_priority: 0\n",
            "resource_pools[0].scheduler.default_priority",
        ),
        ("resource_pools:\n  - pool_name: 'has space'\n", "resource_pools[0].pool_name"),
        ("resource_pools:\n  - description: no name\n", "resource_pools[0].pool_name"),
        ("db:\n  port: [1]\n", "db.port"),
        ("db:\n  ssl_mode: sometimes\n", "db.ssl_mode"),
        ("log_level: loud\n", "log_level"),
        ("checkpoint_storage:\n  type: shared_fs\n", "checkpoint_storage.host_path"),
    ],
)
def test_wrong_type_names_the_field(tmp_path: Path, text: str, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_master_config(write(tmp_path, text))
    assert field in fields_of(info.value), info.value.fields
    assert field in str(info.value)


def test_several_problems_are_listed_together(tmp_path: Path) -> None:
    text = "port: abc\nbogus: 1\nresource_pools:\n  - pool_name: a\n    scheduler:\n      colour: red\n"
    with pytest.raises(ConfigError) as info:
        load_master_config(write(tmp_path, text))
    assert set(fields_of(info.value)) >= {"port", "bogus", "resource_pools[0].scheduler.colour"}


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="mapping"):
        load_master_config(write(tmp_path, "- a\n- b\n"))


def test_duplicate_pool_names(tmp_path: Path) -> None:
    text = (
        "resource_pools:\n  - pool_name: a\n  - pool_name: b\n  - pool_name: a\n"
        "default_compute_resource_pool: a\ndefault_aux_resource_pool: b\n"
    )
    with pytest.raises(ConfigError) as info:
        load_master_config(write(tmp_path, text))
    assert fields_of(info.value) == ["resource_pools[2].pool_name"]
    assert "duplicate" in str(info.value) and "'a'" in str(info.value)


def test_no_pools_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_master_config(write(tmp_path, "resource_pools: []\n"))
    assert "resource_pools" in fields_of(info.value)


@pytest.mark.parametrize("key", ["default_compute_resource_pool", "default_aux_resource_pool"])
def test_default_pools_must_exist(tmp_path: Path, key: str) -> None:
    text = (
        "resource_pools:\n  - pool_name: gpu\ndefault_compute_resource_pool: gpu\n"
        f"default_aux_resource_pool: gpu\n{key}: nope\n"
    )
    with pytest.raises(ConfigError) as info:
        load_master_config(write(tmp_path, text))
    assert fields_of(info.value) == [key]
    assert "'nope'" in str(info.value)


def test_default_pool_names_default_when_pools_renamed(tmp_path: Path) -> None:
    # the defaults point at "default"; a file that renames the only pool must say where to go
    with pytest.raises(ConfigError) as info:
        load_master_config(write(tmp_path, "resource_pools:\n  - pool_name: gpu\n"))
    assert set(fields_of(info.value)) == {"default_compute_resource_pool", "default_aux_resource_pool"}


def test_without_db_section_sqlite_in_data_dir(tmp_path: Path) -> None:
    cfg = load_master_config(write(tmp_path, f"data_dir: {tmp_path / 'data'}\n"))
    assert cfg.database_url() == f"sqlite:///{tmp_path / 'data' / 'pedl.db'}"


def test_db_section_gives_postgresql_psycopg_url(tmp_path: Path) -> None:
    text = (
        "db:\n  host: db.example.com\n  port: 6543\n  user: pedl\n  password: s3cret\n  name: cluster\n"
        "  ssl_mode: require\n"
    )
    cfg = load_master_config(write(tmp_path, text))
    url = cfg.database_url()
    assert url == "postgresql+psycopg://pedl:s3cret@db.example.com:6543/cluster?sslmode=require"


def test_db_section_defaults_and_blank_password() -> None:
    cfg = MasterConfig(db=DatabaseConfig())
    assert cfg.database_url() == "postgresql+psycopg://postgres@127.0.0.1:5432/pedl?sslmode=prefer"


def test_db_password_with_special_characters_is_escaped() -> None:
    from sqlalchemy.engine import make_url

    cfg = MasterConfig(db=DatabaseConfig(password="p@ss:w/rd#1", name="pedl"))
    url = make_url(cfg.database_url())
    assert url.drivername == "postgresql+psycopg"
    assert url.password == "p@ss:w/rd#1"
    assert url.host == "127.0.0.1"


def test_a_pools_task_container_defaults_replace_only_the_fields_it_sets(tmp_path: Path) -> None:
    cfg = load_master_config(
        write(
            tmp_path,
            """\
task_container_defaults:
  startup_hook: echo master
  environment_variables: [A=master]
  shm_size_bytes: 1024
resource_pools:
  - pool_name: default
  - pool_name: gpus
    task_container_defaults:
      startup_hook: echo pool
      shm_size_bytes: 2048
""",
        )
    )
    assert cfg.task_defaults("default").startup_hook == "echo master"
    gpus = cfg.task_defaults("gpus")
    assert (gpus.startup_hook, gpus.shm_size_bytes, gpus.environment_variables) == ("echo pool", 2048, ["A=master"])
    assert cfg.task_container_defaults.startup_hook == "echo master"  # the master's own are left as they were
    assert cfg.task_defaults("no-such-pool") is cfg.task_container_defaults


@pytest.mark.parametrize(
    "text, field",
    [
        ("task_container_defaults: {startup_hook: [echo]}\n", "task_container_defaults.startup_hook"),
        (
            "resource_pools: [{pool_name: p, task_container_defaults: {shm_size_bytes: -1}}]\n"
            "default_compute_resource_pool: p\ndefault_aux_resource_pool: p\n",
            "resource_pools[0].task_container_defaults.shm_size_bytes",
        ),
        (
            "resource_pools: [{pool_name: p, task_container_defaults: {startup_hok: x}}]\n",
            "resource_pools[0].task_container_defaults.startup_hok",
        ),
    ],
)
def test_bad_task_container_defaults_name_the_field(tmp_path: Path, text: str, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_master_config(write(tmp_path, text))
    assert fields_of(info.value) == [field], str(info.value)
