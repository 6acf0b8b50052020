"""Compute Engine's JSON read into values: an ``Instance`` into a ``Host``, one of our
``InstanceGroupManager``s into a ``Group`` (its description says whose: ``compute_body``),
an ``Operation`` into the port's ``OperationStatus``. What they mean for a capacity request
(the state tables) is ``adapters/compute_states.py``.

An operation: ``status`` DONE with ``error.errors[]`` failed. Its first error's ``code``
decides how it is read back (``operation_status``): a stockout (``ZONE_RESOURCE_POOL_EXHAUSTED``
and kin) as UNAVAILABLE (transient: the race goes on, the create is sent again later),
``QUOTA_EXCEEDED`` as RESOURCE_EXHAUSTED naming the quota (the slot waits for quota), anything
else by its ``httpErrorStatusCode``.

Each parser takes one resource dict and raises ``ValueError`` on anything malformed (the
adapter turns that into a transient error). May: parse values. May not: do I/O.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from reconciler.adapters import compute_body as cb
from reconciler.adapters.cloud import Capability, OperationStatus
from reconciler.adapters.tpu_api_parse import maintenance_of
from reconciler.model import flex
from reconciler.model.boot_script import STARTUP_KEY, boot_generation
from reconciler.model.observed import Maintenance, NetworkEndpoint
from reconciler.model.stamps import epoch_or_none
from reconciler.model.times import utc_text

API: Final = cb.API
KIND_INSTANCE: Final = "instance"
KIND_GROUP: Final = "MIG slice"
#: A Compute Engine operation's full name (``Submitted.operation``): zonal, regional, global.
OPERATION_NAME_RE: Final = re.compile(
    r"projects/(?!\.)[A-Za-z0-9.:_-]{1,100}/(?:zones/[a-z0-9-]{1,40}|regions/[a-z0-9-]{1,40}"
    r"|global)/operations/(?!\.)[A-Za-z0-9._-]{1,200}"
)
#: Error codes of an operation that mean "no capacity here now".
STOCKOUT_CODES: Final = frozenset(
    {
        "ZONE_RESOURCE_POOL_EXHAUSTED",
        "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
        "RESOURCE_POOL_EXHAUSTED",
        "GCE_STOCKOUT",
        "STOCKOUT",
    }
)
QUOTA_CODE: Final = "QUOTA_EXCEEDED"
_CREATING_ACTIONS: Final = ("creating", "creatingWithoutRetries", "recreating")


def capability() -> Capability:
    """What the Compute Engine cloud can do: every zone in one aggregated list, its own
    operation names, flex-start; no guest attributes."""
    return Capability(
        api=API,
        transport="rest",
        observes_all_zones=True,
        operation_names=OPERATION_NAME_RE,
        guest_attributes=False,
        flex_start=True,
    )


# --- the resources ----------------------------------------------------------------------------


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _last(link: str) -> str:
    return link.rstrip("/").rsplit("/", 1)[-1]


def _zone(data: Mapping[str, Any]) -> str:
    zone = _text(data.get("zone"))
    if zone is None:
        raise ValueError(f"{data.get('name')!r} has no zone")
    return _last(zone)


def _stamp(value: Any) -> str | None:
    """An API time as the controller writes times (UTC ``...Z``); None when it is none."""
    return _utc(value) if isinstance(value, str) else None


@functools.lru_cache(maxsize=8192)
def _utc(value: str) -> str | None:
    """Compute Engine writes its times with an offset; each is read once, not once a poll."""
    moment = epoch_or_none(value)
    return None if moment is None else utc_text(moment)


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return default


@dataclass(frozen=True, slots=True)
class Host:
    """One instance, as far as a capacity request cares."""

    name: str
    zone: str
    status: str
    uid: str | None
    created: str | None
    labels: Mapping[str, str]
    ip: str | None
    external_ip: str | None
    model: str  # SPOT | STANDARD | FLEX_START | RESERVATION_BOUND
    ends: str | None  # when its run ends (resourceStatus.scheduling.terminationTimestamp)
    boot_generation: int | None = None  # the setup its startup-script runs (setup.at_boot)
    maintenance: Maintenance | None = None  # resourceStatus.upcomingMaintenance

    @property
    def slot(self) -> str:
        return self.labels.get(cb.LABEL_SLOT) or self.name

    @property
    def slice(self) -> int:
        return _int(self.labels.get(cb.LABEL_SLICE))

    @property
    def slices(self) -> int:
        """The slot's slice count its labels say (1 when they say none)."""
        return max(1, _int(self.labels.get(cb.LABEL_SLICES), 1))

    @property
    def endpoint(self) -> NetworkEndpoint | None:
        return None if self.ip is None else NetworkEndpoint(self.ip, self.external_ip)


