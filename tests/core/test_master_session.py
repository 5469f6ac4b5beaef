"""pedl.core.master_session: auth, JSON bodies, retries while the master is away, typed errors."""

from __future__ import annotations

import json
import threading
import time

import pytest

from pedl.core.master_session import MasterSession, RetryPolicy
from pedl.errors import InvalidArgument, NotFound, PedlError, Unavailable

from .fake_master import TOKEN, FakeMaster, free_port

METRICS = "/api/v1/trials/3/metrics"
FAST = RetryPolicy(deadline_s=60, initial_s=0.01, max_s=0.05)


def test_sends_bearer_token_and_json(fake_master: FakeMaster) -> None:
    session = MasterSession(fake_master.url, TOKEN, retry=FAST)
    session.post(METRICS, {"group": "training", "value": 1.5})
    [call] = fake_master.calls("POST", METRICS)
    assert call.headers["authorization"] == f"Bearer {TOKEN}"
    assert call.headers["content-type"] == "application/json"
    assert call.body == {"group": "training", "value": 1.5}


def test_get_returns_parsed_json_and_passes_params(fake_master: FakeMaster) -> None:
    session = MasterSession(fake_master.url, TOKEN, retry=FAST)
    answer = session.get("/api/v1/allocations/a1/signals/preemption", params={"timeout_seconds": 0})
    assert answer == {"preempt": False}
    [call] = fake_master.calls("GET")
    assert call.query == {"timeout_seconds": ["0"]}


def test_retries_503_until_the_master_answers(fake_master: FakeMaster) -> None:
    fake_master.fail("POST", METRICS, 503, 503, 502)
    session = MasterSession(fake_master.url, TOKEN, retry=FAST)
    session.post(METRICS, {"n": 1})
    statuses = [c.status for c in fake_master.calls("POST", METRICS, ok=False)]
    assert statuses == [503, 503, 502, 200]


def test_retries_while_the_master_is_down_then_delivers(tmp_path) -> None:
    port = free_port()
    session = MasterSession(f"http://127.0.0.1:{port}", TOKEN, retry=RetryPolicy(deadline_s=120))
    started: list[FakeMaster] = []
    attempts: list[float] = []

    def counting_sleep(seconds: float) -> None:
        attempts.append(seconds)
        if len(attempts) == 2:  # the master comes back after two failed attempts
            started.append(FakeMaster(port=port).start())
        time.sleep(min(seconds, 0.05))

    session._sleep = counting_sleep
    try:
        session.post(METRICS, {"steps": 7})
        [call] = started[0].calls("POST", METRICS)
        assert call.body == {"steps": 7}
        assert attempts[:2] == [0.5, 1.0]
    finally:
        for master in started:
            master.stop()


def test_backoff_doubles_from_half_a_second_to_30s_and_gives_up_at_the_deadline(fake_master: FakeMaster) -> None:
    fake_master.fail("POST", METRICS, *([503] * 50))
    now = [0.0]
    sleeps: list[float] = []

    def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    session = MasterSession(
        fake_master.url, TOKEN, retry=RetryPolicy(deadline_s=100), sleep=fake_sleep, monotonic=lambda: now[0]
    )
    with pytest.raises(Unavailable, match="gave up after"):
        session.post(METRICS, {})
    assert sleeps == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 8.5]
    assert len(fake_master.calls("POST", METRICS, ok=False)) == len(sleeps) + 1


def test_4xx_is_raised_at_once_as_a_typed_error(fake_master: FakeMaster) -> None:
    session = MasterSession(fake_master.url, TOKEN, retry=FAST)
    with pytest.raises(NotFound, match="checkpoint nope not found") as info:
        session.get("/api/v1/checkpoints/nope")
    assert "GET /api/v1/checkpoints/nope failed with HTTP 404" in str(info.value)
    fake_master.fail("POST", METRICS, 400)
    with pytest.raises(InvalidArgument, match="injected 400"):
        session.post(METRICS, {})
    assert len(fake_master.calls("POST", METRICS, ok=False)) == 1


def test_retry_false_raises_the_first_failure(fake_master: FakeMaster) -> None:
    fake_master.fail("POST", METRICS, 500)
    session = MasterSession(fake_master.url, TOKEN, retry=FAST)
    with pytest.raises(PedlError, match="HTTP 500"):
        session.post(METRICS, {}, retry=False)


def test_connection_errors_give_up_as_unavailable_after_the_deadline() -> None:
    session = MasterSession(
        f"http://127.0.0.1:{free_port()}", TOKEN, retry=RetryPolicy(deadline_s=0.2, initial_s=0.05, max_s=0.05)
    )
    with pytest.raises(Unavailable, match="cannot reach the master"):
        session.post(METRICS, {})


