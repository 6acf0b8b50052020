"""Capacity requests: what the controller asked a cloud API to hold, as neutral values.

A *capacity request* asks one cloud API for one slot's capacity: a shape (``accelerator``,
``slices``), a place (``zone``), a provisioning ``mode``, and it is in one neutral
``RequestState``. Each API adapter maps its own resource onto it and keeps its own word for
the state beside it (``api_state``: what status, events, history and metrics show, so users
read the cloud's word). The core decides on ``state`` only; it never reads ``api_state``.

The neutral states (the TPU API's mapping is ``adapters/tpu_api_parse.py``, documented in
docs/architecture.md, "Capacity requests"):

    WAITING       queued for capacity that is not there yet (a create in progress counts)
    PROVISIONING  capacity granted, its hosts are being made
    ACTIVE        the capacity is held: its hosts exist
    SUSPENDING    the capacity is being taken away
    SUSPENDED     the capacity was taken away (``ended_by`` SERVICE: preempted; USER:
                  suspended by hand); the request still exists and must be deleted to ask again
    FAILED        the request failed (no capacity in its window, refused, broken)
    ENDED         the request ran to the end it was given (a run length) and still exists
    DELETING      being deleted
    UNKNOWN       a state this version does not know: never acted on

A request yields *nodes* (``model/observed.Node``, one per slice, each with its workers);
``Observation`` joins them. Pure values: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from reconciler.model.vocabulary import DEFAULT_API as DEFAULT_API

#: The label every request the controller makes carries (``settings.prune`` reads it).
MANAGED_LABEL: Final = "managed-by"
MANAGED_VALUE: Final = "tpu-reconciler"


class RequestState(StrEnum):
    """A capacity request's state, whatever API holds it (the module docstring says each)."""

    WAITING = "waiting"
    PROVISIONING = "provisioning"
    ACTIVE = "active"
    SUSPENDING = "suspending"
    SUSPENDED = "suspended"
    FAILED = "failed"
    ENDED = "ended"
    DELETING = "deleting"
    UNKNOWN = "unknown"


class Initiator(StrEnum):
    """Who ended a request's hold on its capacity: its owner, or the cloud (preemption)."""

    USER = "USER"
    SERVICE = "SERVICE"


#: Still waiting for capacity.
WAITING_STATES: Final = frozenset({RequestState.WAITING})
#: Holding capacity or about to (a race candidate in these has "won").
WON_STATES: Final = frozenset({RequestState.PROVISIONING, RequestState.ACTIVE})
#: Over, yet still there: the request must be deleted before the slot can ask again.
DEAD_STATES: Final = frozenset({RequestState.SUSPENDED, RequestState.FAILED, RequestState.ENDED})
#: Something is moving: poll fast.
MOVING_STATES: Final = frozenset(
    {
        RequestState.WAITING,
        RequestState.PROVISIONING,
        RequestState.SUSPENDING,
        RequestState.DELETING,
    }
)
#: States in which the request has (or had) nodes: its delete must take them too (force).
NODE_STATES: Final = frozenset(
    {
        RequestState.PROVISIONING,
        RequestState.ACTIVE,
        RequestState.SUSPENDING,
        RequestState.SUSPENDED,
    }
)


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """Why a request failed, as the cloud said it: a ``google.rpc`` code (8 =
    RESOURCE_EXHAUSTED; None when the API gives none) and its message."""

    code: int | None
    message: str


@dataclass(frozen=True, slots=True)
class CapacityRequest:
    """One capacity request as observed. ``api_state`` (the API's word for its state, shown
    in status, events, history and metrics) defaults to the neutral state's name; it reads
    ``UNKNOWN`` for a word this version does not know, and ``raw_state`` keeps the literal
    word the API sent (for the warning that says so)."""

    name: str  # the request's id: the slot's name
    zone: str
    state: RequestState
    api: str = DEFAULT_API  # which API holds it ("tpu": the Cloud TPU API; "compute" ...)
    api_kind: str = "capacity request"  # what that API calls it ("queued resource")
    api_state: str = ""
    raw_state: str = ""
    ended_by: Initiator | None = None  # who ended a SUSPENDED/ENDED one (None: not said)
    node_name: str | None = None  # the node it yields (None: named like the request)
    accelerator: str | None = None  # its shape, e.g. "v6e-8" (one slice's)
    image: str | None = None  # the software image its nodes boot (TPU API: runtime version)
    mode: str | None = None  # "spot" | "reserved" | "on-demand" | "flex-start"
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    create_time: str | None = None
    error: ErrorInfo | None = None
    termination_time: str | None = None  # when its run ends (flex-start), RFC 3339
    slices: int = 1  # > 1: a multislice of nodes <slice_prefix>-0 ...
    slice_prefix: str | None = None  # the slices' name prefix (None: the request's name)
    #: one slice's shape as its API reports it (None: it does not say; the TPU API names
    #: only the accelerator): its hosts' machine type, chips per side, hosts (VMs)
    machine_type: str | None = None
    topology: str | None = None
    hosts: int | None = None

    def __post_init__(self) -> None:
        if not self.api_state:
            object.__setattr__(self, "api_state", self.state.name)

    @property
    def managed(self) -> bool:
        return self.labels.get(MANAGED_LABEL) == MANAGED_VALUE

    @property
    def key(self) -> tuple[str, str]:
        return (self.zone, self.name)

    @property
    def node_key(self) -> tuple[str, str]:
        """(zone, name) of the node it yields (``Observation.node``)."""
        return (self.zone, self.node_name or self.name)

    @property
    def preempted(self) -> bool:
        """Its capacity was taken by the cloud, not given back by its owner."""
        return self.state == RequestState.SUSPENDED and self.ended_by == Initiator.SERVICE
