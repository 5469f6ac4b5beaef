"""Experiment configs: searcher rules (the grid's counts among them), lengths, and errors that list every
problem with its field path. The hyperparameter types are test_hyperparameters.py's."""

from __future__ import annotations

import textwrap

import pytest

from pedl.config.experiment_config import ExperimentConfig, parse_experiment_config
from pedl.config.loading import ConfigError

BASE = "entrypoint: python train.py\nsearcher: {name: single, metric: loss}\n"


def cfg(extra: str = "", base: str = BASE) -> ExperimentConfig:
    return parse_experiment_config(base + textwrap.dedent(extra))


def problems(text: str) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        parse_experiment_config(textwrap.dedent(text))
    out = {p["field"]: p["message"] for p in info.value.fields}
    # the message lists every problem too, each with its field path
    for field in out:
        assert field in info.value.message
    return out


def test_minimal_config_defaults() -> None:
    c = cfg()
    assert c.entrypoint == "python train.py"
    assert c.searcher.name == "single"
    assert c.searcher.smaller_is_better is True
    assert c.searcher.max_concurrent_trials == 0
    assert c.resources.slots_per_trial == 1
    assert c.resources.priority is None
    assert c.max_restarts == 5
    assert c.hyperparameters == {}


def test_config_round_trips_through_its_json_dump() -> None:
    # the master stores model_dump(mode="json") and validates it again for every trial
    c = cfg(
        """
        hyperparameters:
          lr: {type: log, minval: -4, maxval: -2, count: 3}
          n: {a: {type: int, minval: 1, maxval: 2, count: 2}, b: x}
        searcher: {name: grid, metric: acc, smaller_is_better: false, max_length: {epochs: 2}}
    """,
        base="entrypoint: [python, train.py]\n",
    )
    again = ExperimentConfig.model_validate(c.model_dump(mode="json"))
    assert again == c


# -- searchers -------------------------------------------------------------------------------


@pytest.mark.parametrize("hp_type", ["int", "double", "log"])
def test_grid_needs_count_for_numeric_hyperparameters(hp_type: str) -> None:
    text = f"""
        entrypoint: x
        searcher: {{name: grid, metric: loss}}
        hyperparameters:
          x: {{type: {hp_type}, minval: 1, maxval: 3}}
    """
    found = problems(text)
    assert found == {"hyperparameters.x.count": "required for the grid searcher"}


def test_grid_lists_every_missing_count_with_nested_paths() -> None:
    found = problems("""
        entrypoint: x
        searcher: {name: grid, metric: loss}
        hyperparameters:
          a: {type: int, minval: 1, maxval: 3}
          ok: {type: int, minval: 1, maxval: 3, count: 2}
          grp: {b: {type: double, minval: 0, maxval: 1}, c: {type: categorical, vals: [1, 2]}}
    """)
    assert set(found) == {"hyperparameters.a.count", "hyperparameters.grp.b.count"}


def test_grid_without_counts_for_categorical_and_const_is_fine() -> None:
    c = parse_experiment_config(
        textwrap.dedent("""
        entrypoint: x
        searcher: {name: grid, metric: loss}
        hyperparameters:
          a: {type: categorical, vals: [1, 2]}
          b: {type: const, val: 3}
          c: 4
          d: {type: int, minval: 1, maxval: 3, count: 3}
    """)
    )
    assert c.searcher.name == "grid"


def test_single_and_random_do_not_need_counts() -> None:
    hps = "hyperparameters:\n  x: {type: int, minval: 1, maxval: 3}\n"
    assert cfg(hps).searcher.name == "single"
    c = parse_experiment_config("entrypoint: x\nsearcher: {name: random, metric: l, max_trials: 4}\n" + hps)
    assert c.searcher.max_trials == 4


def test_random_needs_max_trials() -> None:
    found = problems("entrypoint: x\nsearcher: {name: random, metric: loss}\n")
    assert "max_trials" in found["searcher"]


@pytest.mark.parametrize("value", [0, -1])
def test_max_trials_must_be_positive(value: int) -> None:
    found = problems(f"entrypoint: x\nsearcher: {{name: random, metric: loss, max_trials: {value}}}\n")
    assert "searcher.max_trials" in found


@pytest.mark.parametrize(
    ("searcher", "field"),
    [
        ("{name: adaptive_magic, metric: loss}", "searcher.name"),
        ("{name: single}", "searcher.metric"),
        ("{name: single, metric: ''}", "searcher.metric"),
        ("{name: single, metric: loss, max_concurrent_trials: -1}", "searcher.max_concurrent_trials"),
        ("{name: single, metric: loss, smaller_is_better: maybe}", "searcher.smaller_is_better"),
    ],
)
def test_bad_searcher_fields(searcher: str, field: str) -> None:
    assert field in problems(f"entrypoint: x\nsearcher: {searcher}\n")


