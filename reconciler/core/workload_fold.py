"""Workload memory, step one: fold the evidence of one pass into each slot's ``WorkloadMemory``.

``observe(memory, desired, observation, probes, now)`` applies the left column of the decision
table in ``core/workload.py`` (probes and the node's fate) to the memory; ``core/workload``
then decides actions from the result and re-exports the names callers use (``observe``,
``fold``, ``where``, ``Where``, ``new_run``, ``Probes``, ``SUCCEEDED_BEFORE``), so callers
import that module alone; this one never imports it back. The attempt number moves only
here, on evidence; an *unknown* probe changes nothing.

No I/O, no clock (``now`` is an argument), no await.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Final

from reconciler.core.chip_use import step as chip_step
from reconciler.core.memory import Memory
from reconciler.core.telemetry import idle_check
from reconciler.core.workload_backoff import after_failure, healthy_for
from reconciler.core.workload_health import adopted, lost_worker, make_run_id, unsent
from reconciler.core.workload_left import probes_said
from reconciler.core.workload_memory import PriorAttempt, WorkerSeen, WorkloadMemory
from reconciler.model.capacity import RequestState
from reconciler.model.desired import Desired, SlotSpec, WorkloadSpec
from reconciler.model.durations import format_duration
from reconciler.model.observed import NodeState, Observation
from reconciler.model.workload import WorkerProbe

Probes = Mapping[str, Sequence[WorkerProbe]]  # slot -> one probe per worker

#: Phases in which an attempt may have processes on the node (probed every pass).
LIVE: Final = frozenset({"starting", "running", "stopping"})
#: Phases after a failure: probed while some worker may still run (to stop it).
AFTER_FAILURE: Final = frozenset({"failed", "gave-up"})
_GONE_NODE: Final = frozenset({NodeState.PREEMPTED, NodeState.TERMINATED, NodeState.DELETING})
#: The detail of an attempt that follows a successful one (``restart: always``).
SUCCEEDED_BEFORE: Final = "previous attempt succeeded"


# --- where the attempt runs ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Where:
    """The slot's node as this observation sees it."""

    ready: str | None  # instance of an ACTIVE request's READY node with endpoints, else None
    workers: int  # its endpoint count
    lost: bool  # the instance the attempt was sent to is gone for sure


def where(observed: Observation, spec: SlotSpec, sent_to: str | None) -> Where:
    if not observed.knows(spec.zone):
        return Where(None, 0, False)
    request = observed.request(spec.zone, spec.name)
    node = observed.node(spec.zone, (request.node_name if request else None) or spec.name)
    ready = None
    if (
        request is not None
        and request.state == RequestState.ACTIVE
        and node is not None
        and node.state == NodeState.READY
        and node.endpoints
    ):
        ready = node.instance
    lost = sent_to is not None and (
        request is None
        or request.state not in (RequestState.ACTIVE, RequestState.PROVISIONING)
        or node is None
        or node.instance != sent_to
        or node.state in _GONE_NODE
    )
    return Where(ready, len(node.endpoints) if node is not None else 0, lost)


# --- memory rules ----------------------------------------------------------------------------


def new_run(w: WorkloadSpec, now: float) -> WorkloadMemory:
    """A fresh run: id from the generation, the command and the time it was decided (unique
    per slot, a path component on the workers; ``workload_health``), attempt 1, no failures."""
    run_id = make_run_id(w.generation, w.identity, now)
    return WorkloadMemory(
        run_id=run_id, generation=w.generation, identity=w.identity, policy=w.policy, since=now
    )


def _running(seen: Sequence[WorkerProbe]) -> bool:
    """Some worker may still run the attempt (alive, or not reachable to tell), or still has
    processes of it that survived the stop (``core/workload_left``)."""
    return any(p.state in ("alive", "unknown") or p.left for p in seen)


def ran(workers: Sequence[WorkerSeen]) -> bool:
    """The last probe's summary says some worker may still run (or nothing was seen yet)."""
    return not workers or any(s.state in ("alive", "unknown") for s in workers)


def _summarise(prev: WorkloadMemory, seen: Sequence[WorkerProbe]) -> WorkloadMemory:
    times = [t for p in seen for t in (p.last_output_at, p.started_at) if t is not None]
    if prev.last_output_at is not None:
        times.append(prev.last_output_at)
    return replace(
        prev,
        workers=tuple(
            WorkerSeen(p.index, p.state, p.exit_code, p.telemetry.chips if p.telemetry else None)
            for p in seen
        ),
        unknown=any(p.state == "unknown" for p in seen),
        last_output_at=max(times) if times else None,
        left=probes_said(seen),
    )


