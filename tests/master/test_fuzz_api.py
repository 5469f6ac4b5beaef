"""Fuzzing experiment create against a live master : random experiment configs
and model-definition file lists always get a 2xx or a 4xx, never a 5xx, and the master stays
responsive meanwhile (every concurrent GET /api/v1/me answers).

Configs are YAML text dumped from random structures: Determined's keys with values of any type,
random nesting (past the nesting limit too), numbers that are huge, infinite or NaN, strings with NUL
bytes and lone surrogates; sometimes the YAML is cut short or replaced by arbitrary text. File lists
mix valid entries with hostile ones: `..`, absolute paths, NUL bytes, backslashes, odd types, modes
and mtimes, content that is not base64. The seed is fixed so the suite is deterministic; set
PEDL_FUZZ_SEED to explore other inputs."""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
import traceback
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from pedl.config.master_config import MasterConfig
from tests.support.live_master import LiveMaster

MAX_EXAMPLES = 150
SEED = int(os.environ.get("PEDL_FUZZ_SEED", "20260808"))

# -- values of every kind ------------------------------------------------------------------------------

# an integer of more digits than Python converts from text by default: neither json nor yaml can
# write it, so a marker stands for it and becomes digits in the text sent
HUGE = "@@HUGE@@"
HUGE_DIGITS = "9" * 5000
surrogates = st.integers(0xD800, 0xDFFF).map(chr)
chars = st.one_of(st.characters(), surrogates, st.sampled_from(["\x00", "\\", "/", ".", "\n", "\x7f"]))
strings = st.one_of(
    st.lists(chars, max_size=12).map("".join),
    st.sampled_from(
        [
            "",
            "\x00",
            "a\x00b",
            "\ud800",
            "x\udfff",
            "..",
            ".",
            "/etc/passwd",
            "a\\b",
            "x" * 70_000,
            "s3://bucket",
            "1e30",
            "-1",
            "inf",
            "nan",
            "0x10",
        ]
    ),
)
numbers = st.one_of(
    st.integers(-3, 20),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(
        [
            0,
            1,
            2**31,
            2**63,
            2**64,
            10**30,
            -(10**30),
            1e30,
            1e308,
            -1e308,
            float("inf"),
            float("-inf"),
            float("nan"),
            0.5,
            -0.0,
            HUGE,
        ]
    ),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, strings)
keys = st.one_of(
    st.sampled_from(["type", "name", "val", "vals", "minval", "maxval", "count", "batches", "a"]),
    strings.filter(lambda k: len(k) < 100),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=12,
)


def nested(depth: int, leaf: Any = 1) -> Any:
    for i in range(depth):
        leaf = [leaf] if i % 2 else {"a": leaf}
    return leaf


def mostly(usual: st.SearchStrategy, rare: st.SearchStrategy, one_in: int = 6) -> st.SearchStrategy:
    """`rare` one time in `one_in`, so that hostile values do not keep every input from going deep."""
    return st.integers(1, one_in).flatmap(lambda i: rare if i == 1 else usual)


deep = st.integers(0, 80).map(nested)  # the nesting limit is 32 by default
anything = mostly(values, deep)

# -- experiment configs ----------------------------------------------------------------------------------

small = st.integers(0, 20)  # plausible values, so that many inputs pass validation and create trials

hparam = st.one_of(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["int", "double", "log"]), "minval": numbers, "maxval": numbers},
        optional={"count": numbers, "base": numbers},
    ),
    st.fixed_dictionaries({"type": st.just("categorical"), "vals": st.one_of(st.lists(scalars, max_size=5), anything)}),
    st.fixed_dictionaries({"type": st.sampled_from(["const", "junk", ""]), "val": anything}),
    anything,
)
hyperparameters = st.dictionaries(keys, st.one_of(hparam, st.dictionaries(keys, hparam, max_size=3)), max_size=5)

