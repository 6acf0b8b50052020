"""Which workload attempts ended between two memories, and how (the capacity history's rows)."""

from __future__ import annotations

from types import MappingProxyType

from reconciler.core import workload as wl
from reconciler.core.memory import Memory
from reconciler.core.workload_memory import WorkerSeen, WorkloadMemory
from reconciler.runtime.workloads import ended_attempts


def _mem(w: WorkloadMemory) -> Memory:
    return Memory(workloads=MappingProxyType({"a": w}))


RUNNING = WorkloadMemory(run_id="g0-x", generation=0, identity="i", phase="running", since=10.0)


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
