"""Workload decisions: when to launch, stop, relaunch or give up, from probes and memory.

Two pure steps, both called with the world as arguments:

- ``observe(memory, desired, observation, probes, now)`` folds the evidence of one pass into
  each slot's ``WorkloadMemory``: a probe that saw every worker alive makes the attempt
  *running*; a non-zero exit (or ``stall_after`` without output) makes it *failed* and counts
  one failure; every worker exited 0 makes it *succeeded*; a node that is gone (preempted,
  re-created, released) makes it *interrupted* without counting anything. An *unknown* probe
  (SSH down, timeout) changes nothing. The attempt number moves only here, on evidence.
- ``decide(...)``, called by ``core.plan`` for each slot, turns that memory into plan actions
  (``~ launch``, ``~ stop``) and notices; ``when_done_releases`` is the release rule for
  ``when_done: release`` (``core.control`` applies it).

The decision table (restart: never | on-preemption | on-failure | always):

=====================================  ===================================================
all workers exited 0                   succeeded; no relaunch (``always``: next attempt);
                                       ``when_done: release`` releases the slot
a worker exited non-zero, or stalled   failed, one failure: stop the others; relaunch when
                                       restart is on-failure/always and failures <=
                                       max_failures, else gave-up (or failed, for never /
                                       on-preemption); nothing relaunched until the
                                       generation is bumped or the workload changes
node preempted / re-created            interrupted: on the new node, once set up, the next
                                       attempt of the same run (restart != never);
                                       failures unchanged
workload removed, slot released,       stop (grace, then kill); a bump or a changed command
generation bumped or command changed   then starts a new run id
a probe is unknown                     nothing: never a failure, never a relaunch
=====================================  ===================================================

No I/O, no clock (``now`` is an argument), no await.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Final, Literal

from reconciler.core.memory import Memory
from reconciler.core.workload_health import adopted, lost_worker, make_run_id, unsent
from reconciler.core.workload_memory import PriorAttempt, WorkerSeen, WorkloadMemory
from reconciler.model.desired import Desired, SlotSpec, WorkloadSpec
from reconciler.model.durations import format_duration
from reconciler.model.observed import NodeState, Observation, QRState
from reconciler.model.status import WorkerStatus, WorkloadStatus
from reconciler.model.workload import LaunchRequest, WorkerProbe, WorkloadState

Probes = Mapping[str, Sequence[WorkerProbe]]  # slot -> one probe per worker

#: Phases in which an attempt may have processes on the node (probed every pass).
_LIVE: Final = frozenset({"starting", "running", "stopping"})
#: Phases after a failure: probed while some worker may still run (to stop it).
_AFTER_FAILURE: Final = frozenset({"failed", "gave-up"})
_GONE_NODE: Final = frozenset({NodeState.PREEMPTED, NodeState.TERMINATED, NodeState.DELETING})
#: The grace a stop uses when the workload block is gone from the file.
DEFAULT_GRACE: Final = 60.0
#: The detail of an attempt that follows a successful one (``restart: always``).
SUCCEEDED_BEFORE: Final = "previous attempt succeeded"


@dataclass(frozen=True, slots=True)
class WorkloadAct:
    """What a ``~ launch`` / ``~ stop`` action carries besides the slot and node instance."""

    verb: Literal["launch", "stop"]
    run_id: str
    attempt: int
    grace: float = DEFAULT_GRACE
    why: str = ""  # launch: start | relaunch | resend | preempted; stop: failed | removed |
    #                released | changed


@dataclass(frozen=True, slots=True)
class WorkloadNotice:
    key: str
    event: str  # "gave-up" | "succeeded" | "relaunched" | "workload-failed"
    title: str
    message: str


@dataclass(frozen=True, slots=True)
class Decision:
    acts: tuple[tuple[WorkloadAct, str], ...] = ()  # (act, reason)
    notices: tuple[WorkloadNotice, ...] = ()
    warning: str | None = None


# --- where the attempt runs ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Where:
    """The slot's node as this observation sees it."""

    ready: str | None  # instance of an ACTIVE QR's READY node with endpoints, else None
    workers: int  # its endpoint count
    lost: bool  # the instance the attempt was sent to is gone for sure


