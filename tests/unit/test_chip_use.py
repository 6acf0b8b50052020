"""An attempt's chip use (pure): time-weighted duty-cycle p50, idle periods, memory round trip,
the fold that feeds it, and the ``history`` rendering of attempts."""

from __future__ import annotations

from dataclasses import replace

from reconciler.core import chip_use as cu
from reconciler.core.attempt_report import attempt_dict, format_attempts
from reconciler.core.history import WorkloadAttempt
from reconciler.core.workload_fold import Where, fold
from reconciler.core.workload_memory import WorkloadMemory, from_dict, to_dict
from reconciler.model.desired import WorkloadSpec
from reconciler.model.telemetry import ChipReading, WorkerTelemetry
from reconciler.model.workload import WorkerProbe


def chips(*duties: float | None) -> tuple[ChipReading, ...]:
    return tuple(ChipReading(i, d, 10, 20) for i, d in enumerate(duties))


def walk(readings: list[tuple[float, list[tuple[ChipReading, ...] | None]]]) -> cu.ChipUse | None:
    use: cu.ChipUse | None = None
    for now, workers in readings:
        use = cu.step(use, workers, now, 1.0)
    return use


def test_no_reading_ever_taken_is_no_chip_use() -> None:
    assert walk([(0, [None, None]), (30, [None])]) is None
    assert cu.summary(None, 100) is None


def test_p50_is_weighted_by_how_long_each_reading_stood() -> None:
    # 10 s at 90%, then 200 s at 20%: by count of readings 90% would be half; by time, 20%
    use = walk([(0, [chips(90, 90)]), (10, [chips(20, 20)]), (210, [chips(20, 20)])])
    summary = cu.summary(use, 210)
    assert summary is not None
    assert summary.duty_p50 == 20.0
    busy = cu.summary(walk([(0, [chips(90)]), (200, [chips(20)])]), 210)
    assert busy is not None and busy.duty_p50 == 90.0  # 200 s at 90%, then 10 s at 20%


def test_the_figure_is_the_mean_of_known_chips_across_workers() -> None:
    assert cu.reading([chips(100, None), chips(50, 0)], 1.0) == (50.0, False)
    assert cu.reading([chips(None), None], 1.0) == (None, False)


def test_idle_periods_count_runs_of_all_idle_readings_and_unknown_breaks_them() -> None:
    use = walk(
        [
            (0, [chips(50), chips(50)]),
            (60, [chips(0.5), chips(0)]),  # idle from here ...
            (120, [chips(0.2), chips(0.1)]),
            (180, [chips(60), chips(0)]),  # ... to here: 120 s
            (240, [chips(0), chips(0)]),  # idle again ...
            (270, [chips(0), None]),  # ... until a worker is not read: 30 s
            (300, [chips(0), chips(0)]),  # a third period, still running at the end
        ]
    )
    summary = cu.summary(use, 340)
    assert summary is not None
    assert (summary.idle_periods, summary.idle_seconds, summary.idle_longest) == (3, 190.0, 120.0)


def test_a_gap_counts_at_most_max_gap_and_unknown_time_is_left_out_of_the_p50() -> None:
    use = walk([(0, [chips(0)]), (10_000, [None]), (20_000, [chips(80)])])
    summary = cu.summary(use, 20_000 + cu.MAX_GAP / 2)
    assert summary is not None
    assert summary.idle_seconds == cu.MAX_GAP  # not the 10 000 s the controller did not see
    assert summary.duty_p50 == 0.0  # 300 s at 0%, 150 s at 80%; unknown time not counted


def test_chip_use_survives_the_memory_file_and_older_files_have_none() -> None:
    use = walk([(0, [chips(40)]), (30, [chips(0)])])
    wm = WorkloadMemory(run_id="r", generation=1, identity="i", phase="running", chip_use=use)
    assert from_dict(to_dict(wm)) == wm
    plain = to_dict(WorkloadMemory(run_id="r", generation=1, identity="i"))
    assert "chip_use" not in plain  # files without telemetry stay as they were
    assert from_dict(plain).chip_use is None


