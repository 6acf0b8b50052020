"""Controller memory: backoff that grows and is forgotten on success, time-in-state, death
streaks, setup records, notices and round trips per zone; and a round trip through JSON that
fails closed."""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core.memory import (
    BACKOFF_CAP,
    MEMORY_SCHEMA,
    Memory,
    backoff_delay,
    dead_request_delay,
    from_dict,
    observe,
    record_dead_replaced,
    record_failure,
    record_latency,
    record_notice,
    record_setup,
    record_success,
    to_dict,
)
from tests.support.worlds import Z1, Z2, desired, qr, slot, world


@pytest.mark.parametrize(
    ("failures", "delay"), [(1, 10.0), (2, 20.0), (3, 40.0), (6, 320.0), (7, 600.0), (500, 600.0)]
)
def test_backoff_doubles_up_to_ten_minutes(failures: int, delay: float) -> None:
    assert backoff_delay(failures) == delay


def test_backoff_never_undercuts_the_errors_own_hint() -> None:
    assert backoff_delay(1, hint=90.0) == 90.0
    assert backoff_delay(0, hint=5.0) == 5.0
    assert backoff_delay(0) == 0.0


@given(st.integers(1, 10_000))
def test_backoff_is_monotone_and_capped(n: int) -> None:
    assert backoff_delay(n) <= backoff_delay(n + 1) <= BACKOFF_CAP


@pytest.mark.parametrize(("dead", "delay"), [(0, 0.0), (1, 0.0), (2, 10.0), (3, 20.0), (4, 40.0)])
def test_first_death_requeues_at_once_then_backs_off(dead: int, delay: float) -> None:
    assert dead_request_delay(dead) == delay


def test_failures_accumulate_and_success_forgets_them() -> None:
    m = record_failure(Memory(), "k", message="a", now=100.0, permanent=False, fingerprint="f")
    m = record_failure(m, "k", message="b", now=200.0, permanent=False, fingerprint="f")
    e = m.error("k")
    assert e is not None
    assert (e.failures, e.not_before, e.message, e.permanent_fingerprint) == (2, 220.0, "b", None)
    assert record_success(m, "k").error("k") is None
    assert record_success(m, "other") is m


def test_a_permanent_failure_remembers_its_fingerprint_and_a_transient_one_clears_it() -> None:
    m = record_failure(Memory(), "k", message="denied", now=0.0, permanent=True, fingerprint="f1")
    assert (e := m.error("k")) is not None and e.permanent_fingerprint == "f1"
    m = record_failure(m, "k", message="flaky", now=0.0, permanent=False, fingerprint="f2")
    assert (e := m.error("k")) is not None and e.permanent_fingerprint is None


def test_updates_never_mutate_the_memory_they_were_given() -> None:
    before = Memory()
    record_failure(before, "k", message="x", now=0.0, permanent=False, fingerprint="f")
    record_setup(before, "a", "bootstrap", "a@1", 0)
    record_notice(before, "a@1:active")
    record_dead_replaced(before, "a", 0.0)
    record_latency(before, Z1, 140.0, 0.0)
    assert before == Memory()


# --- observe ----------------------------------------------------------------------------------

WANT = desired(slot("a"), slot("b", Z2))


def test_time_in_state_starts_when_the_state_changes() -> None:
    m = observe(Memory(), WANT, world(qr("a", state=QRState.WAITING_FOR_RESOURCES)), now=10.0)
    assert (m.slot("a").state, m.slot("a").state_since) == ("WAITING_FOR_RESOURCES", 10.0)
    assert (m.slot("b").state, m.slot("b").state_since) == ("NOT_QUEUED", 10.0)
    m = observe(m, WANT, world(qr("a", state=QRState.WAITING_FOR_RESOURCES)), now=50.0)
    assert m.slot("a").state_since == 10.0, "same state: the clock keeps running"
    m = observe(m, WANT, world(qr("a", state=QRState.PROVISIONING)), now=60.0)
    assert (m.slot("a").state, m.slot("a").state_since) == ("PROVISIONING", 60.0)


def test_an_unseen_zone_does_not_reset_the_clock() -> None:
    m = observe(Memory(), WANT, world(qr("b", Z2, QRState.ACTIVE)), now=10.0)
    m = observe(m, WANT, world(unreachable=[Z2]), now=20.0)
    assert (m.slot("b").state, m.slot("b").state_since) == ("ACTIVE", 10.0)


