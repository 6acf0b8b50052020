"""One per-key limiter for the actions and the observation (``runtime.backoff``)."""

from __future__ import annotations

from reconciler.core import retry
from reconciler.errors import PermanentCloudError, TransientCloudError
from reconciler.runtime.backoff import OBSERVE, Backoff

KEY = "us-central2-b/alpha:cloud"


def test_the_observations_run_counts_and_is_forgotten_on_success() -> None:
    b = Backoff()
    first = b.failed(OBSERVE, TransientCloudError("reset", delay=7.0), 100.0, 0.5)
    assert (first.since, first.failures, first.delay, first.retry) == (100.0, 1, 7.0, None)
    second = b.failed(OBSERVE, PermanentCloudError("403"), 130.0, 0.5)
    assert (second.since, second.failures, second.delay) == (100.0, 2, 60.0)
    b.succeeded(OBSERVE)
    assert b.run(OBSERVE) is None
    assert b.failed(OBSERVE, PermanentCloudError("403"), 200.0, 0.5).failures == 1


def test_a_rate_limited_observation_waits_by_googles_rule_never_under_the_floor() -> None:
    b = Backoff()
    limited = TransientCloudError("429", status="RESOURCE_EXHAUSTED", code=429)
    run = b.failed(OBSERVE, limited, 0.0, 0.0)  # a zero draw: the floor holds
    assert run.retry == run.delay == retry.OBSERVE_FLOOR
    later = b.failed(OBSERVE, limited, 1.0, 0.99)
    assert later.retry is not None and later.retry >= retry.OBSERVE_FLOOR


def test_an_actions_run_is_its_own_key() -> None:
    b = Backoff()
    b.failed(OBSERVE, PermanentCloudError("403"), 50.0, 0.5)
    b.keep(KEY, 10.0)  # the start of its run, as core.outcome hands it back
    assert b.since(KEY) == 10.0 and b.since(OBSERVE) == 50.0
    b.keep(KEY, None)  # succeeded
    assert b.since(KEY) is None and b.run(OBSERVE) is not None
