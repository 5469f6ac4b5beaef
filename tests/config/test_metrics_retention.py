"""`metrics_retention` in master.yaml and in an experiment config: off unless set, defaults, stored dumps
that read back, and bad values refused naming their full path."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pedl.config.experiment_config import parse_experiment_config
from pedl.config.loading import ConfigError
from pedl.config.master_config import MasterConfig, load_master_config
from pedl.config.metrics_retention import DEFAULT_INTERVAL

EXPERIMENT = "entrypoint: python train.py\nsearcher: {name: single, metric: loss}\n"


def master(tmp_path: Path, text: str) -> MasterConfig:
    path = tmp_path / "master.yaml"
    path.write_text(textwrap.dedent(text))
    return load_master_config(path)


def refused(load) -> dict[str, str]:  # a callable that raises ConfigError
    with pytest.raises(ConfigError) as info:
        load()
    out = {p["field"]: p["message"] for p in info.value.fields}
    for field, message in out.items():  # the message shown names each field with its problem
        assert f"{field}: {message}" in info.value.message
    return out


def test_off_unless_set(tmp_path: Path) -> None:
    assert MasterConfig().metrics_retention is None
    assert master(tmp_path, "port: 0\n").metrics_retention is None
    assert parse_experiment_config(EXPERIMENT).metrics_retention is None


def test_master_section_and_its_default_interval(tmp_path: Path) -> None:
    cfg = master(tmp_path, "metrics_retention: {keep_every: 10, older_than: 24h}\n").metrics_retention
    assert cfg is not None
    assert (cfg.keep_every, cfg.older_than, cfg.interval) == (10, 86400.0, DEFAULT_INTERVAL)
    cfg = master(tmp_path, "metrics_retention: {keep_every: 1, older_than: 90s, interval: 1m30s}\n").metrics_retention
    assert cfg is not None and (cfg.keep_every, cfg.older_than, cfg.interval) == (1, 90.0, 90.0)


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ("{keep_every: 0, older_than: 1h}", "metrics_retention.keep_every"),
        ("{keep_every: -3, older_than: 1h}", "metrics_retention.keep_every"),
        ("{keep_every: 2000000, older_than: 1h}", "metrics_retention.keep_every"),
        ("{keep_every: many, older_than: 1h}", "metrics_retention.keep_every"),
        ("{older_than: 1h}", "metrics_retention.keep_every"),
        ("{keep_every: 3}", "metrics_retention.older_than"),
        ("{keep_every: 3, older_than: 0}", "metrics_retention.older_than"),
        ("{keep_every: 3, older_than: 0s}", "metrics_retention.older_than"),
        ("{keep_every: 3, older_than: -5}", "metrics_retention.older_than"),
        ("{keep_every: 3, older_than: 3 days}", "metrics_retention.older_than"),
        ("{keep_every: 3, older_than: 1h, interval: 0}", "metrics_retention.interval"),
        ("{keep_every: 3, older_than: 1h, interval: soon}", "metrics_retention.interval"),
        ("{keep_every: 3, older_than: 1h, every: 2}", "metrics_retention.every"),
        ("3", "metrics_retention"),
    ],
)
def test_master_refuses_bad_values_naming_the_field(tmp_path: Path, section: str, field: str) -> None:
    problems = refused(lambda: master(tmp_path, f"metrics_retention: {section}\n"))
    assert list(problems) == [field]


def test_experiment_section_reads_back_from_its_stored_dump() -> None:
    cfg = parse_experiment_config(EXPERIMENT + "metrics_retention: {keep_every: 4, older_than: 2h}\n")
    assert cfg.metrics_retention is not None
    assert (cfg.metrics_retention.keep_every, cfg.metrics_retention.older_than) == (4, 7200.0)
    stored = cfg.model_dump(mode="json")  # experiments keep this, and Determined's clients get it
    assert stored["metrics_retention"] == {"keep_every": 4, "older_than": "2h"}
    assert parse_experiment_config(stored) == cfg
    bare = parse_experiment_config(EXPERIMENT + "metrics_retention: {keep_every: 1}\n").metrics_retention
    assert bare is not None and (bare.keep_every, bare.older_than) == (1, None)  # older_than: the master's


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ("{keep_every: 0}", "metrics_retention.keep_every"),
        ("{older_than: 1h}", "metrics_retention.keep_every"),
        ("{keep_every: 2, older_than: 0}", "metrics_retention.older_than"),
        ("{keep_every: 2, older_than: tomorrow}", "metrics_retention.older_than"),
        ("{keep_every: 2, interval: 1m}", "metrics_retention.interval"),  # the master's alone
        ("yes", "metrics_retention"),
    ],
)
def test_experiment_refuses_bad_values_naming_the_field(section: str, field: str) -> None:
    problems = refused(lambda: parse_experiment_config(EXPERIMENT + f"metrics_retention: {section}\n"))
    assert list(problems) == [field]
