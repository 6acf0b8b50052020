"""The restart backoff (core/workload_backoff.py), alone and through the controller's loop over
pure parts with a fake clock: a command that exits 1 at once under ``restart: always`` is
relaunched after 10 s, 20 s, 40 s ... up to 5 min; 10 minutes of healthy running start the
streak over; a preemption or a success waits for nothing; status says ``restarting in 40s``."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core import workload_backoff as backoff
from reconciler.core.render import status_rows
from reconciler.core.status import workload_status, workload_summary
from reconciler.core.workload_memory import from_dict, to_dict
from reconciler.model.status import SlotStatus, StatusSnapshot
from reconciler.surfaces.tui._frame import SlotRow
from tests.support.worlds import qr, world
from tests.unit.test_plan_workload import ALIVE, JOB, Run, acts, held, probes, v4_32

CRASH = replace(JOB, restart="always", max_failures=20)
DEAD = probes("exited", "exited", "exited", "exited", codes=[1, 1, 1, 1])


def test_the_delay_doubles_from_10s_to_5min() -> None:
    delays = [backoff.restart_delay(n) for n in range(0, 9)]
    assert delays == [0, 10, 20, 40, 80, 160, 300, 300, 300]
    assert backoff.restart_delay(10_000) == 300  # no overflow for a very long streak
    assert backoff.after_failure(3, 0.0, 100.0) == (4, 180.0)
    assert backoff.after_failure(3, 600.0, 100.0) == (1, 110.0)  # healthy 10 min: over again


def relaunch_gaps(run: Run, failures: int, *, ran: float = 0.0) -> list[float]:
    """Each attempt is seen running, runs ``ran`` seconds more, then every worker exits 1 half
    a second later; per failure, seconds from it to the next launch (a 1 s clock step)."""
    gaps = []
    for _ in range(failures):
        assert run.step(ALIVE, dt=1.0).empty and run.w.phase == "running"
        if ran:
            assert run.step(ALIVE, dt=ran).empty
        assert acts(run.step(DEAD, dt=0.5)) == []  # failed: every worker gone, attempt n+1 waits
        failed_at = run.now
        while not (launch := acts(run.step(dt=1.0))):
            assert run.now - failed_at < 400
        assert launch == [("launch", run.w.run_id, run.w.attempt)]
        gaps.append(run.now - failed_at)
    return gaps


def test_a_crash_loop_is_relaunched_with_growing_delays() -> None:
    run = Run(held(CRASH))
    run.running()
    gaps = relaunch_gaps(run, 8)
    assert gaps == [10, 20, 40, 80, 160, 300, 300, 300]
    assert (run.w.failures, run.w.attempt, run.w.streak) == (8, 9, 8)


def test_ten_minutes_of_healthy_running_start_the_streak_over() -> None:
    run = Run(held(CRASH))
    run.running()
    assert relaunch_gaps(run, 3) == [10, 20, 40]
    assert relaunch_gaps(run, 1, ran=600.0) == [10]  # it had run 10 min: a fresh streak
    assert relaunch_gaps(run, 2, ran=599.0) == [20, 40]  # short of 10 min: the streak goes on


def test_on_failure_backs_off_and_giving_up_still_counts_every_failure() -> None:
    run = Run(held(replace(JOB, restart="on-failure", max_failures=2)))
    run.running()
    assert relaunch_gaps(run, 2) == [10, 20]
    run.step(ALIVE)
    run.step(DEAD)
    assert (run.w.phase, run.w.failures) == ("gave-up", 3)


def test_a_success_or_a_preemption_is_relaunched_at_once() -> None:
    run = Run(held(CRASH))
    run.running()
    relaunch_gaps(run, 2)  # a streak of 2 ...
    run.step(ALIVE)
    done = probes("exited", "exited", "exited", "exited", codes=[0, 0, 0, 0])
    assert acts(run.step(done)) == [("launch", run.w.run_id, run.w.attempt)]  # ... no wait
    run.step(ALIVE)
    attempt = run.w.attempt
    run.seen = world(qr("a", state=QRState.SUSPENDED, initiator="SERVICE"))
    run.step()
    run.seen = v4_32(uid="2002")
    assert acts(run.step()) == [("launch", run.w.run_id, attempt + 1)]


def test_status_says_restarting_in_and_counts_down() -> None:
    run = Run(held(CRASH))
    run.running()
    relaunch_gaps(run, 2)
    run.step(ALIVE)
    run.step(DEAD)  # the third failure in a row: 40 s before attempt 4
    failed_at = run.now
    assert backoff.restart_due(run.memory, run.now) == failed_at + 40
    shown = workload_summary(run.w, CRASH, failed_at)
    assert shown == "pending · attempt 4 · 3/20 failures · restarting in 40s"
    status = workload_status(run.w, CRASH, failed_at)
    assert status is not None and status.restart_at is not None
    # `status` renders the snapshot later: the wait counts down from the time it holds
    snapshot = StatusSnapshot(slots=(SlotStatus(name="a", managed=True, workload=status),))
    (row,) = status_rows(snapshot, failed_at + 25.5)
    assert row[-2] == "pending · attempt 4 · 3/20 failures · restarting in 15s"
    (row,) = status_rows(snapshot, failed_at + 41)
    assert "restarting" not in row[-2]
    # the TUI's workload cell
    cell = SlotRow(name="a", workload="pending a4", restart_at=failed_at + 40).cells(failed_at + 1)
    assert "pending a4 · restarting in 39s" in cell
    assert "pending a4" in SlotRow(name="a", workload="pending a4").cells(failed_at)
    assert workload_status(run.w, CRASH, failed_at + 40).restart_at is None  # type: ignore[union-attr]


@pytest.mark.parametrize("streak, not_before", [(0, None), (3, 1_000_123.5)])
def test_memory_keeps_the_streak_and_writes_nothing_new_without_one(
    streak: int, not_before: float | None
) -> None:
    run = Run(held(CRASH))
    run.running()
    w = replace(run.w, streak=streak, not_before=not_before)
    doc = to_dict(w)
    assert ("streak" in doc, "not_before" in doc) == (bool(streak), not_before is not None)
    assert from_dict(doc) == w
    with pytest.raises(ValueError):
        from_dict({**to_dict(w), "not_before": float("inf")})
