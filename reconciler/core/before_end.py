"""``workload.before_end``: a command on every worker a ``lead`` before a known end.

The known ends of a held slot (``known_ends``, ``model/ends.py`` says why these):

=================  ==========================================================================
maintenance        its node's ``upcomingMaintenance.windowStartTime``, while not ONGOING
flex-start         its request's ``termination_time`` (a flex-start run's end)
termination        the same on another mode (a Compute Engine VM's ``terminationTime``)
hold_until         the file's ``hold_until``
hold_for           ``hold_for`` counted from when the node became ACTIVE
=================  ==========================================================================

The rule (``decide``): when ``now`` is within ``lead`` of an end that has not come yet, the
workload's attempt in play is *running* on this very node instance, and ``before_end`` has not
already run before that end in this attempt (memory: ``EndsSeen``), the planner proposes
``~ before_end`` with the attempt and the end (``EndAct``) and a notice says what is coming.
Once per attempt and end: a relaunched attempt gets its own run before the same end; an end
that moved (a rescheduled window) is a new end. An end already past is not chased (a
controller that was down then says nothing late); nothing is decided on missing data — no
request or node seen, an unreadable time, an attempt not known to run. One end at a time per
slot: the soonest due. The workers keep their own record of each end too (the wrapper's
``hook`` verb), so a run cut short and resent does not run twice where it already ran.

``next_wake``: the next moment one of these (or a flex-start notice, ``core/flex``) comes due,
so the controller looks then rather than at its next steady poll.

Pure: ``now`` is an argument; no I/O.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Final

from reconciler.core import control, flex
from reconciler.core.ends_memory import EndsSeen
from reconciler.core.memory import Memory
from reconciler.core.plan_values import Action, Kind, Notice
from reconciler.core.workload_memory import WorkloadMemory
from reconciler.model import flex as flex_model
from reconciler.model.capacity import CapacityRequest, RequestState
from reconciler.model.desired import Desired, SlotSpec
from reconciler.model.durations import format_duration
from reconciler.model.ends import End, EndAct
from reconciler.model.observed import Node, NodeState, Observation
from reconciler.model.stamps import epoch_or_none
from reconciler.model.times import utc_text

#: Maintenance already under way is no end to prepare for.
_ONGOING: Final = "ONGOING"


def known_ends(
    spec: SlotSpec,
    request: CapacityRequest | None,
    node: Node | None,
    observed: Observation,
    memory: Memory,
) -> list[End]:
    """Every end of the slot's capacity known now, soonest first (see the table above)."""
    out: list[End] = []
    m = node.maintenance if node is not None else None
    if m is not None and m.window_start and m.status != _ONGOING:
        at = epoch_or_none(m.window_start)
        if at is not None:
            out.append(End("maintenance", at, m.window_start))
    if request is not None and request.termination_time:
        at = epoch_or_none(request.termination_time)
        if at is not None:
            kind = "flex-start" if spec.mode == flex_model.MODE else "termination"
            out.append(End(kind, at, request.termination_time))
    release = control.releases_at(spec, observed, memory)
    if release is not None:
        kind = "hold_until" if release == spec.hold.hold_until else "hold_for"
        out.append(End(kind, release, utc_text(release)))
    return sorted(out, key=lambda e: (e.at, e.kind))


def _running_on(wm: WorkloadMemory | None, node: Node | None) -> bool:
    return (
        wm is not None
        and node is not None
        and wm.phase == "running"
        and wm.instance == node.instance
        and node.state == NodeState.READY
    )


def already(memory: Memory, slot: str, wm: WorkloadMemory, end: End) -> bool:
    seen = memory.ends.get(slot)
    return (
        seen is not None
        and (seen.run_id, seen.attempt) == (wm.run_id, wm.attempt)
        and end.key in seen.done
    )


def due(spec: SlotSpec, end: End, now: float) -> bool:
    before = spec.workload.before_end if spec.workload is not None else None
    return before is not None and end.at - before.lead <= now < end.at


def decide(
    spec: SlotSpec,
    observed: Observation,
    memory: Memory,
    now: float,
) -> list[tuple[Action, Notice]]:
    """The ``~ before_end`` due for ``spec`` now and its notice (at most one)."""
    before = spec.workload.before_end if spec.workload is not None else None
    wm = memory.workload(spec.name)
    request = observed.request(spec.zone, spec.name)
    if before is None or wm is None or request is None or request.state != RequestState.ACTIVE:
        return []
    node = observed.node_of(request)
    if not _running_on(wm, node) or node is None:
        return []
    for end in known_ends(spec, request, node, observed, memory):
        if not due(spec, end, now) or already(memory, spec.name, wm, end):
            continue
        workers = len(node.endpoints)
        act = EndAct(wm.run_id, wm.attempt, end.kind, end.stamp, end.key, before.timeout)
        when = f"{end.words} at {end.stamp} (in {format_duration(end.at - now)})"
        action = Action(
            Kind.BEFORE_END,
            spec.name,
            spec.zone,
            f"{when}: run before_end on {workers} workers (attempt {wm.attempt})",
            instance=node.instance,
            state="ACTIVE",
            end=act,
        )
        notice = Notice(
            f"{spec.name}:{wm.run_id}/{wm.attempt}:before-end:{end.key}",
            spec.name,
            "before-end",
            f"{spec.name}: {end.words} at {end.stamp[11:16]} UTC",
            f"{end.words} at {end.stamp}: before_end command sent to {workers} workers at "
            f"{utc_text(now)}",
            announces=action.key,
        )
        return [(action, notice)]
    return []


def record_done(memory: Memory, action: Action, outcome: str, now: float) -> Memory:
    """``before_end`` ran before ``action.end`` on the workers: never again in this attempt."""
    act = action.end
    if act is None:
        return memory
    old = memory.ends.get(action.slot)
    done: tuple[str, ...] = ()
    if old is not None and (old.run_id, old.attempt) == (act.run_id, act.attempt):
        done = old.done
    seen = EndsSeen(
        run_id=act.run_id,
        attempt=act.attempt,
        done=(*[k for k in done if k != act.key], act.key)[-16:],
        last=act.key,
        last_at=act.at,
        sent_at=now,
        outcome=outcome,
    )
    return replace(memory, ends=MappingProxyType({**memory.ends, action.slot: seen}))


def next_wake(
    desired: Desired | None, observed: Observation | None, memory: Memory, now: float
) -> float | None:
    """The next moment a ``before_end`` (or a flex-start notice or end) comes due after
    ``now``: the controller looks then."""
    moments = [flex.next_wake(desired, observed, now)]
    if desired is None or observed is None:
        return moments[0]
    for spec in desired.slots:
        before = spec.workload.before_end if spec.workload is not None else None
        request = observed.request(spec.zone, spec.name) if before else None
        if before is None or request is None or request.state != RequestState.ACTIVE:
            continue
        node = observed.node_of(request)
        for end in known_ends(spec, request, node, observed, memory):
            if end.at - before.lead > now:
                moments.append(end.at - before.lead)
    return min((m for m in moments if m is not None), default=None)
