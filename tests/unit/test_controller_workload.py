"""The controller's workload wiring, with an in-memory port so the passes are exact: what it
sends, what it records before sending, what a restart does, and how long a hung probe holds a
pass."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from reconciler.core.plan import Action
from reconciler.core.workload_left import left_said
from reconciler.model.desired import Desired
from reconciler.model.observed import Node
from reconciler.model.workload import WorkerProbe
from reconciler.runtime.controller import Controller
from reconciler.runtime.events import read_events
from tests.support.fakeworkload import FakeWorkers, ReadyCloud
from tests.unit.test_controller_passes import make as make_controller
from tests.unit.test_controller_passes import settle

DESIRED = """\
project: test-project
slots:
  - name: alpha
    zone: us-central2-b
    accelerator: v4-32
    want: held
    workload: {command: python3 train.py, restart: on-failure, max_failures: 1}
defaults:
  setup: {tmux: false}
"""


def make(tmp_path: Path, cloud: ReadyCloud, workers: FakeWorkers) -> Controller:
    return make_controller(tmp_path, cloud, DESIRED, workloads=workers)


async def launched(tmp_path: Path) -> tuple[Controller, ReadyCloud, FakeWorkers]:
    cloud, workers = ReadyCloud(), FakeWorkers()
    c = make(tmp_path, cloud, workers)
    await c.reconcile()  # create
    await settle(c)
    result = await c.reconcile()  # ACTIVE + READY: launch
    assert [a.kind.value for a in result.dispatched] == ["launch"]
    await settle(c)
    return c, cloud, workers


async def test_launch_is_recorded_before_it_is_sent_and_a_restart_sends_no_second_copy(
    tmp_path: Path,
) -> None:
    cloud, workers = ReadyCloud(), FakeWorkers()
    c = make(tmp_path, cloud, workers)
    await c.reconcile()
    await settle(c)
    result = await c.reconcile()
    assert [a.kind.value for a in result.dispatched] == ["launch"]
    for task in c.in_flight.values():  # kill -9 after the pass, before the launch went out
        task.cancel()
    assert workers.sent == []

    again = make(tmp_path, cloud, workers)
    w = again.memory.workloads["alpha"]
    assert (w.phase, w.attempt) == ("starting", 1)  # recorded before sending
    result = await again.reconcile()  # probed: missing everywhere -> the same attempt again
    assert [(a.kind.value, a.workload.attempt) for a in result.dispatched if a.workload] == [
        ("launch", 1)
    ]
    await settle(again)
    ((slot, run_id, attempt),) = workers.started
    assert (slot, run_id, attempt) == ("alpha", w.run_id, 1)

    # killed again once it was sent, before it was seen running: probed alive, nothing sent
    third = make(tmp_path, cloud, workers)
    assert third.memory.workloads["alpha"].phase == "starting"
    for _ in range(3):
        assert (await third.reconcile()).dispatched == []
    assert third.memory.workloads["alpha"].phase == "running"
    assert workers.sent == [("alpha", run_id, 1)] and len(workers.started) == 1


async def test_a_worker_exit_stops_the_others_relaunches_then_gives_up(tmp_path: Path) -> None:
    c, _, workers = await launched(tmp_path)
    await c.reconcile()
    run_id = c.memory.workloads["alpha"].run_id
    workers.exit(("alpha", run_id, 1), 2, 1)
    result = await c.reconcile()
    assert [a.kind.value for a in result.dispatched] == ["stop"]
    await settle(c)
    assert workers.procs[("alpha", run_id, 1)] == [("exited", 143)] * 2 + [("exited", 1)] + [
        ("exited", 143)
    ]
    assert (await c.reconcile()).dispatched == []  # the relaunch waits out its backoff (10 s)
    assert c.memory.workloads["alpha"].phase == "pending"
    c.clock = lambda: time.time() + 10.0
    result = await c.reconcile()
    assert [(a.kind.value, a.workload.attempt) for a in result.dispatched if a.workload] == [
        ("launch", 2)
    ]
    await settle(c)
    await c.reconcile()
    workers.exit(("alpha", run_id, 2), 0, 3)
    await c.reconcile()
    await settle(c)
    for _ in range(3):
        await c.reconcile()
        await settle(c)
    w = c.memory.workloads["alpha"]
    assert (w.phase, w.failures, w.attempt) == ("gave-up", 2, 2)
    assert w.last_lines == ("worker 0 attempt 2", "exit 3")  # the failing worker's output
    assert len(workers.started) == 2
    states = [
        (e["before"], e["after"], e["attempt"])
        for e in read_events(c.state.events)
        if e["kind"] == "workload.state"
    ]
    assert states[:3] == [
        (None, "pending", 1),
        ("pending", "starting", 1),
        ("starting", "running", 1),
    ]
    assert ("failed", "stopping", 1) not in states and states[-1][1] == "gave-up"


async def test_a_hung_probe_holds_a_pass_no_longer_than_its_timeout_and_is_unknown(
    tmp_path: Path,
) -> None:
    c, _, workers = await launched(tmp_path)
    await c.reconcile()
    workers.probe_gate = asyncio.Event()  # the probe hangs until the gate opens
    c.prober.timeout = 0.3
    began = time.monotonic()
    result = await c.reconcile()
    took = time.monotonic() - began
    assert took < 1.5
    assert result.dispatched == []
    w = c.memory.workloads["alpha"]
    assert w.unknown and w.phase == "running" and w.failures == 0
    # The slow probe was not thrown away: once it answers, the next pass uses that answer.
    workers.exit(("alpha", w.run_id, 1), 3, 1)
    workers.probe_gate.set()
    await asyncio.sleep(0)
    result = await c.reconcile()
    assert [a.kind.value for a in result.dispatched] == ["stop"]
    assert c.memory.workloads["alpha"].failures == 1
    await settle(c)
    await c.drain()


async def test_each_ended_attempt_lands_in_the_capacity_history(tmp_path: Path) -> None:
    """Workload attempts in the history: the failed attempt 1 (exit 1 on a worker) and, once the
    relaunch succeeds, attempt 2 with exit 0 — each once, with its run id and cause."""
    import sqlite3

    from reconciler.runtime.history import HistoryRecorder

    c, _, workers = await launched(tmp_path)
    c.history = HistoryRecorder(c.state, c.events, batch_seconds=0.05)
    c.history.start()
    try:
        await c.reconcile()  # running
        run_id = c.memory.workloads["alpha"].run_id
        workers.exit(("alpha", run_id, 1), 2, 1)
        await c.reconcile()  # failed: stop the others
        await settle(c)
        c.clock = lambda: time.time() + 10.0  # past the restart backoff
        await c.reconcile()  # relaunch: attempt 2
        await settle(c)
        await c.reconcile()
        for index in range(4):
            workers.exit(("alpha", run_id, 2), index, 0)
        for _ in range(3):
            await c.reconcile()
            await settle(c)
        assert c.memory.workloads["alpha"].phase == "succeeded"
        assert c.history.flush()
    finally:
        c.history.close()
    with sqlite3.connect(c.state.history) as conn:
        rows = conn.execute(
            "SELECT (SELECT name FROM names WHERE id = run_id), attempt, exit_code,"
            " (SELECT name FROM names WHERE id = cause) FROM workload_attempts ORDER BY attempt"
        ).fetchall()
    assert [(r[0], r[1], r[2]) for r in rows] == [(run_id, 1, 1), (run_id, 2, 0)]
    assert rows[0][3].startswith("failed") and rows[1][3].startswith("succeeded")


@dataclass
class StuckWorkers(FakeWorkers):
    """Workers where the stop leaves processes behind (``stuck``: worker -> pids) that survive
    it, as the wrapper reports them: in stop's answer and in each probe while they are there."""

    stuck: dict[int, tuple[int, ...]] = field(default_factory=dict)

    async def workload_stop(self, desired: Desired, action: Action, node: Node) -> str | None:
        await super().workload_stop(desired, action, node)
        return left_said(self.stuck)

    async def workload_probe(
        self, desired: Desired, node: Node, slot: str, run_id: str, attempt: int
    ) -> tuple[WorkerProbe, ...]:
        seen = await super().workload_probe(desired, node, slot, run_id, attempt)
        return tuple(
            replace(p, left=self.stuck.get(p.index, ())) if p.state == "exited" else p for p in seen
        )