def test_winning_capacity_resets_the_death_streak() -> None:
    m = record_dead_replaced(record_dead_replaced(Memory(), "a", 0.0), "a", 0.0)
    assert (m.slot("a").dead_in_a_row, m.slot("a").create_not_before) == (2, 10.0)
    still = observe(m, WANT, world(qr("a", state=QRState.WAITING_FOR_RESOURCES)), now=1.0)
    assert still.slot("a").dead_in_a_row == 2
    won = observe(m, WANT, world(qr("a", state=QRState.ACTIVE)), now=1.0)
    assert (won.slot("a").dead_in_a_row, won.slot("a").create_not_before) == (0, 0.0)


def test_no_intent_changes_nothing() -> None:
    m = record_dead_replaced(Memory(), "a", 0.0)
    assert observe(m, None, world(qr("a", Z1, QRState.ACTIVE)), now=1.0) is m


def test_setup_is_recorded_per_instance_and_generation() -> None:
    m = record_setup(Memory(), "a", "bootstrap", "a@1", 2)
    assert m.setup_done("a", "bootstrap", "a@1", 2)
    assert not m.setup_done("a", "bootstrap", "a@1", 3)
    assert not m.setup_done("a", "bootstrap", "a@2", 2)
    assert not m.setup_done("a", "tailscale", "a@1", 2)
    assert not m.setup_done("b", "bootstrap", "a@1", 2)


# --- serialisation ----------------------------------------------------------------------------

_op = st.one_of(
    st.tuples(st.just("fail"), st.sampled_from(["a:cloud", "b:tmux"]), st.booleans()),
    st.tuples(st.just("ok"), st.sampled_from(["a:cloud", "b:tmux"]), st.booleans()),
    st.tuples(st.just("dead"), st.sampled_from(["a", "b"]), st.booleans()),
    st.tuples(st.just("setup"), st.sampled_from(["a", "b"]), st.booleans()),
    st.tuples(st.just("notice"), st.sampled_from(["a@1:active", "b@2:failed"]), st.booleans()),
    st.tuples(st.just("observe"), st.sampled_from(["a", "b"]), st.booleans()),
    st.tuples(st.just("latency"), st.sampled_from([Z1, Z2]), st.booleans()),
)


def _replay(ops: list[tuple[str, str, bool]]) -> Memory:
    m = Memory()
    for i, (op, key, flag) in enumerate(ops):
        now = float(i * 7)
        if op == "fail":
            m = record_failure(m, key, message=f"m{i}", now=now, permanent=flag, fingerprint="fp")
        elif op == "ok":
            m = record_success(m, key)
        elif op == "dead":
            m = record_dead_replaced(m, key, now)
        elif op == "setup":
            m = record_setup(m, key, "tailscale" if flag else "bootstrap", f"{key}@{i}", i % 3)
        elif op == "notice":
            m = record_notice(m, key)
        elif op == "latency":
            m = record_latency(m, key, 100.0 + i if flag else None, now)
        else:
            state = QRState.ACTIVE if flag else QRState.FAILED
            m = observe(m, WANT, world(qr(key, Z1 if key == "a" else Z2, state)), now)
    return m


@given(st.lists(_op, max_size=25))
def test_memory_survives_a_round_trip_through_json(ops: list[tuple[str, str, bool]]) -> None:
    m = _replay(ops)
    doc = json.loads(json.dumps(to_dict(m)))
    assert from_dict(doc) == m
    assert to_dict(from_dict(doc)) == doc


def test_the_document_is_versioned() -> None:
    assert to_dict(Memory())["schema_version"] == MEMORY_SCHEMA