def where(observed: Observation, spec: SlotSpec, sent_to: str | None) -> Where:
    if not observed.knows(spec.zone):
        return Where(None, 0, False)
    qr = observed.qr(spec.zone, spec.name)
    node = observed.node(spec.zone, (qr.node_id if qr else None) or spec.name)
    ready = None
    if (
        qr is not None
        and qr.state == QRState.ACTIVE
        and node is not None
        and node.state == NodeState.READY
        and node.endpoints
    ):
        ready = node.instance
    lost = sent_to is not None and (
        qr is None
        or qr.state not in (QRState.ACTIVE, QRState.PROVISIONING)
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
    """Some worker may still run the attempt (alive, or not reachable to tell)."""
    return any(p.state in ("alive", "unknown") for p in seen)


def _ran(workers: Sequence[WorkerSeen]) -> bool:
    """The last probe's summary says some worker may still run (or nothing was seen yet)."""
    return not workers or any(s.state in ("alive", "unknown") for s in workers)


def _summarise(prev: WorkloadMemory, seen: Sequence[WorkerProbe]) -> WorkloadMemory:
    times = [t for p in seen for t in (p.last_output_at, p.started_at) if t is not None]
    if prev.last_output_at is not None:
        times.append(prev.last_output_at)
    return replace(
        prev,
        workers=tuple(WorkerSeen(p.index, p.state, p.exit_code) for p in seen),
        unknown=any(p.state == "unknown" for p in seen),
        last_output_at=max(times) if times else None,
    )


def _next_attempt(
    prev: WorkloadMemory, w: WorkloadSpec, now: float, **kw: object
) -> WorkloadMemory:
    """The next attempt, pending; ``prior`` keeps where, when and how the one before ran (its
    detail and ``last_lines`` stay too, until this one ends)."""
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
    }
    fields.update(kw)
    return replace(prev, **fields)  # type: ignore[arg-type]


def _fail(
    prev: WorkloadMemory, w: WorkloadSpec, detail: str, seen: Sequence[WorkerProbe], now: float
) -> WorkloadMemory:
    failures = prev.failures + 1
    may = w.restart in ("on-failure", "always")
    if may and failures <= w.max_failures:
        failed = replace(
            prev, phase="failed", relaunch=True, failures=failures, detail=detail, since=now
        )
        return _next_attempt(failed, w, now) if not _running(seen) else failed
    phase = "gave-up" if may else "failed"
    return replace(prev, phase=phase, relaunch=False, failures=failures, detail=detail, since=now)


def _exit_detail(seen: Sequence[WorkerProbe]) -> str | None:
    bad = [p for p in seen if p.state == "exited" and p.exit_code != 0]
    if not bad:
        return None
    first = min(bad, key=lambda p: p.index)
    code = "killed" if first.exit_code is None else f"exit {first.exit_code}"
    more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
    return f"{code} on worker {first.index}{more}"


def _stopped(prev: WorkloadMemory, w: WorkloadSpec | None, now: float) -> WorkloadMemory | None:
    """A deliberate stop is over (every worker gone, or the node itself)."""
    if w is None:
        return None
    if prev.stop_for == "released" and (prev.generation, prev.identity) == (
        w.generation,
        w.identity,
    ):
        return replace(
            prev, phase="interrupted", since=now, detail="stopped: slot released", unknown=False
        )
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
            busy = prev.phase in _LIVE or (prev.phase in _AFTER_FAILURE and _ran(prev.workers))
        if at.lost or prev.instance is None or not busy:
            return None if w is None else new_run(w, now)
        return prev
    final = prev.phase == "gave-up" or (prev.phase == "failed" and not prev.relaunch)
    if final and prev.policy != w.policy:  # the workload changed: a fresh budget
        prev = replace(prev, phase="failed", relaunch=True, failures=0, policy=w.policy)
        running = _running(seen) if seen is not None else _ran(prev.workers)
        if not running:
            return _next_attempt(prev, w, now)
    if at.lost:
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
        bad = _exit_detail(seen)
        if bad is not None:
            return _fail(prev, w, bad, seen, now)
        gap_since, lost = lost_worker(seen, prev.missing_since, now)
        if lost is not None:
            return _fail(replace(prev, missing_since=None), w, lost, seen, now)
        prev = replace(prev, missing_since=gap_since)
        known = not any(p.state == "unknown" for p in seen)
        if known and seen and all(p.state == "exited" for p in seen):
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
        return _next_attempt(prev, w, now)
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


