"""Workload decisions: when to launch, stop, relaunch or give up, from probes and memory.

Two pure steps, both called with the world as arguments (the first lives in
``core/workload_fold.py``; its public names are re-exported here):

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
a worker exited non-zero, stalled, or  failed, one failure: stop the others; relaunch when
every chip idle for ``idle_after``     restart is on-failure/always and failures <=
(``core/telemetry.py``)                max_failures, else gave-up (or failed, for never /
                                       on-preemption); nothing relaunched until the
                                       generation is bumped or the workload changes; the
                                       relaunch waits 10 s doubling to 5 min per failure
                                       in a row (``core/workload_backoff``)
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
from types import MappingProxyType
from typing import Final, Literal

from reconciler.core.memory import Memory
from reconciler.core.telemetry import IDLE
from reconciler.core.workload_backoff import restart_wait
from reconciler.core.workload_fold import AFTER_FAILURE, LIVE, exit_detail, ran
from reconciler.core.workload_fold import SUCCEEDED_BEFORE as SUCCEEDED_BEFORE
from reconciler.core.workload_fold import Probes as Probes
from reconciler.core.workload_fold import Where as Where
from reconciler.core.workload_fold import fold as fold
from reconciler.core.workload_fold import new_run as new_run
from reconciler.core.workload_fold import observe as observe
from reconciler.core.workload_fold import where as where
from reconciler.core.workload_memory import WorkerSeen, WorkloadMemory
from reconciler.model.accelerators import COMPUTE_API
from reconciler.model.desired import Desired, SlotSpec, WorkloadSpec
from reconciler.model.multislice import megascale_env
from reconciler.model.observed import Node, Observation
from reconciler.model.workload import LaunchRequest, WorkerProbe, WorkloadState

#: The grace a stop uses when the workload block is gone from the file.
DEFAULT_GRACE: Final = 60.0


@dataclass(frozen=True, slots=True)
class WorkloadAct:
    """What a ``~ launch`` / ``~ stop`` action carries besides the slot and node instance."""

    verb: Literal["launch", "stop"]
    run_id: str
    attempt: int
    grace: float = DEFAULT_GRACE
    why: str = ""  # launch: start | relaunch | resend | preempted | released (held again);
    #                stop: failed | removed | released | changed
    ends_at: str | None = None  # launch on a flex-start run: its terminationTime


@dataclass(frozen=True, slots=True)
class WorkloadNotice:
    key: str
    event: str  # "gave-up" | "succeeded" | "relaunched" | "workload-failed" | "workload-idle"
    title: str
    message: str


@dataclass(frozen=True, slots=True)
class Decision:
    acts: tuple[tuple[WorkloadAct, str], ...] = ()  # (act, reason)
    notices: tuple[WorkloadNotice, ...] = ()
    warning: str | None = None


# --- what to probe ---------------------------------------------------------------------------


def probe_targets(
    desired: Desired | None, observed: Observation, memory: Memory
) -> list[tuple[SlotSpec, WorkloadMemory]]:
    """Slots whose attempt may have processes on the node it was sent to, which is READY."""
    out = []
    for spec in desired.slots if desired else ():
        wm = memory.workload(spec.name)
        if wm is None or wm.instance is None:
            continue
        if wm.left:  # until the processes left after its stop are gone, whatever the phase
            pass
        elif wm.phase in AFTER_FAILURE:
            # Only while a worker may still run (to stop it); the first look always.
            if not ran(wm.workers):
                continue
        elif wm.phase not in LIVE:
            continue
        if where(observed, spec, wm.instance).ready == wm.instance:
            out.append((spec, wm))
    return out


def watching(memory: Memory) -> bool:
    """Some attempt is starting, running, stopping or has workers left to stop: poll fast, so
    an exit is noticed within one fast interval."""
    return any(
        w.phase in LIVE or (w.phase in AFTER_FAILURE and ran(w.workers)) or bool(w.left)
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
            stop_for="",
            after_preemption=act.why == "preempted" or prev.after_preemption,
            last_output_at=None if prev.attempt != act.attempt else prev.last_output_at,
            last_lines=() if prev.attempt != act.attempt else prev.last_lines,
            workers=() if prev.attempt != act.attempt else prev.workers,
            chip_use=None if prev.attempt != act.attempt else prev.chip_use,
            not_before=None,
        )
    elif act.why == "failed":
        return memory  # stopping the rest of a failed attempt keeps it "failed"
    elif act.why == "lost":  # the rest of a race group's program (``core/across``): sent once
        new = replace(prev, stop_for=act.why)
    else:
        new = replace(prev, phase="stopping", stop_for=act.why, since=now)
    return replace(memory, workloads=MappingProxyType({**memory.workloads, slot: new}))


def record_decisions(
    memory: Memory, desired: Desired, decided: Mapping[str, str], releases: Mapping[str, str]
) -> Memory:
    """What the plan decided for each slot, as its workload memory keeps it (the controller
    records it as it dispatches the plan): a slot decided released says why in ``release``
    (``releases``: slot -> a release rule's reason; a race candidate "lost the race"; else
    "want: released"), so an attempt under way ends as *released*, never *interrupted*, and a
    run that never started reads *not-started*; a slot held again forgets it."""
    workloads = dict(memory.workloads)
    for slot, wm in memory.workloads.items():
        want = decided.get(slot)
        if want == "released":
            spec = desired.slot(slot)
            why = releases.get(slot) or (
                "lost the race" if spec is not None and spec.race_group else "want: released"
            )
            if wm.phase == "pending":
                new = replace(wm, phase="not-started", detail=why, release=why, not_before=None)
            elif wm.phase in ("starting", "running", "stopping") or (
                wm.phase == "failed" and wm.relaunch
            ):
                new = replace(wm, release=why)
            else:
                continue
        elif want == "held" and (wm.release or wm.phase == "not-started"):
            new = replace(wm, release="")
            if wm.phase == "not-started":
                new = replace(new, phase="pending", detail="")
        else:
            continue
        if new != wm:
            workloads[slot] = new
    if workloads == dict(memory.workloads):
        return memory
    return replace(memory, workloads=MappingProxyType(workloads))


# --- decisions ---------------------------------------------------------------------------------


def _launch_reason(wm: WorkloadMemory, w: WorkloadSpec, attempt: int, why: str) -> str:
    if why == "preempted":
        return f"relaunch after preemption: attempt {attempt} of run {wm.run_id}"
    if why == "released":
        return f"its slot is held again: attempt {attempt} of run {wm.run_id}"
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
    if wm.phase == "failed" and wm.relaunch and wm.detail.startswith(IDLE):
        return (idle_notice(spec.name, key, wm.detail),)
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


def idle_notice(slot: str, key: str, detail: str) -> WorkloadNotice:
    return WorkloadNotice(
        f"{key}:idle", "workload-idle", f"{slot} workload idle", f"{detail}; relaunching"
    )


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
    alive = any(p.state == "alive" for p in seen) if seen is not None else here and wm.phase in LIVE
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
        elif wm.phase in AFTER_FAILURE:
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
    if wm.phase in ("pending", "not-started"):  # not-started: its slot is held again
        launch = (wm.attempt, "relaunch" if wm.attempt > 1 else "start")
    elif wm.phase == "starting" and here and seen is not None:
        if any(p.state == "missing" and p.adopt is None for p in seen) and (
            exit_detail(seen) is None
        ):
            launch = (wm.attempt, "resend")
    elif wm.phase == "interrupted" and w.restart != "never":
        launch = (wm.attempt + 1, "preempted")
    elif wm.phase == "released" and w.restart != "never":  # its slot is held again
        launch = (wm.attempt + 1, "released")
    if launch is None or (launch[1] == "relaunch" and restart_wait(wm, now) is not None):
        return Decision(notices=notices)  # a relaunch in its backoff: status says when
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
    delete path, and keeps them released (the request gone) until the run changes. The signature of
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
    for g in desired.race_groups:  # one program across the winners (core/across): all of them
        gm, w = memory.workload(g.name), g.workload
        if gm is None or w is None or gm.phase != "succeeded" or w.when_done != "release":
            continue
        if (gm.generation, gm.identity) == (w.generation, w.identity):
            why = f"group {g.name}'s workload succeeded (run {gm.run_id}); when_done: release"
            out.update((name, (why, gm.since)) for name in g.slots)
    return out


def launch_request(
    spec: SlotSpec, act: WorkloadAct, workers: int, node: Node | None = None
) -> LaunchRequest:
    """What ``act`` launches on ``node``'s ``workers``: a multislice slot's also carries its
    slice count and the MEGASCALE variables its workers share (``model/multislice``); a slot
    on Compute Engine, which does not tell a TPU VM its place, its workers' addresses in
    order (the wrapper sets ``TPU_WORKER_ID`` and ``TPU_WORKER_HOSTNAMES`` from them)."""
    w = spec.workload
    assert w is not None, "a launch is only decided for a slot with a workload"
    request = LaunchRequest(
        slot=spec.name,
        run_id=act.run_id,
        attempt=act.attempt,
        command=w.command,
        workdir=w.workdir,
        env=dict(w.env),
        secret_env=dict(w.secret_env),
        workers=workers,
        termination_time=act.ends_at,
        grace=w.stop_grace,
        keep_attempts=w.keep_attempts,
    )
    if node is None:
        return request
    if spec.slices > 1:
        env = {**megascale_env(node, spec.slices), **dict(w.env)}
        request = replace(request, env=env, slices=spec.slices)
    if spec.api == COMPUTE_API:
        request = replace(request, hosts=node.ips(internal=True))
    return request


# --- what users see ---------------------------------------------------------------------------


def state_of(wm: WorkloadMemory | None) -> WorkloadState:
    """The state users see; ``not-started`` and ``released`` are their own (never
    ``pending`` then ``interrupted`` for a slot that lost its race or was released)."""
    if wm is None:
        return "pending"
    if wm.unknown and wm.phase in ("starting", "running", "stopping"):
        return "unknown"
    if wm.phase == "starting" and wm.unsent:
        return "pending"  # nothing was started: the detail says why
    phase: WorkloadState = wm.phase  # type: ignore[assignment]
    return phase