def _next_attempt(
    prev: WorkloadMemory, w: WorkloadSpec, now: float, **kw: object
) -> WorkloadMemory:
    """The next attempt, pending; ``prior`` keeps where, when and how the one before ran (its
    detail and ``last_lines`` stay too, until this one ends). ``not_before`` (after a failure:
    the restart backoff) holds its launch back until then."""
    fields: dict[str, object] = {
        "attempt": prev.attempt + 1,
        "phase": "pending",
        "instance": None,
        "since": now,
        "relaunch": False,
        "stop_for": "",
        "unknown": False,
        "workers": (),
        "last_output_at": None,
        "after_preemption": False,
        "policy": w.policy,
        "started_at": None,
        "prior": PriorAttempt(prev.attempt, prev.instance, prev.started_at, prev.workers),
        "missing_since": None,
        "idle_since": None,
        "chip_use": None,
        "not_before": None,
        "left": "",
    }
    fields.update(kw)
    return replace(prev, **fields)  # type: ignore[arg-type]


def _fail(
    prev: WorkloadMemory, w: WorkloadSpec, detail: str, seen: Sequence[WorkerProbe], now: float
) -> WorkloadMemory:
    failures = prev.failures + 1
    may = w.restart in ("on-failure", "always")
    if may and failures <= w.max_failures:
        streak, not_before = after_failure(prev.streak, healthy_for(prev, now), now)
        failed = replace(
            prev, phase="failed", relaunch=True, failures=failures, detail=detail, since=now,
            streak=streak, not_before=not_before,
        )  # fmt: skip
        if _running(seen):
            return failed
        return _next_attempt(failed, w, now, not_before=not_before)
    phase = "gave-up" if may else "failed"
    return replace(prev, phase=phase, relaunch=False, failures=failures, detail=detail, since=now)


def exit_detail(seen: Sequence[WorkerProbe]) -> str | None:
    bad = [p for p in seen if p.state == "exited" and p.exit_code != 0]
    if not bad:
        return None
    first = min(bad, key=lambda p: p.index)
    code = "killed" if first.exit_code is None else f"exit {first.exit_code}"
    more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
    return f"{code} on worker {first.index}{more}"


def started(wm: WorkloadMemory) -> bool:
    """The attempt in play was seen to run: a worker alive or exited, or it got that far."""
    return wm.phase == "running" or any(s.state in ("alive", "exited") for s in wm.workers)


def released(prev: WorkloadMemory, now: float) -> WorkloadMemory:
    """The attempt in play ends because its slot was released (``release`` says why): as
    *released* when it had started, else *not-started*."""
    why = prev.release or "slot released"
    return replace(
        prev,
        phase="released" if started(prev) else "not-started",
        since=now,
        detail=why,
        unknown=False,
        relaunch=False,
    )


def _stopped(prev: WorkloadMemory, w: WorkloadSpec | None, now: float) -> WorkloadMemory | None:
    """A deliberate stop is over (every worker gone, or the node itself)."""
    if w is None:
        return None
    if prev.stop_for == "released" and (prev.generation, prev.identity) == (
        w.generation,
        w.identity,
    ):
        return released(prev, now)
    return new_run(w, now)