def _probe(i: int, duty: float | None) -> WorkerProbe:
    return WorkerProbe(i, "alive", telemetry=WorkerTelemetry(chips=chips(duty)))


def test_the_fold_feeds_a_running_attempt_and_a_new_attempt_starts_afresh() -> None:
    spec = WorkloadSpec(command="x", restart="always")
    here = Where("inst", 2, False)
    wm = WorkloadMemory(
        run_id="r", generation=spec.generation, identity=spec.identity, policy=spec.policy,
        phase="running", instance="inst", since=0.0, started_at=0.0,
    )  # fmt: skip
    wm1 = fold(wm, spec, here, [_probe(0, 70), _probe(1, 90)], 10.0)
    wm2 = fold(wm1, spec, here, [_probe(0, 10), _probe(1, 30)], 40.0)
    assert wm1 is not None and wm2 is not None and wm2.chip_use is not None
    assert (wm2.chip_use.duty, wm2.chip_use.seconds) == (20.0, ((80, 30.0),))
    exited = [WorkerProbe(0, "exited", exit_code=0), WorkerProbe(1, "exited", exit_code=0)]
    nxt = fold(wm2, spec, here, exited, 50.0)
    assert nxt is not None and nxt.attempt == 2 and nxt.chip_use is None
    starting = fold(replace(wm, phase="starting"), spec, here, [_probe(0, 70), _probe(1, 90)], 10.0)
    assert starting is not None and starting.chip_use is None  # only a running attempt counts


def _attempt(n: int, chips_: cu.ChipSummary | None) -> WorkloadAttempt:
    return WorkloadAttempt(
        "a", "europe-west4-a", "v6e-8", "r-1", n, 1_764_583_200.0, 1_764_583_200.0 + 7500,
        1, "failed: idle: TensorCore duty cycle < 1% on all 4 chips for 20m", chips_,
    )  # fmt: skip


def test_attempts_in_the_history_document_and_table() -> None:
    with_chips = _attempt(2, cu.ChipSummary(97.0, 2, 1500.0, 1200.0))
    without = _attempt(1, None)
    doc = attempt_dict(with_chips)
    assert (doc["duty_cycle_p50"], doc["idle_periods"], doc["idle_seconds"]) == (97.0, 2, 1500.0)
    assert doc["longest_idle_seconds"] == 1200.0 and doc["started_at"] == "2025-12-01T10:00:00Z"
    assert attempt_dict(without)["duty_cycle_p50"] is None
    assert attempt_dict(without)["idle_periods"] is None
    text = format_attempts([with_chips, without])
    lines = text.splitlines()
    assert lines[1] == "Workload attempts, newest first:"
    assert "TPU p50" in lines[2] and "IDLE" in lines[2]
    assert "97%" in lines[3] and "2 x 25m (longest 20m)" in lines[3] and "2h5m" in lines[3]
    assert lines[4].split()[6:8] == ["-", "-"]  # no telemetry: no figures
    assert format_attempts([]) == ""
    many = format_attempts([_attempt(n, None) for n in range(25, 0, -1)], shown=20)
    assert many.splitlines()[-1] == "(+5 older: history --json lists every attempt)"


def test_the_attempt_launched_after_an_interruption_starts_afresh() -> None:
    from types import MappingProxyType

    from reconciler.core.memory import Memory
    from reconciler.core.workload import WorkloadAct, record_sent

    use = walk([(0, [chips(40)]), (30, [chips(0)])])
    wm = WorkloadMemory(
        run_id="r", generation=0, identity="i", phase="interrupted", attempt=1, chip_use=use
    )
    memory = Memory(workloads=MappingProxyType({"a": wm}))
    resent = record_sent(memory, "a", WorkloadAct("launch", "r", 1, why="resend"), "n", 40.0)
    assert resent.workloads["a"].chip_use == use  # the same attempt sent again keeps it
    after = record_sent(memory, "a", WorkloadAct("launch", "r", 2, why="preempted"), "n2", 40.0)
    assert after.workloads["a"].chip_use is None