def test_searcher_is_required() -> None:
    assert "searcher" in problems("entrypoint: x\n")


# -- lengths ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "unit", "units"),
    [
        ("100", "batches", 100),
        ("{batches: 7}", "batches", 7),
        ("{epochs: 2}", "epochs", 2),
        ("{records: 5000}", "records", 5000),
    ],
)
def test_max_length_int_or_mapping(raw: str, unit: str, units: int) -> None:
    c = parse_experiment_config(f"entrypoint: x\nsearcher: {{name: single, metric: l, max_length: {raw}}}\n")
    assert c.searcher.max_length is not None
    assert (c.searcher.max_length.unit, c.searcher.max_length.units) == (unit, units)


def test_min_periods_accept_the_same_shorthand() -> None:
    c = cfg("min_validation_period: 10\nmin_checkpoint_period: {epochs: 1}\n")
    assert c.min_validation_period is not None and c.min_validation_period.batches == 10
    assert c.min_checkpoint_period is not None and c.min_checkpoint_period.epochs == 1


@pytest.mark.parametrize(
    "raw",
    ["0", "-5", "true", "abc", "{}", "{batches: 1, epochs: 1}", "{batches: 0}", "{steps: 10}", "[10]"],
)
def test_bad_max_length(raw: str) -> None:
    found = problems(f"entrypoint: x\nsearcher: {{name: single, metric: l, max_length: {raw}}}\n")
    assert any(f.startswith("searcher.max_length") for f in found), found


# -- entrypoint, resources, environment --------------------------------------------------------


@pytest.mark.parametrize("value", ["''", "'   '", "[]"])
def test_entrypoint_must_not_be_empty(value: str) -> None:
    found = problems(f"entrypoint: {value}\nsearcher: {{name: single, metric: l}}\n")
    assert "must not be empty" in found["entrypoint"]


@pytest.mark.parametrize("value", ["5", "{cmd: x}", "[python, 3]"])
def test_entrypoint_wrong_type_is_one_clear_problem(value: str) -> None:
    found = problems(f"entrypoint: {value}\nsearcher: {{name: single, metric: l}}\n")
    assert found == {"entrypoint": "must be a command string or a list of strings"}


def test_entrypoint_is_required() -> None:
    assert "entrypoint" in problems("searcher: {name: single, metric: l}\n")


def test_entrypoint_list_form() -> None:
    c = parse_experiment_config("entrypoint: [python, -m, train]\nsearcher: {name: single, metric: l}\n")
    assert c.entrypoint == ["python", "-m", "train"]


@pytest.mark.parametrize("priority", [1, 42, 99])
def test_priority_in_bounds(priority: int) -> None:
    assert cfg(f"resources: {{priority: {priority}}}\n").resources.priority == priority


@pytest.mark.parametrize("priority", [0, 100, -1, 1000])
def test_priority_out_of_bounds(priority: int) -> None:
    found = problems(BASE + f"resources: {{priority: {priority}}}\n")
    assert "resources.priority" in found


@pytest.mark.parametrize(
    ("resources", "field"),
    [
        ("{slots_per_trial: -1}", "resources.slots_per_trial"),
        ("{slots_per_trial: two}", "resources.slots_per_trial"),
        ("{weight: 0}", "resources.weight"),
        ("{gpus: 1}", "resources.gpus"),
    ],
)
def test_bad_resources(resources: str, field: str) -> None:
    assert field in problems(BASE + f"resources: {resources}\n")


def test_environment_variables_list_and_mapping() -> None:
    c = cfg("environment:\n  environment_variables: [A=1, B=x=y]\n")
    assert c.environment.as_dict() == {"A": "1", "B": "x=y"}
    c = cfg("environment:\n  environment_variables: {A: '1'}\n")
    assert c.environment.as_dict() == {"A": "1"}


def test_environment_variable_without_equals() -> None:
    """A bare NAME is taken, as Determined takes it (Docker's `-e NAME`, with no value the master could
    give), and sets nothing; an entry without a name is refused."""
    c = cfg("environment:\n  environment_variables: [JUSTANAME, A=1]\n")
    assert c.environment.as_dict() == {"A": "1"}
    found = problems(BASE + "environment:\n  environment_variables: ['=v']\n")
    assert "'=v'" in found["environment.environment_variables"]