def test_reports_stay_in_order_while_one_is_retrying(fake_master: FakeMaster) -> None:
    fake_master.fail("POST", "/api/v1/trials/3/progress", 503, 503, 503)
    session = MasterSession(fake_master.url, TOKEN, retry=FAST)
    first = threading.Thread(target=session.post, args=("/api/v1/trials/3/progress", {"progress": 0.1}))
    first.start()
    fake_master.wait_for_request("POST", "/api/v1/trials/3/progress")
    session.post(METRICS, {"after": True})  # made while the first is still being retried
    first.join()
    delivered = [c.path for c in fake_master.calls("POST")]
    assert delivered == ["/api/v1/trials/3/progress", METRICS]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, RetryPolicy()),
        ("12", RetryPolicy(deadline_s=12.0)),
        ("-1", RetryPolicy(deadline_s=0.0)),
    ],
)
def test_retry_policy_from_env(value: str | None, expected: RetryPolicy) -> None:
    env = {} if value is None else {"PEDL_REPORT_RETRY_SECONDS": value}
    policy = RetryPolicy.from_env(env)
    assert policy == expected
    assert (policy.initial_s, policy.max_s) == (0.5, 30.0)


def test_retry_policy_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="PEDL_REPORT_RETRY_SECONDS"):
        RetryPolicy.from_env({"PEDL_REPORT_RETRY_SECONDS": "ten minutes"})


def test_default_deadline_is_ten_minutes() -> None:
    assert RetryPolicy.from_env({}).deadline_s == 600


def test_an_https_master_is_verified_and_a_wrong_ca_fails_at_once_without_retrying(tmp_path) -> None:
    from tests.support.tls import https_json_server, write_tls_files

    tls = write_tls_files(tmp_path / "tls")
    slept: list[float] = []
    with https_json_server(tls, {"preempt": False}) as (url, paths):
        assert MasterSession(url, TOKEN, retry=FAST, cert_file=str(tls.ca)).get("/x") == {"preempt": False}
        wrong = MasterSession(url, TOKEN, retry=FAST, cert_file=str(tls.other_ca), sleep=slept.append)
        with pytest.raises(Unavailable) as caught:
            wrong.get("/x")
    assert paths == ["/x"]
    assert slept == []  # waiting cannot make the certificate trusted
    assert caught.value.message == (
        f"GET /x: the TLS certificate of the master at {url} could not be verified against the CA in "
        f"{tls.other_ca} (self-signed certificate in certificate chain): pass the CA certificate that signed "
        f"the master's with the agent's --cert FILE (its tasks get it as PEDL_MASTER_CERT)"
    )


# -- the background sender's batches ---------------------------------------------------------------

BATCH = METRICS + "/batch"


def queue_reports(session: MasterSession, steps: range) -> None:
    for step in steps:
        session.post_in_background(METRICS, {"single": step}, batch=(BATCH, {"step": step}))


def sent_steps(fake_master: FakeMaster) -> list[list[int]]:
    """Each request that carried reports: a single one as [step], a batch as its steps."""
    return [
        [e["step"] for e in c.body["reports"]] if c.path == BATCH else [c.body["single"]]
        for c in fake_master.calls("POST", rf"{METRICS}(/batch)?")
    ]


def hold_the_sender(session: MasterSession, first: int) -> threading.Event:
    """Queue report `first` and return once the sender has it in flight; its request waits until the
    returned event is set (a slow master), so what is queued meanwhile waits behind it."""
    entered, gate, real = threading.Event(), threading.Event(), session._send_with_retries

    def slow(*args, **kwargs):
        entered.set()
        gate.wait(10)
        return real(*args, **kwargs)

    session._send_with_retries = slow  # type: ignore[method-assign]
    queue_reports(session, range(first, first + 1))
    assert entered.wait(10)
    session._send_with_retries = real  # type: ignore[method-assign]
    return gate


def test_what_queues_while_a_report_is_in_flight_goes_out_as_one_batch(fake_master: FakeMaster) -> None:
    session = MasterSession(fake_master.url, TOKEN, retry=FAST)
    gate = hold_the_sender(session, 1)
    queue_reports(session, range(2, 51))
    gate.set()
    session.flush()
    # the first went alone (Determined's single report); the 49 queued behind it in one request
    assert sent_steps(fake_master) == [[1], list(range(2, 51))]


