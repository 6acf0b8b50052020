"""Observed cloud state: typed, immutable values parsed from the Cloud TPU v2 API.

Field names follow the SDK's generated messages
(``googlecloudsdk/generated_clients/apis/tpu/v2/tpu_v2_messages.py``). Both cloud backends
(gcloud JSON output and the REST API) return the same JSON shapes, so the parsing lives here,
once: ``queued_resource_from_api`` and ``node_from_api`` accept one resource dict and raise
``ValueError`` on anything malformed — the adapter turns that into a transient error.

An ``Observation`` is one consistent look at the world: every QR and node in the zones it
covers, plus the zones it could *not* see (``unreachable``). A zone that was not seen is
*unknown*, never empty: the planner must not create or delete on the strength of it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final

MANAGED_LABEL: Final = "managed-by"
MANAGED_VALUE: Final = "tpu-reconciler"


class QRState(StrEnum):
    CREATING = "CREATING"
    ACCEPTED = "ACCEPTED"
    WAITING_FOR_RESOURCES = "WAITING_FOR_RESOURCES"
    PROVISIONING = "PROVISIONING"
    ACTIVE = "ACTIVE"
    SUSPENDING = "SUSPENDING"
    SUSPENDED = "SUSPENDED"
    FAILED = "FAILED"
    DELETING = "DELETING"
    UNKNOWN = "UNKNOWN"  # STATE_UNSPECIFIED or a value this version does not know


#: States in which a QR is still waiting for capacity.
QUEUED_STATES: Final = frozenset(
    {QRState.CREATING, QRState.ACCEPTED, QRState.WAITING_FOR_RESOURCES}
)
#: States in which a QR has capacity (a race candidate in these has "won").
WON_STATES: Final = frozenset({QRState.PROVISIONING, QRState.ACTIVE})
#: Terminal states that still hold quota: the QR must be deleted before it can be re-created.
DEAD_STATES: Final = frozenset({QRState.SUSPENDED, QRState.FAILED})
#: States in which something is moving and polling should be fast.
MOVING_STATES: Final = QUEUED_STATES | {
    QRState.PROVISIONING,
    QRState.SUSPENDING,
    QRState.DELETING,
}


class NodeState(StrEnum):
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
class ErrorInfo:
    """``state.failedData.error`` of a QR: a google.rpc.Status (code 8 = RESOURCE_EXHAUSTED)."""

    code: int | None
    message: str


@dataclass(frozen=True, slots=True)
class QueuedResource:
    name: str  # the QR id (basename of the resource name)
    zone: str
    state: QRState
    initiator: str | None = None  # state.stateInitiator: USER | SERVICE
    node_id: str | None = None
    accelerator_type: str | None = None
    runtime_version: str | None = None
    mode: str | None = None  # "spot" | "reserved" | "on-demand" | "flex-start"
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    create_time: str | None = None
    error: ErrorInfo | None = None
    raw_state: str = ""  # the API's own word when ``state`` is UNKNOWN
    termination_time: str | None = None  # v2alpha1 runDuration.terminationTime (flex-start)
    node_count: int = 1  # multisliceParams.nodeCount: slices (nodes <prefix>-0 ...)
    node_prefix: str | None = None  # multisliceParams.nodeIdPrefix (None: the QR id)

    @property
    def managed(self) -> bool:
        return self.labels.get(MANAGED_LABEL) == MANAGED_VALUE

    @property
    def key(self) -> tuple[str, str]:
        return (self.zone, self.name)


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
    queued_resource: str | None = None  # full resource name of the owning QR
    raw_state: str = ""
    symptoms: tuple[Symptom, ...] = ()
    maintenance: Maintenance | None = None  # upcomingMaintenance
    health_description: str | None = None
    multislice_node: bool = False
    #: on a multislice slot's node (``_slot_node`` below): its slices' own nodes, slice 0 first
    slices: tuple[Node, ...] = ()

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


@dataclass(frozen=True, slots=True)
class Observation:
    """One look at the world. ``zones`` None means every zone was asked (``locations/-``)."""

    queued_resources: tuple[QueuedResource, ...] = ()
    nodes: tuple[Node, ...] = ()
    unreachable: frozenset[str] = frozenset()
    zones: frozenset[str] | None = None
    _qr_index: Mapping[tuple[str, str], QueuedResource] = field(
        init=False, repr=False, compare=False
    )
    _node_index: Mapping[tuple[str, str], Node] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_qr_index", {q.key: q for q in self.queued_resources})
        object.__setattr__(self, "_node_index", {n.key: n for n in self.nodes})
        for q in self.queued_resources:  # a multislice QR is one node per slot: its slices
            if q.node_count > 1 and (node := _slot_node(q, self._node_index)) is not None:
                self._node_index[q.key] = node  # type: ignore[index]

    def knows(self, zone: str) -> bool:
        """True when this observation saw ``zone`` completely (absence there is real)."""
        if zone in self.unreachable:
            return False
        return self.zones is None or zone in self.zones

    def qr(self, zone: str, name: str) -> QueuedResource | None:
        return self._qr_index.get((zone, name))

    def node(self, zone: str, name: str) -> Node | None:
        return self._node_index.get((zone, name))


# --- parsing API JSON --------------------------------------------------------------------------


def _basename(resource: str) -> str:
    return resource.rstrip("/").rsplit("/", 1)[-1]


def _zone_of(resource: str) -> str:
    parts = resource.split("/")
    try:
        return parts[parts.index("locations") + 1]
    except (ValueError, IndexError):
        raise ValueError(f"resource name without a location: {resource!r}") from None


def _str_map(value: Any) -> Mapping[str, str]:
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, dict):
        raise ValueError("labels must be an object")
    return MappingProxyType({str(k): str(v) for k, v in value.items()})


def _enum(cls: type[QRState] | type[NodeState], raw: Any) -> Any:
    if raw is None:
        return cls.UNKNOWN
    if not isinstance(raw, str):
        raise ValueError(f"state must be a string, got {type(raw).__name__}")
    try:
        return cls(raw)
    except ValueError:
        return cls.UNKNOWN


def queued_resource_from_api(data: Any) -> QueuedResource:
    """Parse one ``QueuedResource`` JSON object. Raises ValueError when malformed."""
    try:
        return _queued_resource(data)
    except (AttributeError, TypeError, KeyError, IndexError) as e:
        raise ValueError(f"malformed queued resource: {e}") from None


def node_from_api(data: Any) -> Node:
    """Parse one ``Node`` JSON object. Raises ValueError when malformed."""
    try:
        return _node(data)
    except (AttributeError, TypeError, KeyError, IndexError) as e:
        raise ValueError(f"malformed node: {e}") from None


def _queued_resource(data: Any) -> QueuedResource:
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ValueError("queued resource without a name")
    resource = data["name"]
    state_obj = data.get("state") or {}
    if not isinstance(state_obj, dict):
        raise ValueError("queued resource state must be an object")
    raw_state = state_obj.get("state")
    state = _enum(QRState, raw_state)
    error = None
    failed = state_obj.get("failedData")
    if isinstance(failed, dict) and isinstance(failed.get("error"), dict):
        err = failed["error"]
        code = err.get("code")
        error = ErrorInfo(
            code=code if isinstance(code, int) else None, message=str(err.get("message", ""))
        )
    node_id = accelerator = runtime = None
    node_count, node_prefix = 1, None
    labels: Mapping[str, str] = MappingProxyType({})
    specs = (data.get("tpu") or {}).get("nodeSpec") or []
    if specs and isinstance(specs, list) and isinstance(specs[0], dict):
        spec = specs[0]
        node_id = spec.get("nodeId")
        # v2 names it multisliceParams; v2alpha1 (read while the file has a flex-start slot)
        # multiNodeParams
        multi = spec.get("multisliceParams") or spec.get("multiNodeParams")
        if isinstance(multi, dict) and isinstance(multi.get("nodeCount"), int | str):
            node_count = max(1, int(multi["nodeCount"]))
            prefix = multi.get("nodeIdPrefix")
            node_prefix = prefix if isinstance(prefix, str) and prefix else None
        node = spec.get("node") or {}
        if isinstance(node, dict):
            accelerator = node.get("acceleratorType")
            runtime = node.get("runtimeVersion")
            labels = _str_map(node.get("labels"))
    if data.get("provisioningModel") == "FLEX_START":
        mode: str | None = "flex-start"
    elif "spot" in data:
        mode = "spot"
    elif data.get("reservationName") or (
        isinstance(data.get("guaranteed"), dict) and data["guaranteed"].get("reserved")
    ):
        mode = "reserved"
    else:
        mode = "on-demand"
    initiator = state_obj.get("stateInitiator")
    return QueuedResource(
        name=_basename(resource),
        zone=_zone_of(resource),
        state=state,
        initiator=initiator if isinstance(initiator, str) else None,
        node_id=node_id if isinstance(node_id, str) else None,
        accelerator_type=accelerator if isinstance(accelerator, str) else None,
        runtime_version=runtime if isinstance(runtime, str) else None,
        mode=mode,
        labels=labels,
        create_time=data.get("createTime") if isinstance(data.get("createTime"), str) else None,
        error=error,
        raw_state=str(raw_state or ""),
        termination_time=_text((data.get("runDuration") or {}).get("terminationTime")),
        node_count=node_count,
        node_prefix=node_prefix,
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _symptoms(value: Any) -> tuple[Symptom, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(
        Symptom(
            kind=_text(s.get("symptomType")) or "SYMPTOM_TYPE_UNSPECIFIED",
            worker=_text(s.get("workerId")),
            details=_text(s.get("details")) or "",
            create_time=_text(s.get("createTime")),
        )
        for s in value
        if isinstance(s, dict)
    )


def _maintenance(value: Any) -> Maintenance | None:
    if not isinstance(value, dict) or not value:
        return None
    can = value.get("canReschedule")
    return Maintenance(
        kind=_text(value.get("type")),
        status=_text(value.get("maintenanceStatus")),
        window_start=_text(value.get("windowStartTime")),
        window_end=_text(value.get("windowEndTime")),
        can_reschedule=can if isinstance(can, bool) else None,
    )


def _node(data: Any) -> Node:
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ValueError("node without a name")
    endpoints = []
    for ep in data.get("networkEndpoints") or []:
        if not isinstance(ep, dict) or not isinstance(ep.get("ipAddress"), str):
            raise ValueError("network endpoint without an ipAddress")
        access = ep.get("accessConfig") or {}
        external = access.get("externalIp") if isinstance(access, dict) else None
        port = ep.get("port")
        endpoints.append(
            NetworkEndpoint(
                ip_address=ep["ipAddress"],
                external_ip=external if isinstance(external, str) and external else None,
                port=port if isinstance(port, int) else None,
            )
        )
    raw_state = data.get("state")
    uid = data.get("id")
    return Node(
        name=_basename(data["name"]),
        zone=_zone_of(data["name"]),
        state=_enum(NodeState, raw_state),
        health=data.get("health") if isinstance(data.get("health"), str) else None,
        accelerator_type=(
            data.get("acceleratorType") if isinstance(data.get("acceleratorType"), str) else None
        ),
        create_time=data.get("createTime") if isinstance(data.get("createTime"), str) else None,
        uid=str(uid) if isinstance(uid, str | int) and not isinstance(uid, bool) else None,
        endpoints=tuple(endpoints),
        labels=_str_map(data.get("labels")),
        queued_resource=(
            data.get("queuedResource") if isinstance(data.get("queuedResource"), str) else None
        ),
        raw_state=str(raw_state or ""),
        symptoms=_symptoms(data.get("symptoms")),
        maintenance=_maintenance(data.get("upcomingMaintenance")),
        health_description=_text(data.get("healthDescription")),
        multislice_node=data.get("multisliceNode") is True,
    )


# --- multislice: one node per slot (model/multislice.py says what it means) --------------------

#: Node states in which a slice is lost (preempted or terminated).
LOST_NODE_STATES: Final = frozenset({NodeState.PREEMPTED, NodeState.TERMINATED})


def slice_names(prefix: str, count: int) -> tuple[str, ...]:
    """The node ids of a multislice QR: ``<prefix>-0 ... <prefix>-(count-1)``."""
    return tuple(f"{prefix}-{i}" for i in range(count))


def _slot_node(qr: QueuedResource, index: Mapping[tuple[str, str], Node]) -> Node | None:
    """The one node the controller sees for multislice ``qr`` (None when no slice exists yet):
    its workers are every slice's in slice order; READY only when every slice is."""
    names = slice_names(qr.node_prefix or qr.name, qr.node_count)
    found = [index.get((qr.zone, n)) for n in names]
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
        name=qr.name,
        state=state,
        health=health or first.health,
        uid=hashlib.sha256(f"{len(present)}:{uids}".encode()).hexdigest()[:20],
        endpoints=tuple(e for n in present for e in n.endpoints),
        raw_state=state.value,
        symptoms=tuple(s for n in present for s in n.symptoms),
        maintenance=next((n.maintenance for n in present if n.maintenance), None),
        slices=tuple(present),
    )
