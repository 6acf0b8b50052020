"""What a slot's Compute Engine resources mean: one capacity request and the nodes it
yields (``look``).

A slot's resources carry its marker (``adapters/compute_body.py``): instances the label
``tpu-reconciler-slot``, MIGs a description naming the slot. Each slice is one *part* — a
single-host instance, or a MIG and its hosts (found in the same ``aggregated/instances``
list by their names, ``<mig>-<i>``, so worker ``i`` is host ``i``). The parts of one slot make
one ``CapacityRequest`` (``slices`` > 1: a multislice, its nodes ``<slot>-0 ...``); a part
with hosts is one ``Node``. Its own word stays on the value (``api_state``):

    instance status                  RequestState              NodeState
    PENDING (flex-start, queued)     WAITING                   (no node)
    PROVISIONING, STAGING            PROVISIONING              CREATING
    RUNNING                          ACTIVE                    READY
    REPAIRING                        PROVISIONING              REPAIRING
    STOPPING, PENDING_STOP,          SUSPENDING (DELETING      STOPPING (DELETING)
    SUSPENDING, DEPROVISIONING        once we deleted it)
    TERMINATED, STOPPED, SUSPENDED   spot: SUSPENDED,          PREEMPTED
                                       ended_by SERVICE
                                     flex-start: ENDED (its    TERMINATED
                                       run's end), SERVICE
                                     else: SUSPENDED           TERMINATED
    RUNNING, then gone without       SUSPENDED, SERVICE,       (no node)
      our delete (a DELETE-action      word DELETED (one look:
      preemption)                      ``compute.py``)
    anything else                    UNKNOWN                   UNKNOWN

    MIG slice (decided in this order)                      RequestState   word
    being deleted (currentActions.deleting, or by us)      DELETING       DELETING
    appliedAcceleratorTopologies[].state FAILED            FAILED         FAILED
    no host asked for (a create stopped half-way)          FAILED         INCOMPLETE
      ... unless that create is still running here         WAITING        CREATING
    a host lost: missing or TERMINATED, none being made    SUSPENDED,     INCOMPLETE
      (flex-start: ENDED, the run's end)                    SERVICE
    a host STOPPING                                        SUSPENDING     STOPPING
    hosts being created, none exists yet (BULK waits;      WAITING        CREATING
      ``bulkInstanceOperation`` says why -> ``error``)
    hosts being made, or all RUNNING but the topology      PROVISIONING   the topology's
      not ACTIVE yet                                                        (ACTIVATING ...)
    every host RUNNING and the topology ACTIVE             ACTIVE         ACTIVE

A slice's node is READY only when the request part is ACTIVE; a lost host makes it PREEMPTED
(spot) or TERMINATED. Of several parts the request takes the first of DELETING, FAILED,
ENDED, SUSPENDED, SUSPENDING, UNKNOWN, WAITING, PROVISIONING, ACTIVE that any part is in; a
part missing (a slice's VM gone) counts as a lost one.

May: decide states from parsed values. May not: do I/O.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from reconciler.adapters import compute_body as cb
from reconciler.adapters.compute_parse import (
    API,
    KIND_GROUP,
    KIND_INSTANCE,
    Group,
    Host,
    group_from_api,
    host_from_api,
    mode_of,
)
from reconciler.model import flex
from reconciler.model.capacity import (
    MANAGED_LABEL,
    MANAGED_VALUE,
    CapacityRequest,
    ErrorInfo,
    Initiator,
    RequestState,
)
from reconciler.model.observed import Node, NodeState

_LOST_STATUSES: Final = frozenset({"TERMINATED", "STOPPED", "SUSPENDED"})
_GOING_STATUSES: Final = frozenset({"STOPPING", "PENDING_STOP", "SUSPENDING", "DEPROVISIONING"})
#: Instance status -> (RequestState, NodeState) for the plain cases (the table above).
INSTANCE_STATES: Final[Mapping[str, tuple[RequestState, NodeState | None]]] = MappingProxyType(
    {
        "PENDING": (RequestState.WAITING, None),
        "PROVISIONING": (RequestState.PROVISIONING, NodeState.CREATING),
        "STAGING": (RequestState.PROVISIONING, NodeState.CREATING),
        "RUNNING": (RequestState.ACTIVE, NodeState.READY),
        "REPAIRING": (RequestState.PROVISIONING, NodeState.REPAIRING),
        **{s: (RequestState.SUSPENDING, NodeState.STOPPING) for s in _GOING_STATUSES},
        **{s: (RequestState.SUSPENDED, NodeState.TERMINATED) for s in _LOST_STATUSES},
    }
)
#: The words a MIG slice's request reads (besides the topology's own).
GROUP_WORDS: Final = ("CREATING", "ACTIVATING", "REACTIVATING", "ACTIVE", "INCOMPLETE",
                      "FAILED", "DELETING")  # fmt: skip
#: Every word ``api_state`` may hold for a Compute Engine request (the metrics' label).
STATE_WORDS: Final = tuple(
    dict.fromkeys([*INSTANCE_STATES, *GROUP_WORDS, "DELETED", "STOPPING", "UNKNOWN"])
)
#: Which state wins when parts disagree: the first any part is in.
_PRECEDENCE: Final = (
    RequestState.DELETING,
    RequestState.FAILED,
    RequestState.ENDED,
    RequestState.SUSPENDED,
    RequestState.SUSPENDING,
    RequestState.UNKNOWN,
    RequestState.WAITING,
    RequestState.PROVISIONING,
    RequestState.ACTIVE,
)


def request_state(word: str | None) -> RequestState:
    """The neutral state of a word a Compute Engine request shows, for records that keep only
    the word (an instance's status, a slice's word; TERMINATED as a spot VM's)."""
    if not word:
        return RequestState.UNKNOWN
    if word in INSTANCE_STATES:
        return INSTANCE_STATES[word][0]
    return {
        "CREATING": RequestState.WAITING,
        "ACTIVATING": RequestState.PROVISIONING,
        "REACTIVATING": RequestState.PROVISIONING,
        "ACTIVE": RequestState.ACTIVE,
        "INCOMPLETE": RequestState.SUSPENDED,
        "DELETED": RequestState.SUSPENDED,
        "FAILED": RequestState.FAILED,
        "DELETING": RequestState.DELETING,
    }.get(word, RequestState.UNKNOWN)


# --- parts: one slice each --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Part:
    """One slice of a request, decided."""

    index: int
    name: str
    state: RequestState
    word: str
    node: Node | None = None
    ended_by: Initiator | None = None
    error: ErrorInfo | None = None
    created: str | None = None
    ends: str | None = None
    mode: str | None = None


def _node(name: str, zone: str, state: NodeState, hosts: Sequence[Host], uid: str,
          accelerator: str | None, raw: str) -> Node:  # fmt: skip
    first = hosts[0]
    boots = {h.boot_generation for h in hosts}  # a MIG's hosts share their template's
    windows = [h.maintenance for h in hosts if h.maintenance is not None]
    return Node(
        name=name,
        zone=zone,
        state=state,
        accelerator_type=accelerator,
        create_time=first.created,
        uid=uid,
        endpoints=tuple(e for h in hosts if (e := h.endpoint) is not None),
        labels=first.labels,
        raw_state=raw,
        boot_generation=boots.pop() if len(boots) == 1 else None,
        # the soonest host's window: the slice goes down with its first host
        maintenance=min(windows, key=lambda m: m.window_start or "~", default=None),
    )


def instance_part(host: Host, index: int, *, deleting: bool = False) -> Part:
    """A single-host slice (the instance table of the module docstring)."""
    status, mode = host.status, mode_of(host.model)
    state, node_state = INSTANCE_STATES.get(status, (RequestState.UNKNOWN, NodeState.UNKNOWN))
    ended_by = None
    if status in _LOST_STATUSES:
        if mode == flex.MODE:
            state, ended_by = RequestState.ENDED, Initiator.SERVICE
        elif mode == "spot":
            ended_by, node_state = Initiator.SERVICE, NodeState.PREEMPTED
    if deleting and status in _GOING_STATUSES:
        state, node_state = RequestState.DELETING, NodeState.DELETING
    node = None
    if node_state is not None:
        accelerator = host.labels.get(cb.LABEL_ACCELERATOR)
        node = _node(host.name, host.zone, node_state, (host,), host.uid or "?", accelerator,
                     status)  # fmt: skip
    return Part(index, host.name, state, status, node, ended_by, None, host.created, host.ends,
                mode)  # fmt: skip


def group_part(group: Group, hosts: Mapping[str, Host], *, creating: bool = False,
               deleting: bool = False) -> Part:  # fmt: skip
    """A MIG slice (the MIG table of the module docstring); ``hosts``: its zone's instances
    by name. ``creating``: a create of this slot is under way here; ``deleting``: we deleted
    it."""
    index, _ = group.slice
    members = [hosts.get(f"{group.name}-{i}") for i in range(group.size)]
    present = [h for h in members if h is not None]
    statuses = [h.status for h in present]
    mode = group.facts.get("mode") or (mode_of(present[0].model) if present else None)
    spot = mode == "spot"
    word = group.topology_state or "CREATING"
    lost = (
        group.creating == 0
        and group.target > 0
        and (len(present) < group.target or any(s in _LOST_STATUSES for s in statuses))
    )
    error: ErrorInfo | None = None
    ended_by = None
    node_state = NodeState.CREATING
    if deleting or group.deleting:
        state, word, node_state = RequestState.DELETING, "DELETING", NodeState.DELETING
    elif group.topology_state == "FAILED":
        state, word = RequestState.FAILED, "FAILED"
        error = ErrorInfo(None, group.topology_error or "the slice's bulk creation failed")
    elif group.target == 0 and not present:
        if creating:
            state, word = RequestState.WAITING, "CREATING"
        else:
            state, word = RequestState.FAILED, "INCOMPLETE"
            error = ErrorInfo(None, "no host was ever asked for (a create stopped half-way)")
    elif lost:
        ended = mode == flex.MODE and any(s in _LOST_STATUSES for s in statuses)
        state = RequestState.ENDED if ended else RequestState.SUSPENDED
        word, ended_by = "INCOMPLETE", Initiator.SERVICE
        node_state = NodeState.PREEMPTED if spot else NodeState.TERMINATED
    elif any(s in _GOING_STATUSES for s in statuses):
        state, word, node_state = RequestState.SUSPENDING, "STOPPING", NodeState.STOPPING
    elif not present:
        state, word = RequestState.WAITING, "CREATING"
        if group.bulk_error:
            error = ErrorInfo(8, group.bulk_error)
    elif (
        group.creating
        or len(present) < group.target
        or any(s != "RUNNING" for s in statuses)
        or group.topology_state not in (None, "ACTIVE")
    ):
        state = RequestState.PROVISIONING
    else:
        state, word, node_state = RequestState.ACTIVE, "ACTIVE", NodeState.READY
    node = None
    if present:
        ids = ",".join(h.uid or h.name for h in present)
        uid = hashlib.sha256(f"{group.uid}:{ids}".encode()).hexdigest()[:20]
        accelerator = group.facts.get("accelerator")
        node = _node(group.name, group.zone, node_state, present, uid, accelerator, word)
    ends = min((h.ends for h in present if h.ends), default=None)
    return Part(index, group.name, state, word, node, ended_by, error, group.created, ends,
                mode)  # fmt: skip


# --- one request per slot ---------------------------------------------------------------------


@dataclass(slots=True)
class _Slot:
    zone: str
    slot: str
    slices: int = 1
    kind: str = KIND_INSTANCE
    accelerator: str | None = None
    topology: str | None = None  # its hosts' ``tpu-topology`` label (the planner compares it)
    parts: dict[int, Part] = field(default_factory=dict)

    @property
    def collection(self) -> str:
        return "instanceGroupManagers" if self.kind == KIND_GROUP else "instances"


@dataclass(frozen=True, slots=True)
class Look:
    """What one look at a project's instances and MIGs says."""

    requests: tuple[CapacityRequest, ...]
    nodes: tuple[Node, ...]
    #: (zone, slot) of every single-host request seen RUNNING, for the next look's gone
    #: ones (one that vanishes while it is still being made is a failed insert, read back
    #: from its operation, not a preemption)
    up: Mapping[tuple[str, str], CapacityRequest]
    #: (zone, slot) -> "instance" | "group": what deleting that request deletes
    kinds: Mapping[tuple[str, str], str]
    #: templates our MIGs use (the sweep leaves them)
    templates: frozenset[str]
    #: (zone, slot) -> (collection, name) of each of its resources: what a delete deletes
    parts: Mapping[tuple[str, str], tuple[tuple[str, str], ...]]


def look(
    instances: Iterable[Any],
    groups: Iterable[Any],
    *,
    creating: frozenset[tuple[str, str]] = frozenset(),
    deleting: frozenset[tuple[str, str]] = frozenset(),
) -> Look:
    """Our requests and nodes in ``instances`` (managed ones) and ``groups`` (any: ours are
    picked by their description). ``creating`` / ``deleting``: (zone, slot) of creates under
    way and requests this controller deleted. Raises ValueError when something is
    malformed."""
    hosts = [host_from_api(i) for i in instances]
    ours = [g for g in map(group_from_api, groups) if g is not None]
    by_zone: dict[str, dict[str, Host]] = {}
    for h in hosts:
        by_zone.setdefault(h.zone, {})[h.name] = h
    slots: dict[tuple[str, str], _Slot] = {}
    members: set[tuple[str, str]] = set()
    for g in ours:
        k, n = g.slice
        entry = slots.setdefault((g.zone, g.slot), _Slot(g.zone, g.slot, n, KIND_GROUP))
        entry.accelerator = g.facts.get("accelerator") or entry.accelerator
        zone_hosts = by_zone.get(g.zone, {})
        entry.parts[k] = group_part(
            g,
            zone_hosts,
            creating=(g.zone, g.slot) in creating,
            deleting=(g.zone, g.slot) in deleting,
        )
        members.update((g.zone, f"{g.name}-{i}") for i in range(g.size))
    for h in hosts:
        if (h.zone, h.name) in members:
            continue
        slot, index, slices = h.slot, h.slice, h.slices
        if cb.part_names(slot, slices)[min(index, slices - 1)] != h.name:
            slot, slices, index = h.name, 1, 0  # a stray host: shown as its own request
        entry = slots.setdefault((h.zone, slot), _Slot(h.zone, slot, slices))
        entry.accelerator = h.labels.get(cb.LABEL_ACCELERATOR) or entry.accelerator
        entry.topology = h.labels.get(cb.LABEL_TOPOLOGY) or entry.topology
        entry.parts[index] = instance_part(h, index, deleting=(h.zone, slot) in deleting)
    requests, nodes, up = [], [], {}
    for key in sorted(slots):
        entry = slots[key]
        request = _request(entry, waiting=key in creating)
        requests.append(request)
        nodes += [p.node for _, p in sorted(entry.parts.items()) if p.node is not None]
        if entry.kind == KIND_INSTANCE and request.slices == 1:
            part = entry.parts.get(0)
            if part is not None and part.state == RequestState.ACTIVE:
                up[key] = request
    return Look(
        tuple(requests),
        tuple(nodes),
        MappingProxyType(up),
        MappingProxyType({k: s.kind for k, s in slots.items()}),
        frozenset(g.template for g in ours if g.template),
        MappingProxyType(
            {
                k: tuple((s.collection, p.name) for _, p in sorted(s.parts.items()))
                for k, s in slots.items()
            }
        ),
    )


def _request(entry: _Slot, *, waiting: bool) -> CapacityRequest:
    parts = dict(entry.parts)
    for k in range(entry.slices):  # a slice gone: lost (or not made yet while creating)
        if k not in parts:
            name = cb.part_names(entry.slot, entry.slices)[k]
            state = RequestState.WAITING if waiting else RequestState.SUSPENDED
            word = "CREATING" if waiting else "DELETED"
            parts[k] = Part(k, name, state, word, ended_by=None if waiting else Initiator.SERVICE)
    decided = min(parts.values(), key=lambda p: (_PRECEDENCE.index(p.state), p.index))
    created = min((p.created for p in parts.values() if p.created), default=None)
    ends = min((p.ends for p in parts.values() if p.ends), default=None)
    mode = next((p.mode for p in parts.values() if p.mode), None)
    return CapacityRequest(
        name=entry.slot,
        zone=entry.zone,
        state=decided.state,
        api=API,
        api_kind=entry.kind,
        api_state=decided.word if decided.state != RequestState.UNKNOWN else "UNKNOWN",
        raw_state=decided.word,
        ended_by=decided.ended_by,
        accelerator=entry.accelerator,
        topology=entry.topology,
        mode=mode,
        labels=MappingProxyType({MANAGED_LABEL: MANAGED_VALUE}),
        create_time=created,
        error=decided.error,
        termination_time=ends,
        slices=entry.slices,
        slice_prefix=entry.slot if entry.slices > 1 else None,
    )


def gone(request: CapacityRequest) -> CapacityRequest:
    """``request`` (a single-host one seen RUNNING last look) now missing: the cloud took it."""
    return dataclasses.replace(
        request,
        state=RequestState.SUSPENDED,
        api_state="DELETED",
        raw_state="DELETED",
        ended_by=Initiator.SERVICE if request.mode in ("spot", None) else None,
        error=None,
    )


__all__ = [
    "INSTANCE_STATES",
    "STATE_WORDS",
    "Look",
    "Part",
    "gone",
    "group_part",
    "instance_part",
    "look",
    "request_state",
]
