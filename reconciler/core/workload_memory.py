"""What the controller remembers about each slot's workload, and its plain-dict form.

One ``WorkloadMemory`` per slot: the run (id, generation, identity of what runs), the attempt
in play and where it was sent, the failures counted against ``max_failures``, the phase and
since when, and the last probe's summary. It is persisted with the rest of memory so that a
controller killed with -9 and restarted continues the same attempt: the attempt number only
moves on evidence (a probe, a node that is gone), never on a restart.

The rules that change it live in ``core.workload``; this module only holds and (de)serialises.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

from reconciler.core import chip_use as cu
from reconciler.model.telemetry import ChipReading

#: Phases kept in memory (the user-facing states minus "unknown", which is a probe result).
PHASES: Final = frozenset(
    {
        "pending",  # the attempt is not sent yet: launched once the node is set up
        "starting",  # sent to ``instance``, not yet seen alive on every worker
        "running",
        "succeeded",
        "failed",  # the attempt failed; ``relaunch`` says whether another follows
        "stopping",  # a deliberate stop (``stop_for``) was sent
        "interrupted",  # the node it ran on is gone (preempted, re-created)
        "gave-up",
        "released",  # the attempt ended because its slot was released (``release`` says why)
        "not-started",  # the slot was released before the attempt ever started
    }
)


@dataclass(frozen=True, slots=True)
class WorkerSeen:
    index: int
    state: str  # a WorkerState
    exit_code: int | None = None
    #: the chips as the last probe read them (None: not read); only shown, never saved
    chips: tuple[ChipReading, ...] | None = None


@dataclass(frozen=True, slots=True)
class PriorAttempt:
    """The attempt of this run that came before the one in play, kept when the fold moved on
    from it (every worker had exited in one pass, so it was never *failed* or *succeeded* in
    memory on its own): where and when it was sent and its workers' exit codes, for its log
    tail and its capacity-history row."""

    attempt: int
    instance: str | None
    started_at: float | None
    workers: tuple[WorkerSeen, ...] = ()


@dataclass(frozen=True, slots=True)
class WorkloadMemory:
    run_id: str
    generation: int
    identity: str  # WorkloadSpec.identity of the run
    policy: str = ""  # WorkloadSpec.policy when the phase was last decided
    attempt: int = 1
    failures: int = 0
    phase: str = "pending"
    since: float = 0.0
    instance: str | None = None  # node instance the attempt was sent to; None = not sent
    last_output_at: float | None = None
    detail: str = ""  # "exit 1 on worker 2", "no output for 30m", "node preempted"
    relaunch: bool = False  # phase failed: another attempt follows once every worker stopped
    stop_for: str = ""  # phase stopping: removed | released | changed
    unknown: bool = False  # the last probe could not reach every worker
    workers: tuple[WorkerSeen, ...] = ()
    after_preemption: bool = False  # the attempt in play follows an interruption
    last_lines: tuple[str, ...] = ()  # the telling worker's last output when it ended
    started_at: float | None = None  # when the attempt in play was first sent; None = not sent
    prior: PriorAttempt | None = None  # the attempt before it, when the fold moved on at once
    missing_since: float | None = None  # a launched worker answers "missing" while others run
    unsent: str = ""  # phase starting: why the launch started nothing anywhere ("" = sent)
    idle_since: float | None = None  # every chip of every worker idle since (``idle_after``)
    chip_use: cu.ChipUse | None = None  # the attempt's duty cycle and idle time so far
    streak: int = 0  # failures in a row, for the restart backoff (core/workload_backoff)
    not_before: float | None = None  # phase pending: the relaunch after a failure waits until
    left: str = ""  # processes of the attempt left after its stop (core/workload_left), "" none
    #: why its slot is released, while the planner says so ("lost the race", "want: released",
    #: a hold's end): an attempt that ends then ends as released, never as interrupted
    release: str = ""


def to_dict(w: WorkloadMemory) -> dict[str, Any]:
    return {
        "run_id": w.run_id,
        "generation": w.generation,
        "identity": w.identity,
        "policy": w.policy,
        "attempt": w.attempt,
        "failures": w.failures,
        "phase": w.phase,
        "since": w.since,
        "instance": w.instance,
        "last_output_at": w.last_output_at,
        "detail": w.detail,
        "relaunch": w.relaunch,
        "stop_for": w.stop_for,
        "unknown": w.unknown,
        "workers": _workers_to_list(w.workers),
        "after_preemption": w.after_preemption,
        "last_lines": list(w.last_lines),
        "started_at": w.started_at,
        "prior": None if w.prior is None else _prior_to_dict(w.prior),
        # written only when set: files of earlier versions stay byte-identical
        **({"missing_since": w.missing_since} if w.missing_since is not None else {}),
        **({"unsent": w.unsent} if w.unsent else {}),
        **({"idle_since": w.idle_since} if w.idle_since is not None else {}),
        **({"chip_use": cu.to_dict(w.chip_use)} if w.chip_use is not None else {}),
        **({"streak": w.streak} if w.streak else {}),
        **({"not_before": w.not_before} if w.not_before is not None else {}),
        **({"left": w.left} if w.left else {}),
        **({"release": w.release} if w.release else {}),
    }


def _workers_to_list(workers: tuple[WorkerSeen, ...]) -> list[list[Any]]:
    return [[s.index, s.state, s.exit_code] for s in workers]


def _workers_from_list(d: Any) -> tuple[WorkerSeen, ...]:
    return tuple(WorkerSeen(int(i), str(s), None if c is None else int(c)) for i, s, c in d)


def _prior_to_dict(p: PriorAttempt) -> dict[str, Any]:
    return {
        "attempt": p.attempt,
        "instance": p.instance,
        "started_at": p.started_at,
        "workers": _workers_to_list(p.workers),
    }


def _optional_float(v: Any) -> float | None:
    return None if v is None else float(v)


def _prior_from_dict(d: Any) -> PriorAttempt | None:
    if d is None:
        return None
    if not isinstance(d, dict):
        raise ValueError("workload memory's prior attempt must be an object")
    instance = d.get("instance")
    return PriorAttempt(
        attempt=int(d["attempt"]),
        instance=None if instance is None else str(instance),
        started_at=_optional_float(d.get("started_at")),
        workers=_workers_from_list(d.get("workers", [])),
    )


def from_dict(d: Any) -> WorkloadMemory:
    """Raises ValueError (or TypeError/KeyError, which memory.from_dict translates)."""
    if not isinstance(d, dict):
        raise ValueError("workload memory must be an object")
    phase = str(d.get("phase", "pending"))
    if phase not in PHASES:
        raise ValueError(f"unknown workload phase {phase!r}")
    instance = d.get("instance")
    w = WorkloadMemory(
        run_id=str(d["run_id"]),
        generation=int(d["generation"]),
        identity=str(d["identity"]),
        policy=str(d.get("policy", "")),
        attempt=int(d.get("attempt", 1)),
        failures=int(d.get("failures", 0)),
        phase=phase,
        since=float(d.get("since", 0.0)),
        instance=None if instance is None else str(instance),
        last_output_at=_optional_float(d.get("last_output_at")),
        detail=str(d.get("detail", "")),
        relaunch=bool(d.get("relaunch", False)),
        stop_for=str(d.get("stop_for", "")),
        unknown=bool(d.get("unknown", False)),
        workers=_workers_from_list(d.get("workers", [])),
        after_preemption=bool(d.get("after_preemption", False)),
        last_lines=tuple(str(line) for line in d.get("last_lines", [])),
        started_at=_optional_float(d.get("started_at")),  # absent in files before it existed
        prior=_prior_from_dict(d.get("prior")),
        missing_since=_optional_float(d.get("missing_since")),
        unsent=str(d.get("unsent", "")),
        idle_since=_optional_float(d.get("idle_since")),
        chip_use=cu.from_dict(d.get("chip_use")),
        streak=int(d.get("streak", 0)),
        not_before=_optional_float(d.get("not_before")),
        left=str(d.get("left", "")),
        release=str(d.get("release", "")),
    )
    optional = (
        w.last_output_at,
        w.started_at,
        w.prior.started_at if w.prior else None,
        w.missing_since,
        w.idle_since,
        w.not_before,
    )
    times = [w.since] + [t for t in optional if t is not None]
    counts = (w.attempt < 1, w.failures < 0, w.streak < 0)
    if not all(math.isfinite(t) for t in times) or any(counts):
        raise ValueError("workload memory holds an impossible time or count")
    return w
