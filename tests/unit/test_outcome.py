"""The action outcome policy (``core.outcome``), without a controller."""

from __future__ import annotations

import pytest

from reconciler.core import memory as mem
from reconciler.core.outcome import outcome, rule_delay
from reconciler.core.plan import Action, Kind
from reconciler.errors import (
    OperationPending,
    PermanentCloudError,
    SetupFailed,
    TemporaryError,
    TransientCloudError,
)

Z = "us-central2-b"
CREATE = Action(Kind.CREATE, "alpha", Z, "missing")
BOOTSTRAP = Action(Kind.BOOTSTRAP, "alpha", Z, "new node", instance="alpha@1", generation=3)


def test_a_transient_failure_backs_off_exponentially_and_says_when() -> None:
    got = outcome(CREATE, TemporaryError("flaky", delay=5.0), mem.Memory(), 100.0, None, 0.5)
    error = got.memory.errors[CREATE.key]
    assert (error.failures, error.not_before, error.message) == (1, 110.0, "flaky")
    assert got.failing_since == 100.0
    assert got.event.kind == "action.failed"
    assert dict(got.event.fields) == {
        "slot": "alpha",
        "action": "create",
        "error": "flaky",
        "retry": "transient",
        "delay": 10.0,
    }
    again = outcome(CREATE, TemporaryError("flaky"), got.memory, 200.0, got.failing_since, 0.5)
    assert again.memory.errors[CREATE.key].failures == 2
    assert again.memory.errors[CREATE.key].not_before == 220.0  # 20 s: the second in a row
    assert again.failing_since == 100.0  # the run of failures began at the first


def test_a_rate_limit_follows_googles_rule_timed_from_the_first_failure() -> None:
    error = TransientCloudError("429", status="RESOURCE_EXHAUSTED", code=429, delay=5.0)
    first = outcome(CREATE, error, mem.Memory(), 100.0, None, 0.5)
    assert first.memory.errors[CREATE.key].not_before == 100.0 + 0.5  # window 1 s, half drawn
    later = outcome(CREATE, error, first.memory, 130.0, first.failing_since, 1.0)
    # second failure: window min(120, 2, max(1, 30 s elapsed)) = 2 s, the whole window drawn
    assert later.memory.errors[CREATE.key].not_before == 132.0
    assert later.event.fields["delay"] == 2.0


def test_an_operation_still_running_waits_its_own_delay_and_is_no_failure() -> None:
    got = outcome(
        CREATE, OperationPending("running", operation="op-1", delay=5.0), mem.Memory(), 10.0,
        None, 0.9,
    )  # fmt: skip
    error = got.memory.errors[CREATE.key]
    assert (error.failures, error.not_before) == (0, 15.0)


def test_a_permanent_failure_blocks_under_the_actions_fingerprint() -> None:
    got = outcome(CREATE, PermanentCloudError("no quota"), mem.Memory(), 10.0, None, 0.5)
    assert got.memory.errors[CREATE.key].permanent_fingerprint == CREATE.fingerprint
    assert got.event.fields["retry"] == "permanent"
    assert got.event.fields["delay"] is None


def test_a_failed_setup_step_keeps_its_log_tail() -> None:
    error = SetupFailed("bootstrap exited 1", log_tail="line\n" * 1000)
    got = outcome(BOOTSTRAP, error, mem.Memory(), 10.0, None, 0.5)
    assert got.memory.errors[BOOTSTRAP.key].detail == ("line\n" * 1000)[-2000:]


def test_an_internal_error_backs_off_30_s_and_names_itself() -> None:
    got = outcome(CREATE, KeyError("x"), mem.Memory(), 10.0, 4.0, 0.5)
    error = got.memory.errors[CREATE.key]
    assert error.message == "internal error: KeyError('x')"
    assert error.not_before == 40.0
    assert error.permanent_fingerprint is None
    assert got.failing_since == 4.0  # a bug does not restart the world's run of failures
    assert dict(got.event.fields) == {
        "slot": "alpha",
        "action": "create",
        "error": "internal error: KeyError('x')",
        "retry": "transient",
    }


def test_a_success_forgets_failures_and_records_the_setup_step() -> None:
    failed = outcome(BOOTSTRAP, TemporaryError("x"), mem.Memory(), 10.0, None, 0.5).memory
    got = outcome(BOOTSTRAP, "done", failed, 20.0, 10.0, 0.5)
    assert BOOTSTRAP.key not in got.memory.errors
    assert got.memory.slot("alpha").setup["bootstrap"] == mem.setup_token("alpha@1", 3)
    assert got.failing_since is None
    assert got.event.kind == "action.succeeded"
    assert dict(got.event.fields) == {
        "slot": "alpha",
        "action": "bootstrap",
        "outcome": "done",
    }


def test_a_replace_counts_the_dead_qr() -> None:
    replace = Action(Kind.REPLACE, "alpha", Z, "dead", destructive=True)
    got = outcome(replace, "deleted", mem.Memory(), 20.0, None, 0.5)
    assert got.memory.slot("alpha").dead_in_a_row == 1


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (TemporaryError("x"), None),
        (TransientCloudError("400-ish", code=409), None),
        (TransientCloudError("503", code=503), 0.5),
        (OperationPending("running", operation="op", delay=4.0), 4.0),
    ],
)
def test_rule_delay_governs_only_429_5xx_and_running_operations(
    error: BaseException, expected: float | None
) -> None:
    assert rule_delay(error, 1, 0.0, 0.5) == expected
