"""Chip telemetry's pure rules (core/telemetry.py) and the probe's answers (adapters/telemetry):
the idle clock with the time passed in, unknown never counting, the status figure of the least
busy worker, stray holders, and the idle failure through the controller's loop over pure parts
(fold, plan, notices)."""

from __future__ import annotations

from dataclasses import replace

from reconciler.adapters.telemetry import parse
from reconciler.core import telemetry as tm
from reconciler.core.status import workload_status
from reconciler.core.workload_memory import WorkerSeen, from_dict, to_dict
from reconciler.model.telemetry import ChipReading, TpuHolder, WorkerTelemetry
from reconciler.model.workload import WorkerProbe
from tests.unit.test_plan_workload import JOB, Run, acts, held

GIB = 1024**3


def chips(*duty: float | None, used: int | None = 7 * GIB) -> tuple[ChipReading, ...]:
    return tuple(ChipReading(i, d, used, 8 * GIB) for i, d in enumerate(duty))


def alive(*workers: tuple[ChipReading, ...] | None) -> list[WorkerProbe]:
    return [
        WorkerProbe(i, "alive", telemetry=None if c is None else WorkerTelemetry(chips=c))
        for i, c in enumerate(workers)
    ]


# --- the idle clock ----------------------------------------------------------------------------


def test_every_chip_idle_starts_the_clock_and_fails_once_it_lasted() -> None:
    idle = [chips(0.2, 0.0), chips(0.5, 0.9)]
    since, failed = tm.idle_check(idle, None, 100.0, 60.0, 1.0)
    assert (since, failed) == (100.0, None)
    since, failed = tm.idle_check(idle, since, 159.0, 60.0, 1.0)
    assert (since, failed) == (100.0, None)
    since, failed = tm.idle_check(idle, since, 160.0, 60.0, 1.0)
    assert since == 100.0
    assert failed == "idle: TensorCore duty cycle < 1% on all 4 chips for 1m"


def test_one_busy_chip_or_one_unknown_figure_stops_the_clock() -> None:
    assert tm.idle_check([chips(0.2, 1.0)], 100.0, 500.0, 60.0, 1.0) == (None, None)  # at 1%
    assert tm.idle_check([chips(0.2, None)], 100.0, 500.0, 60.0, 1.0) == (None, None)
    assert tm.idle_check([chips(0.2), None], 100.0, 500.0, 60.0, 1.0) == (None, None)  # not read
    assert tm.idle_check([chips(0.2), ()], 100.0, 500.0, 60.0, 1.0) == (None, None)  # vanished
    assert tm.idle_check([chips(0.2)], 100.0, 500.0, None, 1.0) == (None, None)  # off
    assert tm.idle_check([], 100.0, 500.0, 60.0, 1.0) == (None, None)


def test_idle_chips_fail_the_attempt_it_is_stopped_relaunched_and_a_notice_goes_out() -> None:
    run = Run(held(replace(JOB, idle_after=120.0, idle_below=1.0)))
    run.running()
    busy = alive(chips(97.0, 95.0), chips(99.0, 98.0))
    idle = alive(chips(0.1, 0.0), chips(0.3, 0.2))
    assert run.step(busy).empty and run.w.idle_since is None
    assert run.step(idle).empty
    started = run.w.idle_since
    assert started == run.now
    run.step(alive(chips(0.1, 0.0), None), dt=60)  # a worker not read: the clock stops
    assert run.w.idle_since is None
    run.step(idle)
    run.step(idle, dt=60)
    assert run.w.phase == "running"
    p = run.step(idle, dt=60)
    assert run.w.phase == "failed" and run.w.failures == 1 and run.w.relaunch
    assert run.w.detail == "idle: TensorCore duty cycle < 1% on all 4 chips for 2m"
    assert acts(p) == [("stop", run.w.run_id, 1)]
    assert [n.event for n in p.notices] == ["workload-idle"]
    assert "relaunching" in p.notices[0].message
    assert run.step(idle).notices == ()  # said once
    gone = [WorkerProbe(i, "exited", exit_code=143) for i in range(2)]
    p = run.step(gone)
    assert acts(p) == [("launch", run.w.run_id, 2)]


def test_vanished_metrics_never_fail_an_attempt() -> None:
    run = Run(held(replace(JOB, idle_after=60.0)))
    run.running()
    for _ in range(20):
        assert run.step(alive((), ()), dt=30).empty
    assert (run.w.phase, run.w.failures) == ("running", 0)


def test_the_idle_clock_survives_a_restart_of_the_controller() -> None:
    run = Run(held(replace(JOB, idle_after=60.0)))
    run.running()
    run.step(alive(chips(0.0)))
    assert from_dict(to_dict(run.w)).idle_since == run.w.idle_since is not None
    assert "idle_since" not in to_dict(replace(run.w, idle_since=None))  # older files unchanged


