"""The cloud actions the planner (``core/plan.py``) takes on one slot's capacity request: the
``+ create`` a held slot without one sends (``create_action``), the ``- delete`` of a request
(``delete_action``), and the ``-/+ replace`` of a held request that cannot stay (``replacement``):

- dead: SUSPENDED (preempted), FAILED (capacity, an expired window) or ENDED, re-queued;
- a flex-start run over with ``renew: true`` (``core/flex.py``);
- a multislice request one of whose slices was lost (``model/multislice.py``);
- reshaped: the file now asks another api, accelerator, slice count, machine type, topology
  or host count (``core/reshape.py``), which cannot change in place; the replace is marked
  ``Action.reshape`` so the delete guard counts it like a delete.

A delete or replace that takes a running TPU away is marked destructive, and forced when a
node exists. Whether an action goes ahead this pass (backoff, a permanent error, a zone not
seen, the gates) is the planner's, not this module's.

Pure: values in, actions out; no I/O, no clock (``now`` is an argument), no await.
"""

from __future__ import annotations

from dataclasses import replace

from reconciler.core import boot_setup, control, flex, reshape
from reconciler.core.plan_values import Action, Kind
from reconciler.model.capacity import (
    DEAD_STATES,
    MANAGED_LABEL,
    MANAGED_VALUE,
    NODE_STATES,
    CapacityRequest,
    RequestState,
)
from reconciler.model.desired import Desired, SlotSpec
from reconciler.model.multislice import lost_slice_replaces
from reconciler.model.observed import NodeState, Observation
from reconciler.model.requests import CreateRequest
from reconciler.model.tpu_zones import known_to_offer


def create_action(desired: Desired, spec: SlotSpec, reason: str, now: float) -> Action:
    """``+ create``: the request ``spec`` sends, its reason told with flex-start's run and
    setup at boot; a zone ``model.tpu_zones`` does not know to offer the accelerator goes
    ahead (that table may be behind Google's), marked ``unlisted_zone``."""
    return Action(
        Kind.CREATE,
        spec.name,
        spec.zone,
        reason + flex.create_note(spec) + boot_setup.create_note(spec),
        create=_create_request(desired, spec, now),
        state="NOT_QUEUED",
        unlisted_zone=known_to_offer(spec.zone, spec.accelerator) is False,
        api=spec.api,
    )


def _create_request(desired: Desired, spec: SlotSpec, now: float) -> CreateRequest:
    s = desired.settings
    after, at = control.start_window(spec, now)
    return CreateRequest(
        name=spec.name,
        zone=spec.zone,
        api=spec.api,
        accelerator=spec.accelerator,
        image=spec.image or spec.runtime_version,
        mode=spec.mode,
        network=s.network,
        subnetwork=s.subnets.get(spec.zone),
        valid_until_seconds=spec.valid_until_seconds,
        internal_ips=s.internal_ips,
        labels={MANAGED_LABEL: MANAGED_VALUE},
        valid_after_seconds=after,
        valid_after_time=at,
        max_run_seconds=spec.max_run_seconds,
        slices=spec.slices,
        machine_type=spec.machine_type,
        topology=spec.topology,
        hosts=spec.hosts,
    )


def delete_action(
    observed: Observation, request: CapacityRequest, reason: str, kind: Kind
) -> Action:
    """``- delete`` (``kind`` DELETE) or the delete half of ``-/+ replace`` (REPLACE)."""
    node = observed.node_of(request)
    running = request.state == RequestState.ACTIVE and (
        node is None or node.state != NodeState.PREEMPTED
    )
    return Action(
        kind=kind,
        slot=request.name,
        zone=request.zone,
        reason=reason + (" — deletes a running TPU" if running else ""),
        destructive=running,
        force=node is not None or request.state in NODE_STATES,
        state=request.api_state,
        api=request.api,
    )


def replacement(
    spec: SlotSpec, request: CapacityRequest, observed: Observation, now: float
) -> Action | None:
    """The ``-/+ replace`` of the request held slot ``spec`` has, or None when it stays.
    A flex-start run over without ``renew`` is the caller's to tell (``flex.why_idle``), and
    a request in an UNKNOWN state is never replaced for its shape."""
    if flex.expired(spec, request, now):  # the run's end, not a preemption
        if flex.renews(spec, request, now):
            return delete_action(observed, request, flex.ended_reason(request), Kind.REPLACE)
        return None
    if request.state in DEAD_STATES:
        return delete_action(observed, request, _dead_reason(request), Kind.REPLACE)
    if lost_slice_replaces(request, observed.node(request.zone, request.name)):
        return delete_action(observed, request, "a slice was lost", Kind.REPLACE)
    if request.state in (RequestState.UNKNOWN, RequestState.DELETING):
        return None
    if found := reshape.changes(spec, request):
        action = delete_action(observed, request, reshape.reason(found), Kind.REPLACE)
        return replace(action, reshape=True)  # the delete guard counts it
    return None


def _dead_reason(request: CapacityRequest) -> str:
    word = request.api_state
    if request.state in (RequestState.SUSPENDED, RequestState.ENDED):
        who = "preempted" if request.preempted else "suspended"
        if request.state == RequestState.ENDED:
            who = "ended"
        return f"{who} ({word} by {request.ended_by or 'unknown'}); re-queue"
    error = request.error
    detail = f": {error.message}" if error and error.message else ""
    code = f" (code {error.code})" if error and error.code is not None else ""
    return f"{word}{code}{detail}; re-queue"
