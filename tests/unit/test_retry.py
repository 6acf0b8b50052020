"""Google's retry rule for 429 / 5xx (``core.retry``): tables, properties, and the two stories
the issue names — a short burst must not delay recovery by more than ~30 s after it ends, a
storm that does not end must settle at about one attempt a minute."""

from __future__ import annotations

import random
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.core import retry
from reconciler.core.schedule import next_interval


@pytest.mark.parametrize(
    ("attempt", "window"),
    [(0, 0.0), (1, 1.0), (2, 2.0), (3, 4.0), (6, 32.0), (7, 64.0), (8, 120.0), (50, 120.0)],
)
def test_the_window_doubles_from_one_second_and_is_truncated(attempt: int, window: float) -> None:
    assert retry.window(attempt) == window


@pytest.mark.parametrize(
    ("attempt", "rand", "retry_after", "delay"),
    [
        (1, 0.0, None, 0.0),  # full jitter: may retry at once
        (1, 0.999, None, 0.999),
        (4, 0.5, None, 4.0),
        (20, 0.5, None, 60.0),
        (1, 0.5, 30.0, 30.0),  # Retry-After is a floor
        (20, 0.9, 30.0, 108.0),  # ... not a ceiling
        (1, 0.5, 10**9, retry.RETRY_AFTER_CAP),  # a hostile header cannot park us for ages
        (1, 0.5, -5.0, 0.5),
    ],
)
def test_delay_table(attempt: int, rand: float, retry_after: float | None, delay: float) -> None:
    assert retry.retry_delay(attempt, rand, retry_after) == pytest.approx(delay)


@pytest.mark.parametrize(
    ("status", "code", "governed"),
    [
        ("RESOURCE_EXHAUSTED", 429, True),
        (None, 429, True),
        (None, 503, True),
        ("UNAVAILABLE", None, True),
        ("INTERNAL", 500, True),
        ("DEADLINE_EXCEEDED", None, True),
        ("FAILED_PRECONDITION", 400, False),  # heals as the QR moves: the controller's backoff
        ("UNAUTHENTICATED", 401, False),
        ("ABORTED", 409, False),
        (None, None, False),
    ],
)
def test_what_the_rule_governs(status: str | None, code: int | None, governed: bool) -> None:
    assert retry.governs(status, code) is governed


@given(
    attempt=st.integers(min_value=1, max_value=10_000),
    rand=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
    retry_after=st.none() | st.floats(min_value=0.0, max_value=1e12),
)
def test_delay_stays_inside_the_window_or_at_retry_after(
    attempt: int, rand: float, retry_after: float | None
) -> None:
    delay = retry.retry_delay(attempt, rand, retry_after)
    floor = min(retry_after or 0.0, retry.RETRY_AFTER_CAP)
    assert 0.0 <= delay <= max(retry.window(attempt), floor)
    assert delay >= floor


@given(attempt=st.integers(min_value=1, max_value=60), rand=st.floats(0.0, 0.999))
def test_delay_grows_with_the_attempt_for_the_same_draw(attempt: int, rand: float) -> None:
    assert retry.retry_delay(attempt + 1, rand) >= retry.retry_delay(attempt, rand)


@given(delay=st.floats(min_value=0.0, max_value=3600.0), failures=st.integers(1, 40))
def test_a_governed_observation_failure_waits_the_rules_delay_at_least_the_fast_interval(
    delay: float, failures: int
) -> None:
    got = next_interval(
        slow=30.0, fast=5.0, moving=True, in_flight=0, dispatched=0,
        observe_failures=failures, error_delay=60.0, retry=delay,
    )  # fmt: skip
    assert got == max(5.0, delay)


def simulate(burst: float, seed: int) -> tuple[float, int]:
    """Attempts under the rule while every answer is a 429 for ``burst`` seconds: (how long
    after the burst ended the first attempt came, attempts made)."""
    rng = random.Random(seed)
    t, attempts, failures = 0.0, 0, 0
    while True:
        attempts += 1
        if t >= burst:
            return t - burst, attempts
        failures += 1
        t += retry.retry_delay(failures, rng.random(), elapsed=t)


@pytest.mark.parametrize("burst", [2.0, 5.0, 10.0, 30.0])
def test_a_short_burst_delays_recovery_by_at_most_its_own_length(burst: float) -> None:
    lags = [simulate(burst, seed)[0] for seed in range(2000)]
    assert max(lags) <= burst + retry.BASE
    assert statistics.median(lags) <= burst / 2


@pytest.mark.parametrize(
    ("attempt", "elapsed", "window"),
    [(8, 0.0, 1.0), (8, 0.5, 1.0), (8, 10.0, 10.0), (8, 500.0, 120.0), (3, 500.0, 4.0)],
)
def test_the_window_is_truncated_by_the_outages_age(
    attempt: int, elapsed: float, window: float
) -> None:
    assert retry.window(attempt, elapsed) == window


def test_a_storm_settles_at_about_one_attempt_per_minute() -> None:
    hour = 3600.0
    rates = []
    for seed in range(200):
        _, attempts = simulate(hour, seed)
        rates.append(attempts / 60.0)
    mean = statistics.mean(rates)
    # ~8 quick attempts in the first two minutes, then one a minute on average
    assert 0.9 <= mean <= 1.25, mean