# plausible values for Determined's keys, by dotted path
FIELDS: dict[str, st.SearchStrategy] = {
    "name": strings,
    "description": strings,
    "entrypoint": st.one_of(strings, st.lists(strings, max_size=3)),
    "searcher.name": st.one_of(st.sampled_from(["single", "grid", "random", "adaptive_asha"]), strings),
    "searcher.metric": strings,
    "searcher.smaller_is_better": scalars,
    "searcher.max_trials": small | numbers,
    "searcher.max_concurrent_trials": small | numbers,
    "searcher.max_length": st.one_of(small, numbers, st.fixed_dictionaries({"batches": numbers}), anything),
    "searcher.divisor": small | numbers,
    "searcher.max_rungs": small | numbers,
    "searcher.mode": st.sampled_from(["aggressive", "standard", "conservative"]) | strings,
    "searcher.source_trial_id": numbers,
    "searcher.source_checkpoint_uuid": strings,
    "hyperparameters": st.one_of(hyperparameters, anything),
    "resources.slots_per_trial": small | numbers,
    "resources.resource_pool": st.just("default") | strings,
    "resources.priority": small | numbers,
    "resources.weight": small | numbers,
    "max_restarts": small | numbers,
    "reproducibility.experiment_seed": small | numbers,
    "records_per_epoch": numbers,
    "min_validation_period": st.one_of(numbers, st.fixed_dictionaries({"batches": numbers})),
    "checkpoint_storage": st.one_of(
        st.fixed_dictionaries(
            {"type": st.sampled_from(["shared_fs", "s3", "gcs", "junk"])},
            optional={
                "host_path": strings,
                "storage_path": strings,
                "bucket": strings,
                "save_trial_best": numbers,
                "save_trial_latest": numbers,
            },
        ),
        anything,
    ),
    "environment.environment_variables": anything,
    "environment.image": anything,
    "labels": anything,
    "data": anything,
    "bind_mounts": anything,
    "debug": scalars,
}
GRID_DEFAULT = {"lr": {"type": "double", "minval": 0.001, "maxval": 0.1, "count": 2}}


def _set(tree: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for part in parents:
        if not isinstance(tree.get(part), dict):
            tree[part] = {}
        tree = tree[part]
    tree[last] = value


@st.composite
def config_texts(draw: st.DrawFn) -> Any:
    cfg: dict[str, Any] = {
        "name": "fuzz",
        "entrypoint": "python train.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": 10},
        "hyperparameters": GRID_DEFAULT,
    }
    for path in draw(st.lists(st.sampled_from(sorted(FIELDS)), max_size=5, unique=True)):
        _set(cfg, path, draw(FIELDS[path]))
    for key, value in draw(mostly(st.just({}), st.dictionaries(keys, anything, max_size=2), 4)).items():  # unknown keys
        cfg[key] = value
    text = yaml.safe_dump(cfg, allow_unicode=draw(st.booleans())).replace(HUGE, HUGE_DIGITS)
    how = draw(st.sampled_from(["yaml"] * 8 + ["cut", "text", "flow", "value"]))
    if how == "cut":
        return text[: draw(st.integers(0, len(text)))]
    if how == "text":
        return draw(strings)
    if how == "flow":  # deep flow-style nesting in the YAML text itself
        n = draw(st.integers(1, 5000))
        return "entrypoint: x\nsearcher: {name: single, metric: l}\nhyperparameters: " + "[" * n + "]" * n
    if how == "value":  # not a string at all
        return draw(anything)
    return text


# -- model definitions -------------------------------------------------------------------------------------

paths = st.one_of(
    st.sampled_from(
        [
            "train.py",
            "..",
            "../x",
            "/abs/x",
            "a\x00b",
            "a\\b",
            "",
            ".",
            "dir/",
            "a/../../b",
            "./ok.py",
            "d/" * 300 + "f",
            "\ud800.py",
        ]
    ),
    strings,
)
contents = st.one_of(
    st.binary(max_size=64).map(lambda b: base64.b64encode(b).decode()),
    st.sampled_from(["not base64!", "=", "AAA", "\x00"]),
    strings,
    numbers,
)
file_entries = st.one_of(
    st.fixed_dictionaries(
        {"path": paths},
        optional={
            "type": st.one_of(st.sampled_from([48, 53, 0, 49, 50, 51, 52, 54, "0", "5", None]), numbers),
            "content": contents,
            "mtime": st.one_of(numbers, st.sampled_from(["1700000000", "1e30", "-1", "abc", ""])),
            "mode": st.one_of(st.sampled_from([33188, 16877, 0o777, 0o170777]), numbers),
            "uid": numbers,
            "gid": numbers,
        },
    ),
    anything,
)
file_lists = mostly(
    st.just(
        [
            {
                "path": "train.py",
                "type": 48,
                "content": "cGFzcwo=",
                "mtime": "1700000000",
                "mode": 33188,
                "uid": 0,
                "gid": 0,
            }
        ]
    ),
    st.one_of(st.lists(file_entries, max_size=4), anything),
    2,
)