# -- several problems at once --------------------------------------------------------------------


def test_unknown_keys_are_all_listed() -> None:
    found = problems("""
        entrypoint: x
        searcher: {name: single, metric: loss, patience: 3}
        resources: {slots: 2}
        optimisations: {}
        hyperparameters:
          lr: {type: double, minval: 0.1, maxval: 0.2, stepsize: 0.01}
    """)
    assert {f for f, m in found.items() if m == "unknown key"} == {
        "searcher.patience",
        "resources.slots",
        "optimisations",
        "hyperparameters.lr.stepsize",
    }


def test_every_problem_is_listed_in_one_error() -> None:
    found = problems("""
        entrypoint: ''
        bogus_top: 1
        max_restarts: -1
        records_per_epoch: many
        searcher: {name: grid, metric: loss, max_length: {batches: 0}, extra: x}
        resources: {priority: 100, slots_per_trial: -2}
        hyperparameters:
          a: {type: int, minval: 9, maxval: 1, count: 2}
          b: {type: categorical, vals: []}
        environment: {environment_variables: [=NONAME]}
    """)
    expected = {
        "entrypoint",
        "bogus_top",
        "max_restarts",
        "records_per_epoch",
        "searcher.max_length.batches",
        "searcher.extra",
        "resources.priority",
        "resources.slots_per_trial",
        "hyperparameters.a",
        "hyperparameters.b.vals",
        "environment.environment_variables",
    }
    assert expected <= set(found), expected - set(found)


def test_error_message_has_no_pydantic_noise() -> None:
    with pytest.raises(ConfigError) as info:
        parse_experiment_config("entrypoint: ''\nsearcher: {name: single, metric: l}\n")
    assert "Value error" not in info.value.message
    assert all("Value error" not in p["message"] for p in info.value.fields)


def test_malformed_yaml_names_the_line() -> None:
    with pytest.raises(ConfigError) as info:
        parse_experiment_config("entrypoint: x\nsearcher: {name: single\nfoo: [\n", source="exp.yaml")
    assert "malformed YAML in exp.yaml" in info.value.message
    assert "line" in info.value.message


@pytest.mark.parametrize("text", ["- a\n", "just a string\n", "42\n"])
def test_top_level_must_be_a_mapping(text: str) -> None:
    with pytest.raises(ConfigError, match="mapping"):
        parse_experiment_config(text)


def test_parse_from_a_dict() -> None:
    c = parse_experiment_config({"entrypoint": "x", "searcher": {"name": "single", "metric": "m"}})
    assert c.searcher.metric == "m"


# -- ranges and values: what a database column and a JSON document take on both databases -----------


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ("resources: {slots_per_trial: 1.0e+30}", "resources.slots_per_trial"),
        ("resources: {slots_per_trial: 10001}", "resources.slots_per_trial"),
        ("resources: {max_slots: 1000000000000000000000}", "resources.max_slots"),
        ("resources: {weight: 1e400}", "resources.weight"),
        ("resources: {weight: .nan}", "resources.weight"),
        ("max_restarts: 1.0e+30", "max_restarts"),
        ("max_restarts: 1001", "max_restarts"),
        ("reproducibility: {experiment_seed: 2147483648}", "reproducibility.experiment_seed"),
        ("records_per_epoch: 1000000000000000000000", "records_per_epoch"),
        ("min_validation_period: {batches: 1000000000000000000000}", "min_validation_period.batches"),
        ("hyperparameters: {x: {type: int, minval: 0, maxval: 100000000000000000000}}", "hyperparameters.x.maxval"),
        ("hyperparameters: {x: {type: double, minval: -.inf, maxval: 1}}", "hyperparameters.x.minval"),
        ("hyperparameters: {x: {type: double, minval: 0, maxval: .nan}}", "hyperparameters.x.maxval"),
        ("hyperparameters: {x: {type: double, minval: -1.0e+308, maxval: 1.0e+308}}", "hyperparameters.x"),
        ("hyperparameters: {x: {type: log, minval: -5, maxval: 400}}", "hyperparameters.x"),
        ("hyperparameters: {x: {type: log, minval: -5, maxval: 1, base: .inf}}", "hyperparameters.x.base"),
        ("name: " + "n" * 256, "name"),
        ("labels: [" + "l" * 256 + "]", "labels[0]"),
        ("resources: {resource_pool: " + "p" * 256 + "}", "resources.resource_pool"),
    ],
)
def test_values_out_of_range_name_the_field(extra: str, field: str) -> None:
    assert field in problems(BASE + extra + "\n")


