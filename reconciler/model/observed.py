"""Observed cloud state: the nodes capacity requests yield, and one look at the world.

An ``Observation`` is one consistent look: every capacity request (``model/capacity``) and
node in the zones it covers, plus the zones it could *not* see (``unreachable``). A zone that
was not seen is *unknown*, never empty: the planner must not create or delete on the strength
of it. Each API adapter parses its own JSON into these values (the TPU API's:
``adapters/tpu_api_parse.py``); nothing here knows an API's wire format.

A ``Node`` is one slice's hosts, its workers in order (``endpoints``). A multislice request
is seen as one *slot node* whose workers are every slice's (``model/multislice.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from reconciler.model.capacity import CapacityRequest


class NodeState(StrEnum):
    """A node's state. The TPU API's node states are these words; another API's adapter maps
    its hosts onto them (a running host READY, a preempted one PREEMPTED, ...)."""

    CREATING = "CREATING"
    READY = "READY"
    RESTARTING = "RESTARTING"
    REIMAGING = "REIMAGING"
    DELETING = "DELETING"
    REPAIRING = "REPAIRING"
    STOPPED = "STOPPED"
    STOPPING = "STOPPING"
    STARTING = "STARTING"
    PREEMPTED = "PREEMPTED"
    TERMINATED = "TERMINATED"
    HIDING = "HIDING"
    HIDDEN = "HIDDEN"
    UNHIDING = "UNHIDING"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True, slots=True)
class NetworkEndpoint:
    ip_address: str
    external_ip: str | None = None
    port: int | None = None


@dataclass(frozen=True, slots=True)
class Symptom:
    """One of a node's ``symptoms[]``: OUT_OF_MEMORY, HBM_OUT_OF_MEMORY, MESH_BUILD_FAIL, ..."""

    kind: str  # symptomType
    worker: str | None = None  # workerId
    details: str = ""
    create_time: str | None = None


@dataclass(frozen=True, slots=True)
class Maintenance:
    """A node's ``upcomingMaintenance``: when, what kind, and whether it can be moved."""

    kind: str | None = None  # type: SCHEDULED | UNSCHEDULED
    status: str | None = None  # maintenanceStatus: PENDING | ONGOING
    window_start: str | None = None
    window_end: str | None = None
    can_reschedule: bool | None = None


@dataclass(frozen=True, slots=True)
class Node:
    name: str  # node id
    zone: str
    state: NodeState
    health: str | None = None
    accelerator_type: str | None = None
    create_time: str | None = None
    uid: str | None = None  # the API's numeric ``id``
    endpoints: tuple[NetworkEndpoint, ...] = ()
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    request: str | None = None  # the full resource name of the request it belongs to
    raw_state: str = ""
    symptoms: tuple[Symptom, ...] = ()
    maintenance: Maintenance | None = None  # upcomingMaintenance
    health_description: str | None = None
    multislice_node: bool = False
    #: on a multislice slot's node (``_slot_node`` below): its slices' own nodes, slice 0 first
    slices: tuple[Node, ...] = ()
    #: the setup generation its startup script runs at each boot (``setup.at_boot``,
    #: ``model/boot_script.boot_generation``); None: it boots without ours
    boot_generation: int | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.zone, self.name)

    @property
    def instance(self) -> str:
        """Identifies this incarnation of the node: a re-created node gets a new value."""
        return f"{self.name}@{self.uid or self.create_time or '?'}"

    def ips(self, *, internal: bool = False) -> tuple[str, ...]:
        """One address per worker, worker 0 first."""
        if internal:
            return tuple(e.ip_address for e in self.endpoints)
        return tuple(e.external_ip or e.ip_address for e in self.endpoints)

    def vm_names(self) -> tuple[str, ...]:
        """A Compute Engine slot's VM names, worker order, from its names alone: a single-host
        slice is one instance named as its slice; a multi-host slice's MIG creates its hosts
        by the explicit names ``<slice>-0``, ``<slice>-1``, ...
        (``compute_body.create_instances_body``), its workers in that order; a multislice
        slot's slices follow each other, slice 0 first."""
        names: tuple[str, ...] = ()
        for part in self.slices or (self,):
            names += host_names(part.name, len(part.endpoints))
        return names