bodies = st.fixed_dictionaries(
    {"config": config_texts(), "modelDefinition": file_lists},
    optional={
        "activate": mostly(st.booleans(), scalars),
        "validateOnly": mostly(st.booleans(), scalars),
        "parentId": mostly(st.none(), numbers),
        "projectId": mostly(st.none(), numbers),
        "template": mostly(st.none(), strings),
    },
)


# -- the master and a watcher of its responsiveness ---------------------------------------------------------


def _login(url: str) -> dict[str, str]:
    r = httpx.post(f"{url}/api/v1/auth/login", content=json.dumps({"username": "determined", "password": ""}))
    assert r.status_code == 200, r.text
    return {"Authorization": f"Bearer {r.json()['token']}"}


class MeWatcher(threading.Thread):
    """Calls GET /api/v1/me in a loop; counts the calls made and those answered with 200."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.url, self.headers = url, headers
        self.made = self.answered = 0
        self.failures: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.url, headers=self.headers, timeout=120) as client:
            while not self.stop.is_set():
                self.made += 1
                try:
                    r = client.get("/api/v1/me")
                except httpx.HTTPError as exc:
                    self.failures.append(repr(exc))
                else:
                    if r.status_code == 200:
                        self.answered += 1
                    else:
                        self.failures.append(f"{r.status_code} {r.text[:200]}")
                self.stop.wait(0.05)


def _escaped(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@pytest.fixture
def live_master(master_config: MasterConfig) -> Iterator[LiveMaster]:
    # The master logs what it refuses, lone surrogates included, and pytest-xdist cannot send such
    # text from a worker (its reports must be UTF-8): records are escaped as they are made.
    make_record = logging.getLogRecordFactory()

    def escaped_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        if record.exc_info:
            record.exc_text = _escaped("".join(traceback.format_exception(*record.exc_info)))
            record.exc_info = None
        record.msg, record.args = _escaped(record.getMessage()), None
        return record

    logging.setLogRecordFactory(escaped_record)
    try:
        with LiveMaster(master_config) as master:
            yield master
    finally:
        logging.setLogRecordFactory(make_record)


def _json(body: Any) -> str:
    # NaN and Infinity as json.dumps writes them by default: not JSON, the API must refuse or read them
    return json.dumps(body).replace(f'"{HUGE}"', HUGE_DIGITS)


def test_experiment_create_never_answers_5xx(live_master: LiveMaster) -> None:
    headers = _login(live_master.url)
    watcher = MeWatcher(live_master.url, headers)
    client = httpx.Client(base_url=live_master.url, headers=headers, timeout=120)
    answers: dict[int, int] = {}

    @seed(SEED)
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
    @given(body=bodies)
    def create(body: dict[str, Any]) -> None:
        sent = _json(body)
        try:
            r = client.post("/api/v1/experiments", content=sent)
        except httpx.HTTPError as exc:  # the server dropped the connection: as bad as a 5xx
            pytest.fail(f"no answer ({exc!r})\nbody sent: {sent[:3000]}")
        answers[r.status_code] = answers.get(r.status_code, 0) + 1
        assert 200 <= r.status_code < 300 or 400 <= r.status_code < 500, (
            f"{r.status_code}: {r.text[:1000]}\nbody sent: {sent[:3000]}"
        )

    watcher.start()
    try:
        create()
    finally:
        watcher.stop.set()
        watcher.join()
        client.close()
    assert watcher.made > 0
    assert watcher.answered == watcher.made, watcher.failures[:5]
    assert sum(answers.values()) >= MAX_EXAMPLES
    assert any(200 <= code < 300 for code in answers), answers  # some inputs are valid and were created