def host_from_api(data: Any) -> Host:
    """One ``Instance`` JSON object. Raises ValueError when malformed."""
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ValueError("instance without a name")
    labels = data.get("labels") or {}
    if not isinstance(labels, dict):
        raise ValueError("labels must be an object")
    nics = data.get("networkInterfaces") or []
    nic = nics[0] if isinstance(nics, list) and nics and isinstance(nics[0], dict) else {}
    configs = nic.get("accessConfigs") or []
    nat = configs[0].get("natIP") if configs and isinstance(configs[0], dict) else None
    sched = data.get("scheduling") or {}
    status = data.get("resourceStatus") or {}
    uid = data.get("id")
    return Host(
        name=data["name"],
        zone=_zone(data),
        status=_text(data.get("status")) or "UNKNOWN",
        uid=str(uid) if isinstance(uid, str | int) and not isinstance(uid, bool) else None,
        created=_stamp(data.get("creationTimestamp")),
        labels=MappingProxyType({str(k): str(v) for k, v in labels.items()}),
        ip=_text(nic.get("networkIP")),
        external_ip=_text(nat),
        model=_text(sched.get("provisioningModel") if isinstance(sched, dict) else None)
        or ("SPOT" if isinstance(sched, dict) and sched.get("preemptible") else "STANDARD"),
        ends=_stamp(((status.get("scheduling") or {}) if isinstance(status, dict) else {}).get(
            "terminationTimestamp"
        )),
        boot_generation=_boot_generation(data.get("metadata")),
        maintenance=maintenance_of(status.get("upcomingMaintenance"))
        if isinstance(status, dict) else None,
    )  # fmt: skip


def guest_rows(answer: Mapping[str, Any], worker: int) -> list[dict[str, Any]]:
    """``GuestAttributes``' ``queryValue.items`` as the TPU API's flattened rows (``worker_id``,
    ``namespace``, ``key``, ``value``) for host ``worker``. Raises ValueError when malformed."""
    value = answer.get("queryValue") or {}
    items = value.get("items") if isinstance(value, dict) else None
    if not isinstance(items, list | None):
        raise ValueError("queryValue.items is not a list")
    rows = []
    for item in items or ():
        if not isinstance(item, dict):
            raise ValueError("a guest attribute is not an object")
        rows.append({"worker_id": str(worker), **{k: str(item.get(k) or "") for k in _GUEST}})
    return rows


_GUEST: Final = ("namespace", "key", "value")


def _boot_generation(metadata: Any) -> int | None:
    """The setup generation the instance's ``startup-script`` item runs (``setup.at_boot``)."""
    items = metadata.get("items") if isinstance(metadata, dict) else None
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and item.get("key") == STARTUP_KEY:
            value = item.get("value")
            return boot_generation(value if isinstance(value, str) else None)
    return None


@dataclass(frozen=True, slots=True)
class Group:
    """One of our MIGs (its description says whose)."""

    name: str
    zone: str
    uid: str | None
    created: str | None
    target: int
    creating: int
    deleting: int
    facts: Mapping[str, str]
    topology_state: str | None = None
    topology_error: str | None = None
    bulk_error: str | None = None
    template: str | None = None

    @property
    def slot(self) -> str:
        return self.facts.get("slot") or self.name

    @property
    def size(self) -> int:
        """Hosts it has or should have: its target size, or its slice's hosts while none
        were asked for yet."""
        return max(self.target, _int(self.facts.get("hosts")))

    @property
    def slice(self) -> tuple[int, int]:
        k, _, n = self.facts.get("slice", "0/1").partition("/")
        return _int(k), max(1, _int(n, 1))


def _error_text(error: Any) -> str | None:
    """``{errors: [{code, message}]}`` -> ``CODE: message`` of the first."""
    errors = error.get("errors") if isinstance(error, dict) else None
    if not isinstance(errors, list) or not errors or not isinstance(errors[0], dict):
        return None
    code, message = _text(errors[0].get("code")), _text(errors[0].get("message"))
    return ": ".join(t for t in (code, message) if t) or None