def test_asha_divisor_near_one_is_refused() -> None:
    """Rungs are counted by repeated multiplication: a divisor of 1.000001 would take millions of steps."""
    text = (
        "entrypoint: x\nsearcher: {name: adaptive_asha, metric: loss, max_trials: 4, max_length: 1000000000, "
        "divisor: 1.000001}\n"
    )
    assert "searcher.divisor" in problems(text)


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ('name: "a\\0b"', "name"),
        ('description: "a\\0b"', "description"),
        ('labels: [ok, "a\\0b"]', "labels[1]"),
        ('hyperparameters: {g: {x: "a\\0b"}}', "hyperparameters.g.x"),
        ('hyperparameters: {x: {type: categorical, vals: [1, "\\0"]}}', "hyperparameters.x.vals[1]"),
        ('environment: {environment_variables: {A: "\\0"}}', "environment.environment_variables.A"),
        ('data: {"k\\0": 1}', "data"),
        ('data: {k: "\\ud800"}', "data.k"),
        ("data: {k: [1, .inf]}", "data.k[1]"),
        ("data: {k: 100000000000000000000}", "data.k"),
        ("description: " + "d" * 70_000, "description"),
        ('data: {k: !!binary "/w=="}', "data.k"),
        ('hyperparameters: {x: !!binary "/w=="}', "hyperparameters.x"),
    ],
)
def test_unstorable_values_anywhere_name_their_path(extra: str, field: str) -> None:
    assert field in problems(BASE + extra + "\n")


def test_nul_in_the_entrypoint_is_refused() -> None:
    assert "entrypoint" in problems('entrypoint: "python\\0 x"\nsearcher: {name: single, metric: l}\n')


def test_limits_are_the_masters() -> None:
    from pedl.config.security_config import LimitsConfig

    text = BASE + "description: " + "d" * 300 + "\n"
    assert cfg("description: " + "d" * 300 + "\n").description == "d" * 300
    with pytest.raises(ConfigError, match="more than the limit of 256"):
        parse_experiment_config(text, limits=LimitsConfig(max_string_length=256))
    with pytest.raises(ConfigError, match="limits.max_config_bytes"):
        parse_experiment_config(text + "data: {k: " + "v" * 1000 + "}\n", limits=LimitsConfig(max_config_bytes=1024))
    with pytest.raises(ConfigError, match="limits.max_nesting_depth"):
        parse_experiment_config(BASE + "data: [[[[[1]]]]]\n", limits=LimitsConfig(max_nesting_depth=4))


def test_bounds_themselves_are_accepted() -> None:
    c = cfg(
        "resources: {slots_per_trial: 10000, weight: 1000000}\nmax_restarts: 1000\n"
        "reproducibility: {experiment_seed: 2147483647}\n"
        "hyperparameters: {x: {type: log, minval: -300, maxval: 300}, y: {type: double, minval: -1e300, "
        "maxval: 1e300}}\nname: " + "n" * 255 + "\n"
    )
    assert c.resources.slots_per_trial == 10_000 and c.max_restarts == 1000
    assert c.reproducibility.experiment_seed == 2**31 - 1 and len(c.name) == 255


@pytest.mark.parametrize(
    "given, size",
    [
        ("24576", 24576),
        ("1.5g", 1536 * 2**20),
        ("512m", 512 * 2**20),
        ("2GiB", 2 * 2**30),
        (8192, 8192),
        ("64KB", 64 * 1024),
    ],
)
def test_shm_size_takes_bytes_or_binary_units(given: object, size: int) -> None:
    from pedl.config.task_config import TaskConfig

    assert cfg(f"resources: {{shm_size: {given!r}}}\n").resources.shm_size == size
    assert TaskConfig.model_validate({"resources": {"shm_size": given}}).resources.shm_size == size
    assert cfg().resources.shm_size is None


@pytest.mark.parametrize(
    "given, words",
    [
        ("lots", "is not a size"),
        ("1.5q", "is not a size"),
        (100, "4096 bytes"),
        ("2t", "4096 bytes to 1 TiB"),
        (True, "a number of bytes"),
        (10.5, "whole number"),
    ],
)
def test_a_bad_shm_size_is_refused_naming_the_field(given: object, words: str) -> None:
    from pydantic import ValidationError

    from pedl.config.task_config import TaskConfig

    got = problems(BASE + f"resources: {{shm_size: {given!r}}}\n")
    assert list(got) == ["resources.shm_size"] and words in got["resources.shm_size"]
    with pytest.raises(ValidationError, match=words):
        TaskConfig.model_validate({"resources": {"shm_size": given}})