def probe_targets(
    desired: Desired | None, observed: Observation, memory: Memory
) -> list[tuple[SlotSpec, WorkloadMemory]]:
    """Slots whose attempt may have processes on the node it was sent to, which is READY."""
    out = []
    for spec in desired.slots if desired else ():
        wm = memory.workload(spec.name)
        if wm is None or wm.instance is None:
            continue
        if wm.phase in _AFTER_FAILURE:
            # Only while a worker may still run (to stop it); the first look always.
            if not _ran(wm.workers):
                continue
        elif wm.phase not in _LIVE:
            continue
        if where(observed, spec, wm.instance).ready == wm.instance:
            out.append((spec, wm))
    return out


def watching(memory: Memory) -> bool:
    """Some attempt is starting, running, stopping or has workers left to stop: poll fast, so
    an exit is noticed within one fast interval."""
    return any(
        w.phase in _LIVE or (w.phase in _AFTER_FAILURE and _ran(w.workers))
        for w in memory.workloads.values()
    )


#: How much of a worker's output ``last_lines`` keeps.
TAIL_LINES: Final = 10
TAIL_WIDTH: Final = 300
_ENDED: Final = frozenset({"failed", "gave-up", "succeeded"})


@dataclass(frozen=True, slots=True)
class TailWanted:
    slot: str
    run_id: str
    attempt: int
    instance: str  # the node instance the attempt ran on
    worker: int  # whose output tells why it ended


def _telling(workers: Sequence[WorkerSeen]) -> int:
    """The first worker that exited non-zero, else worker 0."""
    bad = [s.index for s in workers if s.state == "exited" and s.exit_code != 0]
    return min(bad) if bad else 0


def tails_wanted(before: Memory, after: Memory) -> list[TailWanted]:
    """Attempts that just ended (failed, gave up, succeeded) and the worker whose output tells
    why — also one the fold moved on from at once to the next attempt (its ``prior``)."""
    out = []
    for slot, w in after.workloads.items():
        old = before.workload(slot)
        ended_now = w.phase in _ENDED and (old is None or old.phase not in _ENDED)
        p = w.prior
        if ended_now and w.instance is not None:
            out.append(TailWanted(slot, w.run_id, w.attempt, w.instance, _telling(w.workers)))
        elif (
            p is not None
            and p.instance is not None
            and old is not None
            and old.phase in ("starting", "running")
            and (old.run_id, old.attempt) == (w.run_id, p.attempt)
        ):
            out.append(TailWanted(slot, w.run_id, p.attempt, p.instance, _telling(p.workers)))
    return out


def record_tail(
    memory: Memory, slot: str, run_id: str, attempt: int, lines: Sequence[str]
) -> Memory:
    """Keep the end of the telling worker's output with the attempt it came from (or with the
    next one, when the fold moved on from it at once: the tail stays until that one ends)."""
    w = memory.workload(slot)
    if w is None or w.run_id != run_id:
        return memory
    if attempt != w.attempt and (w.prior is None or w.prior.attempt != attempt):
        return memory
    kept = tuple(line[:TAIL_WIDTH] for line in list(lines)[-TAIL_LINES:])
    new = replace(w, last_lines=kept)
    return replace(memory, workloads=MappingProxyType({**memory.workloads, slot: new}))


def record_sent(memory: Memory, slot: str, act: WorkloadAct, instance: str, now: float) -> Memory:
    """The controller is about to send ``act`` (recorded before it goes out, saved with the
    pass: after a kill -9 the same attempt is probed and, if missing, sent again — the
    worker's lock makes a repeat a no-op)."""
    prev = memory.workload(slot)
    if prev is None:
        return memory
    if act.verb == "launch":
        resend = prev.phase == "starting" and prev.attempt == act.attempt
        new = replace(
            prev,
            attempt=act.attempt,
            phase="starting",
            instance=instance,
            since=now if prev.phase != "starting" else prev.since,
            started_at=prev.started_at if resend and prev.started_at is not None else now,
            relaunch=False,
            unknown=False,
            after_preemption=act.why == "preempted" or prev.after_preemption,
            last_output_at=None if prev.attempt != act.attempt else prev.last_output_at,
            last_lines=() if prev.attempt != act.attempt else prev.last_lines,
            workers=() if prev.attempt != act.attempt else prev.workers,
        )
    elif act.why == "failed":
        return memory  # stopping the rest of a failed attempt keeps it "failed"
    else:
        new = replace(prev, phase="stopping", stop_for=act.why, since=now)
    return replace(memory, workloads=MappingProxyType({**memory.workloads, slot: new}))