def test_batches_keep_the_order_of_other_background_posts(fake_master: FakeMaster) -> None:
    session = MasterSession(fake_master.url, TOKEN, retry=FAST)
    gate = hold_the_sender(session, 1)
    queue_reports(session, range(2, 4))
    session.post_in_background("/api/v1/trials/3/progress", {"progress": 0.5})
    queue_reports(session, range(4, 7))
    gate.set()
    session.flush()
    order = [c.path for c in fake_master.calls("POST")]
    assert order == [METRICS, BATCH, "/api/v1/trials/3/progress", BATCH]
    assert sent_steps(fake_master) == [[1], [2, 3], [4, 5, 6]]


def test_a_batch_is_bounded_in_reports_and_bytes(fake_master: FakeMaster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pedl.core.master_session.BATCH_REPORTS", 10)
    session = MasterSession(fake_master.url, TOKEN, retry=FAST)
    gate = hold_the_sender(session, 1)
    queue_reports(session, range(2, 26))
    gate.set()
    session.flush()
    assert [len(b) for b in sent_steps(fake_master)] == [1, 10, 10, 4]
    monkeypatch.setattr("pedl.core.master_session.BATCH_REPORTS", 1000)
    monkeypatch.setattr("pedl.core.master_session.BATCH_BYTES", 3 * len('{"step": 100}'))
    fake_master.requests.clear()
    gate = hold_the_sender(session, 100)
    queue_reports(session, range(101, 108))
    gate.set()
    session.flush()
    assert sent_steps(fake_master) == [[100], [101, 102, 103], [104, 105, 106], [107]]


def test_a_batch_the_master_answers_503_is_sent_again_whole(fake_master: FakeMaster) -> None:
    fake_master.fail("POST", BATCH, 503)
    session = MasterSession(fake_master.url, TOKEN, retry=FAST)
    gate = hold_the_sender(session, 1)
    queue_reports(session, range(2, 6))
    gate.set()
    session.flush()
    assert [c.status for c in fake_master.calls("POST", BATCH, ok=False)] == [503, 200]
    assert sent_steps(fake_master) == [[1], [2, 3, 4, 5]]


def test_an_entry_json_cannot_encode_fails_the_next_call_and_the_others_still_go(fake_master: FakeMaster) -> None:
    session = MasterSession(fake_master.url, TOKEN, retry=FAST)
    gate = hold_the_sender(session, 1)
    session.post_in_background(METRICS, {"single": 2, "v": float("nan")}, batch=(BATCH, {"step": float("nan")}))
    queue_reports(session, range(3, 5))
    gate.set()
    with pytest.raises(PedlError, match="cannot send the report"):
        session.flush()
    assert sent_steps(fake_master) == [[1], [3, 4]]  # not JSON: it failed alone, the rest went on
    session.close()


@pytest.mark.parametrize("fast", [True, False])
def test_batch_entries_encode_alike_with_orjson_or_without(monkeypatch: pytest.MonkeyPatch, fast: bool) -> None:
    """A task image that carries pedl.core without orjson encodes with the stdlib's json: the same
    JSON, and the same refusals (NaN, a type JSON lacks)."""
    from pedl.core import master_session

    if not fast:
        monkeypatch.setattr(master_session, "orjson", None)
    entry = {"group": "training", "stepsCompleted": 3, "metrics": {"avgMetrics": {"loss": 0.25, "x": None}}}
    assert json.loads(master_session._encode(entry)) == entry
    assert master_session._encode({"v": float("nan")}) is None
    assert master_session._encode({"v": object()}) is None


def test_a_run_of_entries_is_one_batch_encoded_whole_or_entry_by_entry_alike() -> None:
    from pedl.core.master_session import _batches, _Queued

    def run(*entries: dict) -> list[_Queued]:
        return [_Queued(METRICS, None, BATCH, e) for e in entries]

    plain = run({"step": 1, "loss": 0.5}, {"step": 2, "loss": 0.25}, {"step": 3, "loss": 0.125})
    [(item, raw)] = list(_batches(plain))
    assert item is None and json.loads(raw) == [q.entry for q in plain]
    # a null the report meant (None) takes the entry-by-entry path, to the same batch
    nulls = run({"step": 1, "loss": None}, {"step": 2, "loss": 0.5})
    [(item, raw)] = list(_batches(nulls))
    assert item is None and json.loads(raw) == [q.entry for q in nulls]
    # one entry JSON cannot say goes alone, between the batches before and after it
    mixed = run({"step": 1}, {"step": 2}, {"step": 3, "v": float("inf")}, {"step": 4})
    out = list(_batches(mixed))
    assert [(i is not None and i.entry["step"], r and [e["step"] for e in json.loads(r)]) for i, r in out] == [
        (False, [1, 2]),
        (3, None),
        (4, None),
    ]
    [(alone, raw)] = list(_batches(run({"step": 9})))
    assert alone.entry == {"step": 9} and raw is None