@dataclass(frozen=True, slots=True)
class Observation:
    """One look at the world. ``zones`` None means every zone was asked (``locations/-``)."""

    requests: tuple[CapacityRequest, ...] = ()
    nodes: tuple[Node, ...] = ()
    unreachable: frozenset[str] = frozenset()
    zones: frozenset[str] | None = None
    _request_index: Mapping[tuple[str, str], CapacityRequest] = field(
        init=False, repr=False, compare=False
    )
    _node_index: Mapping[tuple[str, str], Node] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_request_index", {r.key: r for r in self.requests})
        object.__setattr__(self, "_node_index", {n.key: n for n in self.nodes})
        for r in self.requests:  # a multislice request is one node per slot: its slices
            if r.slices > 1 and (node := _slot_node(r, self._node_index)) is not None:
                self._node_index[r.key] = node  # type: ignore[index]

    def knows(self, zone: str) -> bool:
        """True when this observation saw ``zone`` completely (absence there is real)."""
        if zone in self.unreachable:
            return False
        return self.zones is None or zone in self.zones

    def request(self, zone: str, name: str) -> CapacityRequest | None:
        return self._request_index.get((zone, name))

    def node(self, zone: str, name: str) -> Node | None:
        return self._node_index.get((zone, name))

    def node_of(self, request: CapacityRequest) -> Node | None:
        """The node ``request`` yields (its slot node when it is a multislice)."""
        return self._node_index.get(request.node_key)


# --- multislice: one node per slot (model/multislice.py says what it means) --------------------

#: Node states in which a slice is lost (preempted or terminated).
LOST_NODE_STATES: Final = frozenset({NodeState.PREEMPTED, NodeState.TERMINATED})


def slice_names(prefix: str, count: int) -> tuple[str, ...]:
    """The node names of a multislice request: ``<prefix>-0 ... <prefix>-(count-1)``."""
    return tuple(f"{prefix}-{i}" for i in range(count))


def host_names(name: str, hosts: int) -> tuple[str, ...]:
    """The Compute Engine instances of a slice named ``name`` with ``hosts`` hosts, worker
    order: the one instance named as the slice, or a MIG's ``<name>-0 ... <name>-(hosts-1)``."""
    return (name,) if hosts <= 1 else slice_names(name, hosts)


def _slot_node(request: CapacityRequest, index: Mapping[tuple[str, str], Node]) -> Node | None:
    """The one node the controller sees for multislice ``request`` (None when no slice exists
    yet): its workers are every slice's in slice order; READY only when every slice is."""
    names = slice_names(request.slice_prefix or request.name, request.slices)
    found = [index.get((request.zone, n)) for n in names]
    present = [n for n in found if n is not None]
    if not present:
        return None
    states = [n.state if n is not None else NodeState.CREATING for n in found]
    lost = [s for s in states if s in LOST_NODE_STATES]
    if lost:
        state = lost[0]
    elif NodeState.DELETING in states:
        state = NodeState.DELETING
    else:
        state = next((s for s in states if s != NodeState.READY), NodeState.READY)
    uids = ",".join(n.uid or n.create_time or "?" for n in present)
    health = next((n.health for n in present if n.health not in (None, "HEALTHY")), None)
    first = present[0]
    return replace(
        first,
        name=request.name,
        state=state,
        health=health or first.health,
        uid=hashlib.sha256(f"{len(present)}:{uids}".encode()).hexdigest()[:20],
        endpoints=tuple(e for n in present for e in n.endpoints),
        raw_state=state.value,
        symptoms=tuple(s for n in present for s in n.symptoms),
        maintenance=next((n.maintenance for n in present if n.maintenance), None),
        slices=tuple(present),
    )
