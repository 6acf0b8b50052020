"""Flex-start's rules: when a run has ended (``expired``), what follows, and its notices.

A flex-start run ends at its ``termination_time``: the cloud deletes the VMs and suspends the
request (the TPU API's queued resource goes SUSPENDED; an API may say ENDED). That is the end
the user asked for, not a preemption: the slot reads *expired* and nothing is queued again
unless the slot says ``renew: true`` (then the dead request is replaced once per end, like a
preempted one). A suspension well before the end time is an
interruption and is re-queued as usual. A zone's refusal of flex-start (``FLEX_START
provisioning model is not supported for accelerator type ...``, INVALID_ARGUMENT) is a
permanent error of the create, blocked and shown in the cloud's words like any other.

Pure: ``now`` is an argument; no I/O.
"""

from __future__ import annotations

from dataclasses import replace

from reconciler.core.plan_values import Notice
from reconciler.core.workload import WorkloadAct
from reconciler.model import flex
from reconciler.model.capacity import CapacityRequest, RequestState
from reconciler.model.desired import Desired, SlotSpec
from reconciler.model.durations import duration_text, format_duration
from reconciler.model.observed import Observation
from reconciler.model.stamps import epoch

#: A run over: the TPU API suspends its queued resource; another API may say ENDED.
_ENDED = frozenset({RequestState.SUSPENDING, RequestState.SUSPENDED, RequestState.ENDED})
_OVER = frozenset({RequestState.SUSPENDED, RequestState.ENDED})


def ends_at(request: CapacityRequest | None) -> float | None:
    """The run's end as epoch seconds (None: unknown or not flex-start)."""
    if request is None or not request.termination_time:
        return None
    try:
        return epoch(request.termination_time)
    except ValueError:
        return None


def expired(spec: SlotSpec, request: CapacityRequest | None, now: float) -> bool:
    """True when a flex-start slot's run is over: the cloud suspended its request at (or
    after) the end time, or without telling one (a TPU API v2 read, where only the suspension
    is seen)."""
    if spec.mode != flex.MODE or request is None or request.state not in _ENDED:
        return False
    end = ends_at(request)
    return end is None or now >= end - flex.END_SLACK


def renews(spec: SlotSpec, request: CapacityRequest, now: float) -> bool:
    """Replace the ended run's request (``renew: true``, once it is SUSPENDED or ENDED)."""
    return spec.renew and request.state in _OVER and expired(spec, request, now)


def ended_reason(request: CapacityRequest) -> str:
    when = f" at {request.termination_time}" if request.termination_time else ""
    return f"flex-start run ended{when}; renew: true, queue a new run"


def create_note(spec: SlotSpec) -> str:
    """What a flex-start create adds to its reason: the run's length and what follows it."""
    if spec.mode != flex.MODE or not spec.max_run_seconds:
        return ""
    then = "then queued again (renew)" if spec.renew else "then expired"
    return f"; flex-start: runs {duration_text(spec.max_run_seconds)} once ACTIVE, {then}"


def why_idle(spec: SlotSpec, request: CapacityRequest) -> str:
    """Why ``plan`` does nothing for a slot whose run is over (``ended`` in the plan)."""
    when = f" at {request.termination_time}" if request.termination_time else ""
    if spec.renew:  # SUSPENDING: replaced once the cloud has finished suspending it
        return (
            f"{spec.name}: flex-start run ended{when}; renew: true queues a new run once "
            f"the {request.api_kind} is SUSPENDED (now {request.api_state})"
        )
    return (
        f"{spec.name}: flex-start run expired{when}; not queued again. Set renew: true to "
        "queue a new run, or release and hold the slot for one more"
    )


def notices(spec: SlotSpec, request: CapacityRequest | None, now: float) -> list[Notice]:
    """``ending`` once per run when 30 minutes are left; ``expired`` once when it is over."""
    if spec.mode != flex.MODE or request is None:
        return []
    run = f"{spec.name}@{request.create_time or '?'}"
    end = ends_at(request)
    if expired(spec, request, now):
        then = "queueing a new run (renew: true)" if spec.renew else "not queued again"
        return [
            Notice(
                f"{run}:expired",
                spec.name,
                "expired",
                f"{spec.name} flex-start run ended",
                f"{spec.accelerator} in {spec.zone}: its VMs are deleted; {then}",
            )
        ]
    if (
        request.state == RequestState.ACTIVE
        and end is not None
        and 0 < end - now <= flex.ENDING_NOTICE
    ):
        return [
            Notice(
                f"{run}:ending",
                spec.name,
                "ending",
                f"{spec.name} flex-start run ends in {format_duration(end - now)}",
                f"{spec.accelerator} in {spec.zone} is deleted at {request.termination_time}: "
                "save your work",
            )
        ]
    return []


def with_end(act: WorkloadAct, request: CapacityRequest | None) -> WorkloadAct:
    """A launch carries the run's end (``TPU_RECONCILER_TERMINATION_TIME``) when known."""
    if act.verb != "launch" or request is None or not request.termination_time:
        return act
    return replace(act, ends_at=request.termination_time)


def next_wake(desired: Desired | None, observed: Observation | None, now: float) -> float | None:
    """The next moment a running flex-start run's notice (30 minutes before) or end is due,
    after ``now``: the controller looks then, not at its next steady poll."""
    moments: list[float] = []
    for spec in desired.slots if desired is not None and observed is not None else ():
        request = (
            observed.request(spec.zone, spec.name) if observed and spec.mode == flex.MODE else None
        )
        end = ends_at(request)
        if request is not None and end is not None and request.state == RequestState.ACTIVE:
            moments += [t for t in (end - flex.ENDING_NOTICE, end) if t > now]
    return min(moments, default=None)