# --- decisions ---------------------------------------------------------------------------------


def _launch_reason(wm: WorkloadMemory, w: WorkloadSpec, attempt: int, why: str) -> str:
    if why == "preempted":
        return f"relaunch after preemption: attempt {attempt} of run {wm.run_id}"
    if why == "resend":
        return f"attempt {attempt} is not running on every worker: launch again"
    if attempt > 1 and wm.failures:
        return (
            f"relaunch after failure: attempt {attempt} ({wm.failures}/{w.max_failures} failures)"
        )
    if attempt > 1:
        return f"attempt {attempt} of run {wm.run_id}"
    return f"start run {wm.run_id} on every worker"


def _notices(spec: SlotSpec, wm: WorkloadMemory) -> tuple[WorkloadNotice, ...]:
    key = f"{spec.name}:{wm.run_id}:{wm.attempt}"
    if wm.phase == "succeeded":
        return (
            WorkloadNotice(
                f"{key}:succeeded",
                "succeeded",
                f"{spec.name} workload succeeded",
                f"run {wm.run_id} attempt {wm.attempt}: every worker exited 0",
            ),
        )
    if wm.phase == "gave-up":
        return (
            WorkloadNotice(
                f"{key}:gave-up",
                "gave-up",
                f"{spec.name} workload gave up",
                f"{wm.detail}; {wm.failures} failures; bump workload.generation to retry",
            ),
        )
    if wm.phase == "failed" and not wm.relaunch:
        return (
            WorkloadNotice(
                f"{key}:workload-failed",
                "workload-failed",
                f"{spec.name} workload failed",
                f"{wm.detail}; restart is not on-failure, so it stays down",
            ),
        )
    return ()


def decide(
    spec: SlotSpec,
    wm: WorkloadMemory | None,
    *,
    held: bool,
    at: Where,
    set_up: bool,
    probes: Sequence[WorkerProbe] | None,
    now: float,
) -> Decision:
    """The workload's actions for one slot this pass (see the module's table)."""
    w = spec.workload
    if wm is None:
        if w is None:
            return Decision()
        wm = new_run(w, now)  # the fold makes it; a plan shown without one shows the same
    here = wm.instance is not None and wm.instance == at.ready
    seen = probes if probes and here else None  # no probe, or none answered: no evidence
    if seen is not None:
        alive = any(p.state == "alive" for p in seen)
    else:
        alive = here and wm.phase in _LIVE
    same_run = w is not None and (wm.generation, wm.identity) == (w.generation, w.identity)
    grace = w.stop_grace if w is not None else DEFAULT_GRACE
    stop: tuple[str, str] | None = None
    if alive:
        if w is None:
            stop = ("removed", "workload removed from the file")
        elif not held:
            stop = ("released", "slot released")
        elif wm.generation != w.generation:
            stop = ("changed", f"generation bumped {wm.generation} → {w.generation}: new run")
        elif not same_run:
            stop = ("changed", "workload command or environment changed: new run")
        elif wm.phase in _AFTER_FAILURE:
            stop = ("failed", f"attempt {wm.attempt} {wm.detail}: stop the other workers")
    notices = _notices(spec, wm) if same_run else ()
    if stop is not None:  # again each pass until every worker is gone (errors back off)
        act = WorkloadAct("stop", wm.run_id, wm.attempt, grace, stop[0])
        return Decision(acts=((act, stop[1]),), notices=notices)
    if w is None or not same_run:
        return Decision()
    if not held or at.ready is None or not set_up:
        return Decision(notices=notices)
    if seen is not None and any(p.state == "unknown" for p in seen):
        down = ", ".join(str(p.index) for p in seen if p.state == "unknown")
        return Decision(
            notices=notices, warning=f"{spec.name}: workload probe failed on worker {down}"
        )
    launch: tuple[int, str] | None = None
    if wm.phase == "pending":
        launch = (wm.attempt, "relaunch" if wm.attempt > 1 else "start")
    elif wm.phase == "starting" and here and seen is not None:
        if any(p.state == "missing" and p.adopt is None for p in seen) and (
            _exit_detail(seen) is None
        ):
            launch = (wm.attempt, "resend")
    elif wm.phase == "interrupted" and w.restart != "never":
        launch = (wm.attempt + 1, "preempted")
    if launch is None:
        return Decision(notices=notices)
    attempt, why = launch
    act = WorkloadAct("launch", wm.run_id, attempt, w.stop_grace, why)
    if why == "preempted":
        notices += (
            WorkloadNotice(
                f"{spec.name}:{wm.run_id}:{attempt}:relaunched",
                "relaunched",
                f"{spec.name} workload relaunched after preemption",
                f"attempt {attempt} of run {wm.run_id}; {wm.failures} failures so far",
            ),
        )
    return Decision(acts=((act, _launch_reason(wm, w, attempt, why)),), notices=notices)