async def test_processes_left_after_a_stop_are_shown_and_hold_the_relaunch_back(
    tmp_path: Path,
) -> None:
    cloud, workers = ReadyCloud(), StuckWorkers()
    c = make(tmp_path, cloud, workers)
    await c.reconcile()
    await settle(c)
    await c.reconcile()
    await settle(c)
    await c.reconcile()
    run_id = c.memory.workloads["alpha"].run_id
    workers.stuck = {3: (4242,)}
    workers.exit(("alpha", run_id, 1), 2, 1)
    assert [a.kind.value for a in (await c.reconcile()).dispatched] == ["stop"]
    await settle(c)
    c.clock = lambda: time.time() + 60.0  # the restart backoff is long over
    for _ in range(3):
        assert (await c.reconcile()).dispatched == []
        w = c.memory.workloads["alpha"]
        assert (w.phase, w.attempt) == ("failed", 1) and "worker 3: pid 4242" in w.left
    events = read_events(c.state.events)
    (stopped,) = [e for e in events if e["kind"] == "action.succeeded" and e["action"] == "stop"]
    assert stopped["outcome"].startswith("stopped; processes left after the stop on worker 3")
    (shown,) = [e for e in events if e["kind"] == "workload.left"]
    assert (shown["attempt"], shown["detail"]) == (1, w.left)

    workers.stuck = {}  # gone (a reboot, its owner)
    result = await c.reconcile()
    assert [(a.kind.value, a.workload.attempt) for a in result.dispatched if a.workload] == [
        ("launch", 2)
    ]
    gone = [e for e in read_events(c.state.events) if e["kind"] == "workload.left"][-1]
    assert gone["detail"].startswith("gone")
