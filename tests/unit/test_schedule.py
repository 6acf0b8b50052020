"""``core.schedule.next_interval``: the adaptive poll interval, as a pure function.

Slow when steady, fast while anything moves or an action is in flight, exponential backoff from
the fast interval after failed observations capped at the slow one, jitter within +-10 % — but
the fast interval (races are won on it) is only ever shortened, by up to 10 %.
``rand`` 0.5 is the slow interval's jitter-free midpoint and 0.0 the fast one's.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.core import memory as mem
from reconciler.core.schedule import JITTER, SETTLE, hurries, next_interval, watching
from reconciler.core.workload_memory import WorkerSeen, WorkloadMemory

SLOW, FAST = 30.0, 5.0


def interval(
    *,
    moving: bool = False,
    in_flight: int = 0,
    dispatched: int = 0,
    observe_failures: int = 0,
    error_delay: float = 0.0,
    rand: float = 0.5,
    slow: float = SLOW,
    fast: float = FAST,
) -> float:
    return next_interval(
        slow=slow,
        fast=fast,
        moving=moving,
        in_flight=in_flight,
        dispatched=dispatched,
        observe_failures=observe_failures,
        error_delay=error_delay,
        rand=rand,
    )


def test_steady_world_polls_at_the_slow_interval() -> None:
    assert interval() == SLOW


@pytest.mark.parametrize(
    "why",
    [
        {"moving": True},
        {"in_flight": 1},
        {"in_flight": 7},
        {"dispatched": 1},
        {"moving": True, "in_flight": 2, "dispatched": 2},
    ],
    ids=["moving", "one-in-flight", "many-in-flight", "just-dispatched", "all-at-once"],
)
def test_anything_in_motion_polls_at_the_fast_interval(why: dict[str, int]) -> None:
    assert interval(**why, rand=0.0) == FAST  # type: ignore[arg-type]
    assert interval(**why, rand=0.999999) == pytest.approx(FAST * 0.9)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("failures", "expected"),
    [(1, 5.0), (2, 10.0), (3, 20.0), (4, 30.0), (5, 30.0), (40, 30.0), (10_000, 30.0)],
)
def test_failed_observations_back_off_exponentially_up_to_the_slow_interval(
    failures: int, expected: float
) -> None:
    assert interval(observe_failures=failures) == expected


def test_backoff_wins_over_motion_so_a_broken_api_is_not_hammered() -> None:
    # In flight or moving would say "fast", but the last observation failed three times.
    assert interval(observe_failures=3, moving=True, in_flight=2) == 20.0


def test_a_longer_delay_hint_from_the_failure_is_honoured_within_the_cap() -> None:
    assert interval(observe_failures=1, error_delay=12.0) == 12.0
    assert interval(observe_failures=3, error_delay=12.0) == 20.0  # backoff already longer


def test_success_forgets_the_backoff() -> None:
    assert interval(observe_failures=0, error_delay=25.0) == SLOW
    assert interval(observe_failures=0, error_delay=25.0, moving=True, rand=0.0) == FAST


@pytest.mark.parametrize(
    ("rand", "factor"), [(0.0, 0.9), (0.25, 0.95), (0.5, 1.0), (0.75, 1.05), (0.999999, 1.1)]
)
def test_jitter_scales_linearly_within_ten_percent(rand: float, factor: float) -> None:
    assert interval(rand=rand) == pytest.approx(SLOW * factor, rel=1e-5)


@pytest.mark.parametrize("rand", [0.0, 0.25, 0.5, 0.75, 0.999999])
def test_jitter_only_ever_shortens_the_fast_interval(rand: float) -> None:
    # A race's losers must be cancelled within fast_poll_interval (+ a little): never later.
    assert interval(rand=rand, moving=True) == pytest.approx(FAST * (1 - JITTER * rand))


def test_never_shorter_than_the_settle_time() -> None:
    assert interval(moving=True, fast=0.01, rand=0.0) == SETTLE
    assert interval(slow=0.0, fast=0.0) == SETTLE


@given(
    slow=st.floats(1.0, 3600.0),
    fast_share=st.floats(0.01, 1.0),
    moving=st.booleans(),
    in_flight=st.integers(0, 50),
    dispatched=st.integers(0, 50),
    failures=st.integers(0, 100),
    rand=st.floats(0.0, 1.0, exclude_max=True),
)
def test_any_interval_is_its_base_within_jitter_and_never_beyond_the_slow_one(
    slow: float,
    fast_share: float,
    moving: bool,
    in_flight: int,
    dispatched: int,
    failures: int,
    rand: float,
) -> None:
    fast = slow * fast_share
    got = interval(
        slow=slow,
        fast=fast,
        moving=moving,
        in_flight=in_flight,
        dispatched=dispatched,
        observe_failures=failures,
        rand=rand,
    )
    if failures:
        base = min(slow, fast * 2.0 ** (failures - 1))
    elif moving or in_flight or dispatched:
        base = fast
    else:
        base = slow
    assert got >= SETTLE
    ceiling = base if (moving or in_flight or dispatched) and not failures else base * (1 + JITTER)
    if base * (1 - JITTER) >= SETTLE:
        assert base * (1 - JITTER) * (1 - 1e-9) <= got <= ceiling * (1 + 1e-9)
    assert got <= max(SETTLE, slow * (1 + JITTER) * (1 + 1e-9))


@pytest.mark.parametrize(
    ("cloud", "retrying", "fast"),
    [(True, False, True), (True, True, True), (False, False, True), (False, True, False)],
    ids=["cloud-first", "cloud-retry", "step-first", "step-retry"],
)
def test_only_a_step_retrying_after_a_failure_does_not_hurry(
    cloud: bool, retrying: bool, fast: bool
) -> None:
    # A setup or workload step sent again after its backoff is not news: its end wakes the
    # loop anyway, so it must not keep the controller on the fast interval.
    assert hurries(cloud=cloud, retrying=retrying) is fast


def _memory(phase: str, workers: tuple[WorkerSeen, ...], launch_failed: bool) -> mem.Memory:
    memory = mem.Memory(
        workloads={"a": WorkloadMemory(run_id="g0-x", generation=0, identity="i", phase=phase,
                                       instance="a@1", workers=workers)}
    )  # fmt: skip
    if launch_failed:
        memory = mem.record_failure(
            memory, "z1/a:launch", message="no machine", now=0.0, permanent=True,
            fingerprint="f",
        )  # fmt: skip
    return memory


@pytest.mark.parametrize(
    ("phase", "workers", "launch_failed", "fast"),
    [
        ("starting", (), False, True),  # sent: its start is noticed on the fast interval
        ("starting", (), True, False),  # its launch failed, nothing ever ran: nothing to notice
        ("starting", (WorkerSeen(0, "unknown"),), True, False),  # e.g. an emulated node
        ("starting", (WorkerSeen(0, "alive"), WorkerSeen(1, "unknown")), True, True),
        ("running", (WorkerSeen(0, "unknown"),), True, True),  # under way: its end matters
        ("pending", (), False, False),
    ],
)
def test_an_attempt_whose_launch_failed_before_it_ran_anywhere_is_not_watched(
    phase: str, workers: tuple[WorkerSeen, ...], launch_failed: bool, fast: bool
) -> None:
    assert watching(_memory(phase, workers, launch_failed), {"a": "z1"}) is fast