def group_from_api(data: Any) -> Group | None:
    """One ``InstanceGroupManager`` JSON object; None when it is not one of ours. Raises
    ValueError when malformed."""
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ValueError("instance group manager without a name")
    facts = cb.described(data.get("description"))
    if facts is None or not _text(data.get("zone")):
        return None  # not ours, or a regional group (we make zonal ones)
    actions = data.get("currentActions") or {}
    status = data.get("status") or {}
    if not isinstance(actions, dict) or not isinstance(status, dict):
        raise ValueError("currentActions and status must be objects")
    applied = status.get("appliedAcceleratorTopologies") or []
    topology = applied[0] if isinstance(applied, list) and applied else {}
    topology = topology if isinstance(topology, dict) else {}
    bulk = status.get("bulkInstanceOperation") or {}
    check = bulk.get("lastProgressCheck") if isinstance(bulk, dict) else None
    template = _text(data.get("instanceTemplate"))
    uid = data.get("id")
    return Group(
        name=data["name"],
        zone=_zone(data),
        uid=str(uid) if isinstance(uid, str | int) and not isinstance(uid, bool) else None,
        created=_stamp(data.get("creationTimestamp")),
        target=_int(data.get("targetSize")),
        creating=sum(_int(actions.get(k)) for k in _CREATING_ACTIONS),
        deleting=_int(actions.get("deleting")),
        facts=MappingProxyType(facts),
        topology_state=_text(topology.get("state")),
        topology_error=_error_text((topology.get("stateDetails") or {}).get("error")),
        bulk_error=_error_text(check.get("error")) if isinstance(check, dict) else None,
        template=_last(template) if template else None,
    )


def mode_of(model: str) -> str:
    return {"SPOT": "spot", "FLEX_START": flex.MODE, "RESERVATION_BOUND": "reserved"}.get(
        model, "on-demand"
    )


# --- operations -------------------------------------------------------------------------------


def operation_name(answer: Mapping[str, Any]) -> str | None:
    """``projects/P/zones/Z/operations/N`` of an ``Operation`` (from its ``selfLink``)."""
    link = _text(answer.get("selfLink"))
    if link is None:
        return None
    found = re.search(r"projects/.*$", link)
    return found.group(0) if found else None


def operation_status(answer: Mapping[str, Any]) -> OperationStatus:
    """An ``Operation`` as the port reads it back. Raises ValueError when malformed."""
    name = operation_name(answer) or _text(answer.get("name"))
    error = answer.get("error")
    if name is None or (error is not None and not isinstance(error, dict)):
        raise ValueError("operation without a name, or an error that is not an object")
    done = answer.get("status") == "DONE"
    if not done or not error:
        return OperationStatus(name=name, done=done)
    code, message = failure(error, answer.get("httpErrorStatusCode"))
    return OperationStatus(name=name, done=True, error_code=code, error_message=message)


def failure(error: Mapping[str, Any], http: Any = None) -> tuple[int, str]:
    """(HTTP-like code, message) of an operation's ``error``: 503 for a stockout, 429 for a
    quota (its message names it), else the operation's HTTP status (400 when it gives none)."""
    errors = error.get("errors") if isinstance(error, Mapping) else None
    first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else {}
    word = _text(first.get("code")) or "UNKNOWN"
    message = _text(first.get("message")) or word
    text = message if message.startswith(word) else f"{word}: {message}"
    if word in STOCKOUT_CODES:
        return 503, text
    if word == QUOTA_CODE or _quota_info(first):
        return 429, text
    status = _int(http, 400)
    return (status if status >= 400 else 400), text


def _quota_info(error: Mapping[str, Any]) -> bool:
    details = error.get("errorDetails")
    return isinstance(details, list) and any(
        isinstance(d, dict) and isinstance(d.get("quotaInfo"), dict) for d in details
    )


__all__ = [
    "API",
    "KIND_GROUP",
    "KIND_INSTANCE",
    "OPERATION_NAME_RE",
    "QUOTA_CODE",
    "STOCKOUT_CODES",
    "Group",
    "Host",
    "capability",
    "failure",
    "group_from_api",
    "host_from_api",
    "mode_of",
    "operation_name",
    "operation_status",
]
