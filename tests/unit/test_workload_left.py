"""Processes that outlive a stop (core/workload_left.py, the wrapper's ``left=``): the wire
parses them, the fold holds the next attempt back while a probe still finds them, and status,
NOTE and the ``workload.left`` event say so, alone and through the controller's loop over
pure parts."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reconciler.adapters.workload_wire import parse_probe, parse_stop
from reconciler.core import workload as wl
from reconciler.core import workload_left as left
from reconciler.core.status import build_status, workload_status
from reconciler.core.workload_memory import from_dict, to_dict
from reconciler.model.workload import WorkerProbe
from reconciler.runtime.workloads import transition_events
from tests.unit.test_plan_workload import ALIVE, JOB, Run, acts, backed_off, held, probes


def exited(*lefts: tuple[int, ...], code: int = 143) -> list[WorkerProbe]:
    return [WorkerProbe(i, "exited", exit_code=code, left=pids) for i, pids in enumerate(lefts)]


@pytest.mark.parametrize(
    ("answer", "pids"),
    [
        ("stopped", ()),
        ("stopped left=123", (123,)),
        ("stopped left=123,-456,456", (123, 456)),
        ("stopped left=12,x,0,99999999999", (12,)),
        ("error launch lock busy left=5", ()),
        ("", ()),
    ],
)
def test_a_stop_answer_names_what_survived(answer: str, pids: tuple[int, ...]) -> None:
    assert parse_stop(answer) == pids


@pytest.mark.parametrize(
    ("line", "pids"),
    [
        ("state=exited pid=10 started=1 code=143 output=- left=11,12", (11, 12)),
        ("state=exited pid=10 started=1 code=0 output=-", ()),
        ("state=alive pid=10 started=1 code=- output=- left=11", ()),  # only an exit names them
    ],
)
def test_a_probe_line_names_what_is_still_left(line: str, pids: tuple[int, ...]) -> None:
    assert parse_probe(0, line).left == pids


def test_the_text_names_each_worker_and_caps_the_pids() -> None:
    assert left.said({}) == "" and left.left_said({0: ()}) is None
    text = left.said({3: (7,), 0: tuple(range(100, 108))})
    assert text.startswith("processes left after the stop on worker 0: pid 100, 101, 102, 103, ")
    assert "104 (+3 more); worker 3: pid 7 (they survived SIGKILL)" in text
    assert text.endswith("no new attempt starts there until they are gone")
    assert left.probes_said(exited((), (9,))) == left.said({1: (9,)})


def test_a_failed_attempt_with_processes_left_relaunches_only_once_they_are_gone() -> None:
    run = Run(held())
    run.running()
    run_id = run.w.run_id
    p = run.step(probes("alive", "alive", "exited", "alive", codes=[0, 0, 1, 0]))
    assert acts(p) == [("stop", run_id, 1)]
    stuck = exited((), (4242,), (), ())
    for _ in range(3):  # the stop's kill deadline passed; the probe still finds pid 4242
        assert acts(run.step(stuck)) == []
        assert (run.w.phase, run.w.attempt) == ("failed", 1)
        assert "worker 1: pid 4242" in run.w.left
        assert wl.watching(run.memory)  # and it keeps being probed
        assert [s.name for s, _ in wl.probe_targets(run.want, run.seen, run.memory)] == ["a"]
    status = workload_status(run.w, JOB, run.now)
    assert status is not None and status.detail == f"exit 1 on worker 2; {run.w.left}"
    assert status.summary == "failed (exit 1 on worker 2)"  # the cell: NOTE says the rest
    assert from_dict(to_dict(run.w)) == replace(run.w, workers=run.w.workers)  # kept on restart
    # gone: the next attempt (its restart backoff ran out while they were there)
    assert acts(run.step(exited((), (), (), ()))) == [("launch", run_id, 2)]
    assert run.w.left == "" and run.w.attempt == 2


def test_gone_before_the_restart_backoff_ends_waits_for_its_end() -> None:
    run = Run(held())
    run.running()
    run.step(probes("alive", "alive", "exited", "alive", codes=[0, 0, 1, 0]))
    assert acts(run.step(exited((), (4242,), (), ()), dt=1)) == []
    assert acts(run.step(exited((), (), (), ()), dt=1)) == []
    assert acts(backed_off(run)) == [("launch", run.w.run_id, 2)]


def test_a_deliberate_stop_with_processes_left_starts_the_new_run_only_once_they_are_gone() -> None:
    run = Run(held())
    run.running()
    old = run.w.run_id
    run.want = held(replace(JOB, generation=1))
    assert acts(run.step(ALIVE)) == [("stop", old, 1)]
    for _ in range(2):
        assert acts(run.step(exited((77, 78), (), (), ()))) == []
        assert run.w.phase == "stopping" and run.w.run_id == old
    (launch,) = acts(run.step(exited((), (), (), ())))
    assert launch[0] == "launch" and launch[1] != old


def test_restart_always_waits_for_what_a_successful_attempt_left() -> None:
    run = Run(held(replace(JOB, restart="always")))
    run.running()
    assert acts(run.step(exited((), (), (5,), (), code=0))) == []
    assert (run.w.phase, run.w.attempt) == ("running", 1) and "pid 5" in run.w.left
    assert acts(run.step(exited((), (), (), (), code=0))) == [("launch", run.w.run_id, 2)]
    assert (run.w.attempt, run.w.detail) == (2, wl.SUCCEEDED_BEFORE) and run.w.left == ""


def test_memory_without_left_stays_as_it_was() -> None:
    run = Run(held())
    run.running()
    assert "left" not in to_dict(run.w)


def status_snapshot(run: Run) -> object:
    snap = build_status(
        desired=run.want, desired_file="d.yaml", errors=(), observation=run.seen,
        observed_at=run.now, memory=run.memory, plan=None, now=run.now, backend="fake",
    )  # fmt: skip
    return snap.slots[0].last_error


class _Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, object]]] = []

    def emit(self, kind: str, **fields: object) -> None:
        self.seen.append((kind, fields))


def test_workload_left_events_when_seen_and_when_gone_and_the_note_says_so() -> None:
    run = Run(held())
    run.running()
    run.step(probes("alive", "alive", "exited", "alive", codes=[0, 0, 1, 0]))
    events = _Events()
    before = run.memory
    run.step(exited((), (4242,), (), ()))
    transition_events(events, before, run.memory)  # type: ignore[arg-type]
    assert [(k, f["detail"]) for k, f in events.seen if k == "workload.left"] == [
        ("workload.left", run.w.left)
    ]
    assert status_snapshot(run) == run.w.left  # the NOTE column
    before, events.seen = run.memory, []
    run.step(exited((), (), (), ()))
    transition_events(events, before, run.memory)  # type: ignore[arg-type]
    (gone,) = [f for k, f in events.seen if k == "workload.left"]
    assert str(gone["detail"]).startswith("gone") and gone["attempt"] == 1
    assert status_snapshot(run) is None
