"""The Cloud TPU API's JSON read into neutral values: a queued resource is a capacity request.

Field names follow the SDK's generated messages
(``googlecloudsdk/generated_clients/apis/tpu/v2/tpu_v2_messages.py``). Both TPU API transports
(gcloud's JSON output and the REST API) return the same JSON shapes, so the parsing lives
here, once, for ``adapters/rest.py`` and ``adapters/gcloud.py``: ``request_from_api`` and
``node_from_api`` accept one resource dict and raise ``ValueError`` on anything malformed —
the adapter turns that into a transient error.

A queued resource's state maps onto the neutral ``RequestState``; its own word stays on the
value (``api_state``) for everything shown:

    TPU API state                          RequestState
    CREATING, ACCEPTED,
    WAITING_FOR_RESOURCES                  WAITING
    PROVISIONING                           PROVISIONING
    ACTIVE                                 ACTIVE
    SUSPENDING                             SUSPENDING
    SUSPENDED                              SUSPENDED (``stateInitiator`` -> ``ended_by``)
    FAILED                                 FAILED (``failedData.error`` -> ``error``)
    DELETING                               DELETING
    STATE_UNSPECIFIED, anything else       UNKNOWN (``api_state`` UNKNOWN, ``raw_state`` the word)

The TPU API never reports ``ENDED``: a flex-start run's end is a SUSPENDED queued resource
past its ``runDuration.terminationTime`` (``core/flex.py`` reads it so).

May: parse values. May not: do I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final

from reconciler.adapters.cloud import Capability
from reconciler.errors import PermanentCloudError
from reconciler.model import flex
from reconciler.model.boot_script import STARTUP_KEY, boot_generation
from reconciler.model.capacity import CapacityRequest, ErrorInfo, Initiator, RequestState
from reconciler.model.observed import Maintenance, NetworkEndpoint, Node, NodeState, Symptom
from reconciler.model.vocabulary import TPU_API

#: The ``api`` of every request this module reads, and what the API calls one.
API: Final = TPU_API
KIND: Final = "queued resource"
#: ``QueuedResource.provisioningModel`` of a flex-start request (v2alpha1).
FLEX_START: Final = "FLEX_START"
#: A TPU API long-running operation's full name, the only shape that is read back later (it
#: lands in a URL path).
OPERATION_NAME_RE: Final = re.compile(
    r"projects/(?!\.)[A-Za-z0-9.:_-]{1,100}/locations/[a-z0-9-]{1,40}"
    r"/operations/(?!\.)[A-Za-z0-9._-]{1,200}"
)


class QRState(StrEnum):
    """A queued resource's ``state.state``, as the TPU API spells it."""

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


#: The mapping of the module docstring.
REQUEST_STATES: Final[Mapping[str, RequestState]] = MappingProxyType(
    {
        QRState.CREATING: RequestState.WAITING,
        QRState.ACCEPTED: RequestState.WAITING,
        QRState.WAITING_FOR_RESOURCES: RequestState.WAITING,
        QRState.PROVISIONING: RequestState.PROVISIONING,
        QRState.ACTIVE: RequestState.ACTIVE,
        QRState.SUSPENDING: RequestState.SUSPENDING,
        QRState.SUSPENDED: RequestState.SUSPENDED,
        QRState.FAILED: RequestState.FAILED,
        QRState.DELETING: RequestState.DELETING,
        QRState.UNKNOWN: RequestState.UNKNOWN,
    }
)
#: Every word ``api_state`` may hold for a queued resource (the metrics' ``state`` label).
STATE_WORDS: Final = tuple(s.value for s in QRState)


def capability(transport: str, *, observes_all_zones: bool) -> Capability:
    """What a TPU API cloud can do over ``transport``: read back the API's operation names,
    guest attributes, flex-start (v2alpha1); whether one look covers every zone is the
    transport's."""
    return Capability(
        api=API,
        transport=transport,
        observes_all_zones=observes_all_zones,
        operation_names=OPERATION_NAME_RE,
        guest_attributes=True,
        flex_start=True,
    )


def check_api(api: str) -> str:
    """``api`` when it is the TPU API; a request of another API is a permanent error here."""
    if api != API:
        raise PermanentCloudError(
            f"a request of the {api!r} API reached the Cloud TPU API's adapter",
            status="FAILED_PRECONDITION",
        )
    return api


def request_state(word: str | None) -> RequestState:
    """The neutral state of a queued resource state word (UNKNOWN for any other word)."""
    return REQUEST_STATES.get(word or "", RequestState.UNKNOWN)


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


def request_from_api(data: Any) -> CapacityRequest:
    """Parse one ``QueuedResource`` JSON object. Raises ValueError when malformed."""
    try:
        return _request(data)
    except (AttributeError, TypeError, KeyError, IndexError) as e:
        raise ValueError(f"malformed queued resource: {e}") from None


def node_from_api(data: Any) -> Node:
    """Parse one ``Node`` JSON object. Raises ValueError when malformed."""
    try:
        return _node(data)
    except (AttributeError, TypeError, KeyError, IndexError) as e:
        raise ValueError(f"malformed node: {e}") from None


def _mode(data: Mapping[str, Any]) -> str:
    if data.get("provisioningModel") == FLEX_START:
        return flex.MODE
    if "spot" in data:
        return "spot"
    if data.get("reservationName") or (
        isinstance(data.get("guaranteed"), dict) and data["guaranteed"].get("reserved")
    ):
        return "reserved"
    return "on-demand"


def _request(data: Any) -> CapacityRequest:
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ValueError("queued resource without a name")
    resource = data["name"]
    state_obj = data.get("state") or {}
    if not isinstance(state_obj, dict):
        raise ValueError("queued resource state must be an object")
    raw_state = state_obj.get("state")
    word: QRState = _enum(QRState, raw_state)
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
    initiator = state_obj.get("stateInitiator")
    return CapacityRequest(
        name=_basename(resource),
        zone=_zone_of(resource),
        state=REQUEST_STATES[word],
        api=API,
        api_kind=KIND,
        api_state=word.value,
        raw_state=str(raw_state or ""),
        ended_by=Initiator(initiator) if initiator in (Initiator.USER, Initiator.SERVICE) else None,
        node_name=node_id if isinstance(node_id, str) else None,
        accelerator=accelerator if isinstance(accelerator, str) else None,
        image=runtime if isinstance(runtime, str) else None,
        mode=_mode(data),
        labels=labels,
        create_time=data.get("createTime") if isinstance(data.get("createTime"), str) else None,
        error=error,
        termination_time=_text((data.get("runDuration") or {}).get("terminationTime")),
        slices=node_count,
        slice_prefix=node_prefix,
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


def maintenance_of(value: Any) -> Maintenance | None:
    """An ``upcomingMaintenance`` object (the TPU API's node, a Compute Engine instance's
    ``resourceStatus``: the same fields); None when absent."""
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


def _boot_generation(metadata: Any) -> int | None:
    """The setup generation the node's ``startup-script`` runs (``setup.at_boot``)."""
    script = metadata.get(STARTUP_KEY) if isinstance(metadata, dict) else None
    return boot_generation(script if isinstance(script, str) else None)


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
        request=(
            data.get("queuedResource") if isinstance(data.get("queuedResource"), str) else None
        ),
        raw_state=str(raw_state or ""),
        symptoms=_symptoms(data.get("symptoms")),
        maintenance=maintenance_of(data.get("upcomingMaintenance")),
        health_description=_text(data.get("healthDescription")),
        multislice_node=data.get("multisliceNode") is True,
        boot_generation=_boot_generation(data.get("metadata")),
    )