# --- what users see --------------------------------------------------------------------------


def test_the_figure_is_the_least_busy_workers() -> None:
    assert tm.figure([chips(97.0, 99.0), chips(10.0, 20.0, used=3 * GIB)]) == (
        "TPU 15% · HBM 6/16 GiB"
    )
    assert tm.figure([chips(97.0), chips(None), None]) == "TPU 97% · HBM 7/8 GiB"
    assert tm.figure([chips(50.0, used=None)]) == "TPU 50% · HBM ?"
    assert tm.figure([(), None]) == "TPU ? · HBM ?"
    assert tm.figure([None, None]) == ""  # telemetry off: nothing said


def test_status_carries_every_chip_and_the_figure() -> None:
    run = Run(held(replace(JOB, idle_after=60.0)))
    run.running()
    run.step(alive(chips(97.0, None), None))
    shown = workload_status(run.w, JOB, run.now)
    assert shown is not None
    assert shown.tpu == "TPU 97% · HBM 14/16 GiB"
    assert [c.duty_cycle for c in shown.workers[0].chips] == [97.0, None]
    assert shown.workers[1].chips == ()
    assert run.w.workers[0] == WorkerSeen(0, "alive", None, chips(97.0, None))


# --- stray holders ---------------------------------------------------------------------------


def holder(pid: int, slot: str | None = None) -> TpuHolder:
    return TpuHolder(pid, "python3", "alice", 7300.0, "/dev/accel0", slot=slot)


def test_holders_that_are_not_this_workload_are_strays_and_said_on_one_line() -> None:
    seen = [
        (0, WorkerTelemetry(holders=(holder(4242), holder(17, slot="a")))),
        (1, None),  # not read: nothing known, nothing blocked
        (2, WorkerTelemetry(holders=(holder(99, slot="b"),))),
    ]
    found = tm.strays("a", seen)
    assert [(w, h.pid) for w, h in found] == [(0, 4242), (2, 99)]
    assert tm.holders_text(found) == (
        "TPU held by pid 4242 `python3` (user alice, 2h1m) on worker 0 (+1 more)"
    )
    assert tm.strays("a", [(0, WorkerTelemetry(holders=(holder(17, slot="a"),)))]) == []
    assert tm.holders_text([]) == ""


def test_the_probe_answer_is_read_and_what_it_lacks_is_unknown() -> None:
    got = parse(
        {
            "chips": [
                {"index": 0, "duty": 97.5, "hbm_used": 7, "hbm_total": 8, "holders": [12]},
                {"index": 1, "duty": None, "hbm_used": True},
            ],
            "holders": [{"pid": 12, "command": "python3", "user": "bob", "device": "/dev/accel0"}],
            "metrics": "",
        }
    )
    assert got.chips == (ChipReading(0, 97.5, 7, 8, (12,)), ChipReading(1))
    assert got.holders == (TpuHolder(12, "python3", "bob", None, "/dev/accel0"),)
    assert parse({"chips": [], "metrics": "port 8431: _InactiveRpcError"}).metrics.startswith(
        "port 8431"
    )


def test_every_surface_shows_the_figure_only_with_telemetry() -> None:
    from reconciler.core.render import _workload
    from reconciler.intent.views import format_slot_info
    from reconciler.model.status import ChipStatus, WorkerStatus, WorkloadStatus
    from reconciler.surfaces.tui._frame import _workload_cell

    plain = WorkloadStatus(state="running", attempt=2)
    chips = (ChipStatus(0, 97.0, 7 * GIB, 8 * GIB, (41,)), ChipStatus(1))
    told = replace(
        plain, tpu="TPU 97% · HBM 28/32 GiB", workers=(WorkerStatus(0, "alive", chips=chips),)
    )
    assert _workload(told, 0.0) == "running · attempt 2 · TPU 97% · HBM 28/32 GiB"  # status
    assert _workload(plain, 0.0) == "running · attempt 2"
    assert _workload_cell(told) == "running a2 · TPU 97%"  # the TUI's column
    assert _workload_cell(plain) == "running a2"
    info = format_slot_info(
        {
            "name": "a",
            "chips": {"tpu": told.tpu, "workers": [{"index": 0, "chips": [
                {"index": 0, "duty_cycle": 97.0, "hbm_used": 7 * GIB, "hbm_total": 8 * GIB,
                 "holders": [41]},
                {"index": 1, "duty_cycle": None, "hbm_used": None, "hbm_total": None},
            ]}]},
        }
    )  # fmt: skip
    assert "chips: TPU 97% · HBM 28/32 GiB (least busy worker)" in info
    assert "  w0: 0 97% 7.0/8.0 GiB pids 41  1 ? ?" in info
    assert "chips:" not in format_slot_info({"name": "a"})
