"""Which workload attempts ended between two memories, and how (the capacity history's rows)."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from reconciler.core import workload as wl
from reconciler.core import workload_memory as wlm
from reconciler.core.memory import Memory
from reconciler.core.workload_memory import PriorAttempt, WorkerSeen, WorkloadMemory
from reconciler.runtime.workloads import ended_attempts


def _mem(w: WorkloadMemory) -> Memory:
    return Memory(workloads=MappingProxyType({"a": w}))


RUNNING = WorkloadMemory(run_id="g0-x", generation=0, identity="i", phase="running", since=10.0)
RUNNING_SENT = replace(RUNNING, instance="n@1", started_at=4.0)  # sent at 4, running since 10


def test_a_failure_followed_at_once_by_the_next_attempt_is_recorded_as_failed() -> None:
    after = WorkloadMemory(
        run_id="g0-x", generation=0, identity="i", attempt=2, failures=1,
        phase="pending", detail="exit 1 on worker 0",
    )  # fmt: skip
    (ended,) = ended_attempts(_mem(RUNNING), _mem(after))
    assert (ended.attempt, ended.cause) == (1, "failed: exit 1 on worker 0")


def test_a_success_under_restart_always_is_recorded_as_succeeded() -> None:
    after = WorkloadMemory(
        run_id="g0-x", generation=0, identity="i", attempt=2, phase="pending",
        detail=wl.SUCCEEDED_BEFORE,
    )  # fmt: skip
    (ended,) = ended_attempts(_mem(RUNNING), _mem(after))
    assert (ended.cause, ended.exit_code) == ("succeeded", 0)


def test_a_new_run_supersedes_the_old_attempt_and_an_ended_one_keeps_its_exit() -> None:
    fresh = WorkloadMemory(run_id="g1-y", generation=1, identity="i")
    (ended,) = ended_attempts(_mem(RUNNING), _mem(fresh))
    assert ended.cause == "superseded"
    failed = WorkloadMemory(
        run_id="g0-x", generation=0, identity="i", failures=1, phase="failed",
        detail="exit 3 on worker 1", workers=(WorkerSeen(0, "alive"), WorkerSeen(1, "exited", 3)),
    )  # fmt: skip
    (ended,) = ended_attempts(_mem(RUNNING), _mem(failed))
    assert (ended.cause, ended.exit_code) == ("failed: exit 3 on worker 1", 3)


def test_an_empty_probe_is_no_evidence_that_workers_stopped_or_run() -> None:
    from reconciler.model.desired import WorkloadSpec

    spec = WorkloadSpec(command="python3 train.py")
    at = wl.Where(ready="n@1", workers=2, lost=False)
    for phase in ("stopping", "starting", "failed"):
        prev = WorkloadMemory(
            run_id="g0-x", generation=spec.generation, identity=spec.identity, policy=spec.policy,
            phase=phase, instance="n@1", relaunch=phase == "failed", since=1.0,
        )  # fmt: skip
        assert wl.fold(prev, spec, at, (), 2.0) == prev


def test_an_attempt_moved_on_from_at_once_keeps_its_exit_code_and_launch_time() -> None:
    sent = RUNNING_SENT.started_at
    after = WorkloadMemory(
        run_id="g0-x", generation=0, identity="i", attempt=2, failures=1, phase="starting",
        detail="exit 1 on worker 1", since=30.0, started_at=30.0,
        prior=PriorAttempt(
            1, "n@1", sent, (WorkerSeen(0, "exited", 0), WorkerSeen(1, "exited", 1))
        ),
    )  # fmt: skip
    (ended,) = ended_attempts(_mem(RUNNING_SENT), _mem(after))
    assert (ended.attempt, ended.exit_code, ended.cause) == (1, 1, "failed: exit 1 on worker 1")
    assert ended.started_at == sent


def test_an_attempt_starts_when_it_was_sent_not_when_it_last_changed_state() -> None:
    interrupted = replace(RUNNING_SENT, phase="interrupted", since=40.0, detail="node preempted")
    (ended,) = ended_attempts(_mem(RUNNING_SENT), _mem(interrupted))
    assert (ended.started_at, ended.cause) == (4.0, "interrupted: node preempted")
    (old,) = ended_attempts(_mem(RUNNING), _mem(replace(RUNNING, phase="interrupted")))
    assert old.started_at == RUNNING.since  # memory written before started_at existed


def test_launch_time_and_prior_attempt_survive_a_restart_and_old_files_load() -> None:
    w = replace(
        RUNNING_SENT,
        attempt=2,
        prior=PriorAttempt(1, "n@1", 1.0, (WorkerSeen(0, "exited", 1), WorkerSeen(1, "exited"))),
    )
    assert wlm.from_dict(wlm.to_dict(w)) == w
    old = wlm.to_dict(RUNNING)
    del old["started_at"], old["prior"]
    assert wlm.from_dict(old) == RUNNING