def when_done_releases(
    desired: Desired, observed: Observation, memory: Memory, now: float
) -> dict[str, tuple[str, float]]:
    """Slot -> (reason, since when) for every slot whose workload succeeded with
    ``when_done: release`` in its current run: the planner releases them through the normal
    delete path, and keeps them released (the QR gone) until the run changes. The signature of
    a release rule (``core.control.RELEASE_RULES``), values as (reason, due)."""
    out: dict[str, tuple[str, float]] = {}
    for name, wm in memory.workloads.items():
        if wm.phase != "succeeded":
            continue
        spec = desired.slot(name)
        w = spec.workload if spec is not None else None
        if w is None or w.when_done != "release":
            continue
        if (wm.generation, wm.identity) == (w.generation, w.identity):
            out[name] = (f"workload succeeded (run {wm.run_id}); when_done: release", wm.since)
    return out


def launch_request(spec: SlotSpec, act: WorkloadAct, workers: int) -> LaunchRequest:
    w = spec.workload
    assert w is not None, "a launch is only decided for a slot with a workload"
    return LaunchRequest(
        slot=spec.name,
        run_id=act.run_id,
        attempt=act.attempt,
        command=w.command,
        workdir=w.workdir,
        env=dict(w.env),
        secret_env=dict(w.secret_env),
        workers=workers,
    )


# --- what users see ---------------------------------------------------------------------------


def state_of(wm: WorkloadMemory | None) -> WorkloadState:
    if wm is None:
        return "pending"
    if wm.unknown and wm.phase in ("starting", "running", "stopping"):
        return "unknown"
    if wm.phase == "starting" and wm.unsent:
        return "pending"  # nothing was started: the detail says why
    phase: WorkloadState = wm.phase  # type: ignore[assignment]
    return phase


def describe(wm: WorkloadMemory | None, w: WorkloadSpec | None, now: float) -> str:
    """One status cell: ``running 2h13m · attempt 3 · 1/3 failures``, ``gave-up (exit 1 on
    worker 2)``."""
    from reconciler.core.render import format_workload

    state = state_of(wm)
    if wm is None:
        return state
    running_for = now - wm.since if state == "running" else None
    max_failures = w.max_failures if w is not None else None
    detail = _detail(wm)
    return format_workload(state, running_for, wm.attempt, wm.failures, max_failures, detail)


def _detail(wm: WorkloadMemory) -> str:
    return f"not started: {wm.unsent}" if wm.phase == "starting" and wm.unsent else wm.detail


def status(wm: WorkloadMemory | None, w: WorkloadSpec | None, now: float) -> WorkloadStatus | None:
    """``slots[].workload`` of the status snapshot (docs/json.md); None: no workload."""
    if wm is None and w is None:
        return None
    since = None
    if wm is not None:
        since = datetime.fromtimestamp(wm.since, UTC).isoformat(timespec="seconds")
        since = since.replace("+00:00", "Z")
    return WorkloadStatus(
        state=state_of(wm),
        run_id=wm.run_id if wm else None,
        attempt=wm.attempt if wm else 0,
        failures=wm.failures if wm else 0,
        max_failures=w.max_failures if w else None,
        since=since,
        workers=tuple(
            WorkerStatus(index=s.index, state=s.state, exit_code=s.exit_code)
            for s in (wm.workers if wm else ())
        ),
        last_lines=wm.last_lines if wm else (),
        detail=_detail(wm) if wm else "",
        summary=describe(wm, w, now),
    )
