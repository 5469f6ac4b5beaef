"""Templates: Determined's merge (the experiment's values win, mappings merge, union members stay
whole) and what a template's config may hold."""

from __future__ import annotations

import pytest

from pedl.config.security_config import LimitsConfig
from pedl.errors import InvalidArgument
from pedl.master.workspaces.templates import checked_config, merged


def test_the_experiments_values_win_and_mappings_merge_key_by_key() -> None:
    template = {
        "resources": {"slots_per_trial": 2, "priority": 7},
        "max_restarts": 1,
        "labels": ["t"],
        "searcher": {"name": "single", "metric": "loss", "max_length": 5},
    }
    config = {
        "resources": {"slots_per_trial": 1},
        "labels": ["mine"],
        "entrypoint": "python x.py",
        "searcher": {"max_length": 9},
    }
    assert merged(template, config) == {
        "resources": {"slots_per_trial": 1, "priority": 7},
        "max_restarts": 1,
        "labels": ["mine"],
        "searcher": {"name": "single", "metric": "loss", "max_length": 9},
        "entrypoint": "python x.py",
    }


def test_a_null_in_the_config_leaves_the_templates_value() -> None:
    assert merged({"description": "from the template"}, {"description": None}) == {"description": "from the template"}
    assert merged({}, {"description": None}) == {"description": None}


def test_mappings_of_different_types_are_not_mixed() -> None:
    template = {
        "checkpoint_storage": {"type": "s3", "bucket": "b"},
        "hyperparameters": {"lr": {"type": "double", "minval": 0.1, "maxval": 1.0}},
    }
    config = {
        "checkpoint_storage": {"type": "shared_fs", "host_path": "/x"},
        "hyperparameters": {"lr": {"type": "const", "val": 0.5}},
    }
    assert merged(template, config) == config
    # the config names no type: the template's member fills it in
    assert merged(template, {"checkpoint_storage": {"save_trial_best": 3}})["checkpoint_storage"] == {
        "type": "s3",
        "bucket": "b",
        "save_trial_best": 3,
    }


def test_merging_copies_and_changes_neither_input() -> None:
    template = {"data": {"nested": {"a": 1}}}
    out = merged(template, {"data": {"nested": {"b": 2}}})
    out["data"]["nested"]["c"] = 3
    assert template == {"data": {"nested": {"a": 1}}}


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ([1, 2], "config"),
        ("text", "config"),
        ({"entrypoint": "x", "no_such_key": 1}, "config.no_such_key"),
        ({"data": {"x": "a\x00b"}}, "config.data.x"),
        ({"max_restarts": float("inf")}, "config.max_restarts"),
    ],
)
def test_a_template_config_is_refused_naming_the_field(config: object, field: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        checked_config(config, LimitsConfig())
    assert refused.value.fields[0]["field"] == field
    assert refused.value.message.startswith(field)


def test_a_template_config_is_bounded_in_size() -> None:
    limits = LimitsConfig(max_config_bytes=1024)
    with pytest.raises(InvalidArgument, match="max_config_bytes"):
        checked_config({"data": {"blob": "x" * 2000}}, limits)
    assert checked_config({"data": {"blob": "x" * 100}}, limits)