@pytest.mark.parametrize(
    "doc",
    [
        None,
        [],
        {},
        {"schema_version": "tpu-reconciler.memory.v0"},
        {"schema_version": MEMORY_SCHEMA, "slots": []},
        {"schema_version": MEMORY_SCHEMA, "slots": {"a": 5}},
        {"schema_version": MEMORY_SCHEMA, "slots": {"a": {"dead_in_a_row": "many"}}},
        {"schema_version": MEMORY_SCHEMA, "slots": {"a": {"setup": []}}},
        {"schema_version": MEMORY_SCHEMA, "errors": {"k": {"failures": 1}}},
        {"schema_version": MEMORY_SCHEMA, "errors": {"k": []}},
        {"schema_version": MEMORY_SCHEMA, "notified": 3},
        {"schema_version": MEMORY_SCHEMA, "latency": []},
        {"schema_version": MEMORY_SCHEMA, "latency": {Z1: {"ms": 140.0}}},
        {"schema_version": MEMORY_SCHEMA, "latency": {Z1: {"ms": "fast", "measured_at": 1.0}}},
        {"schema_version": MEMORY_SCHEMA, "latency": {Z1: {"ms": 1e400, "measured_at": 1.0}}},
    ],
)
def test_a_corrupt_document_is_refused_with_value_error(doc: Any) -> None:
    with pytest.raises(ValueError):
        from_dict(doc)


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)
_field = st.sampled_from(["slots", "errors", "notified", "latency"])


@given(st.dictionaries(_field, _json, max_size=3), st.dictionaries(st.text(max_size=4), _json))
def test_any_json_either_loads_or_is_refused_with_value_error(
    top: dict[str, Any], inner: dict[str, Any]
) -> None:
    doc: dict[str, Any] = {"schema_version": MEMORY_SCHEMA, **top}
    if inner:
        doc.setdefault("slots", {"a": inner})
    with contextlib.suppress(ValueError):
        from_dict(doc)


def test_an_infinite_number_in_the_file_is_refused_with_value_error() -> None:
    text = '{"schema_version": "X", "slots": {"a": {"dead_in_a_row": Infinity}}}'
    doc = json.loads(text.replace("X", MEMORY_SCHEMA))
    assert math.isinf(doc["slots"]["a"]["dead_in_a_row"])
    with pytest.raises(ValueError):
        from_dict(doc)


@pytest.mark.parametrize(
    "part",
    [
        {"boot": {"a": {"instance": "i", "generation": 1, "since": math.inf}}},
        {"ends": {"a": {"run_id": "r", "attempt": 1, "sent_at": -math.inf}}},
    ],
    ids=["boot-since", "ends-sent-at"],
)
def test_an_infinite_time_of_boot_or_ends_is_refused_with_value_error(part: Any) -> None:
    with pytest.raises(ValueError, match="not a finite number"):
        from_dict({"schema_version": MEMORY_SCHEMA, **part})


def test_looks_at_a_running_operation_are_no_failures() -> None:
    """Finding an operation still running waits its own short delay and escalates nothing: the
    real failure after a dozen such looks backs off as a first failure."""
    memory = Memory()
    for i in range(12):
        memory = record_failure(
            memory, "z/a:cloud", message="still running", now=float(i), permanent=False,
            fingerprint="f", delay=5.0, counts=False,
        )  # fmt: skip
        error = memory.error("z/a:cloud")
        assert error is not None and error.failures == 0 and error.not_before == i + 5.0
    memory = record_failure(
        memory, "z/a:cloud", message="UNAVAILABLE", now=100.0, permanent=False, fingerprint="f"
    )
    error = memory.error("z/a:cloud")
    assert error is not None and error.failures == 1
    assert error.not_before == 100.0 + backoff_delay(1)


def test_round_trips_are_kept_per_zone_smoothed_and_a_failure_is_unknown() -> None:
    memory = record_latency(Memory(), Z1, 140.0, now=10.0)
    memory = record_latency(memory, Z2, 30.0, now=11.0)
    memory = record_latency(memory, Z1, 160.0, now=70.0)
    assert memory.latency[Z1].ms == pytest.approx(150.0)  # smoothed with the last value
    assert memory.latency[Z1].measured_at == 70.0
    assert memory.latency[Z2].ms == 30.0  # each zone its own
    memory = record_latency(memory, Z1, None, now=130.0)
    assert memory.latency[Z1].ms is None and memory.latency[Z1].measured_at == 130.0


def test_round_trips_survive_a_restart_and_older_documents_have_none() -> None:
    memory = record_latency(Memory(), Z1, 140.0, now=10.0)
    doc = json.loads(json.dumps(to_dict(memory)))
    assert doc["latency"] == {Z1: {"ms": 140.0, "measured_at": 10.0}}
    assert from_dict(doc).latency == memory.latency
    assert "latency" not in to_dict(Memory())  # written only when there is any