def fold(
    prev: WorkloadMemory | None,
    w: WorkloadSpec | None,
    at: Where,
    probes: Sequence[WorkerProbe] | None,
    now: float,
) -> WorkloadMemory | None:
    """One slot's workload memory after this pass's evidence (see the module's table)."""
    if prev is None:
        return new_run(w, now) if w is not None else None
    here = prev.instance is not None and prev.instance == at.ready
    seen = probes if probes and here else None  # no probe, or none answered: no evidence
    if seen is not None:
        prev = _summarise(prev, seen)
    if prev.phase == "stopping":
        if at.lost or prev.instance is None or (seen is not None and not _running(seen)):
            return _stopped(prev, w, now)
        return prev
    if w is None or (prev.generation, prev.identity) != (w.generation, w.identity):
        # Removed or changed: the old attempt is stopped first (the planner says so).
        if seen is not None:
            busy = _running(seen)
        else:
            busy = prev.phase in LIVE or (prev.phase in AFTER_FAILURE and ran(prev.workers))
            busy = busy or bool(prev.left)
        if at.lost or prev.instance is None or not busy:
            return None if w is None else new_run(w, now)
        return prev
    final = prev.phase == "gave-up" or (prev.phase == "failed" and not prev.relaunch)
    if final and prev.policy != w.policy:  # the workload changed: a fresh budget
        prev = replace(prev, phase="failed", relaunch=True, failures=0, policy=w.policy)
        running = _running(seen) if seen is not None else ran(prev.workers)
        if not running:
            return _next_attempt(prev, w, now)
    if at.lost:
        if prev.release and prev.phase in ("starting", "running"):
            return released(prev, now)  # the release took its node: not a preemption
        if prev.phase in ("starting", "running") or (prev.phase == "failed" and prev.relaunch):
            return replace(
                prev,
                phase="interrupted",
                since=now,
                detail="node preempted or re-created",
                unknown=False,
                relaunch=False,
            )
        return prev
    if seen is None:
        return prev
    if prev.phase in ("starting", "running"):
        took = adopted(prev.run_id, prev.attempt, seen) if prev.phase == "starting" else None
        if took is not None:  # launched before a restart that could not remember it
            run_id, attempt = took
            detail = f"took over run {run_id} attempt {attempt}, already launched"
            return replace(prev, run_id=run_id, attempt=attempt, workers=(), detail=detail)
        bad = exit_detail(seen)
        if bad is not None:
            return _fail(prev, w, bad, seen, now)
        gap_since, lost = lost_worker(seen, prev.missing_since, now)
        if lost is not None:
            return _fail(replace(prev, missing_since=None), w, lost, seen, now)
        prev = replace(prev, missing_since=gap_since)
        chips = [p.telemetry.chips if p.telemetry else None for p in seen]
        if prev.phase == "running":
            use = chip_step(prev.chip_use, chips, now, w.idle_below)
            prev = replace(prev, chip_use=use) if use != prev.chip_use else prev
        idle_since, idle = idle_check(
            chips if prev.phase == "running" else [], prev.idle_since, now, w.idle_after,
            w.idle_below,
        )  # fmt: skip
        if idle is not None:
            return _fail(replace(prev, idle_since=None), w, idle, seen, now)
        prev = replace(prev, idle_since=idle_since) if idle_since != prev.idle_since else prev
        known = not any(p.state == "unknown" for p in seen)
        if known and seen and all(p.state == "exited" for p in seen):
            if w.restart == "always" and prev.left:  # the next one waits until they are gone
                return prev
            if w.restart == "always":
                return _next_attempt(prev, w, now, detail=SUCCEEDED_BEFORE)
            return replace(prev, phase="succeeded", since=now, detail="every worker exited 0")
        last = max(t for t in (prev.last_output_at, prev.since) if t is not None)
        alive = any(p.state == "alive" for p in seen)
        if known and alive and w.stall_after and now - last >= w.stall_after:
            quiet = format_duration(now - last)
            return _fail(prev, w, f"stalled: no output from any worker for {quiet}", seen, now)
        if prev.phase == "starting" and known and all(p.state != "missing" for p in seen):
            return replace(prev, phase="running", since=now)
        if prev.phase == "running" and seen and all(p.state == "missing" for p in seen):
            return replace(
                prev, phase="interrupted", since=now, detail="its records vanished from the node"
            )
        return prev
    if prev.phase == "failed" and prev.relaunch and not _running(seen):
        return _next_attempt(prev, w, now, not_before=prev.not_before)
    return prev


def observe(
    memory: Memory, desired: Desired | None, observed: Observation, probes: Probes, now: float
) -> Memory:
    """Fold one pass's observation and probes into every slot's workload memory."""
    if desired is None:
        return memory
    workloads = dict(memory.workloads)
    for spec in desired.slots:
        prev = workloads.get(spec.name)
        if prev is None and spec.workload is None:
            continue
        if not observed.knows(spec.zone):
            continue
        at = where(observed, spec, prev.instance if prev else None)
        new = fold(prev, spec.workload, at, probes.get(spec.name), now)
        if new is not None:  # a launch that started nothing anywhere says why
            error = memory.error(f"{spec.zone}/{spec.name}:launch")
            message = error.message if error else None
            why = unsent(new.phase, [s.state for s in new.workers], message)
            new = replace(new, unsent=why) if why != new.unsent else new
        if new is None:
            workloads.pop(spec.name, None)
        elif new != prev:
            workloads[spec.name] = new
    if workloads == dict(memory.workloads):
        return memory
    return replace(memory, workloads=MappingProxyType(workloads))
