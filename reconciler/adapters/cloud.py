"""The capacity port: everything the controller may ask of a cloud API that holds capacity.

A ``Cloud`` holds capacity requests (``model/capacity``) of one API and observes them with the
nodes they yield. Implementations today: the Cloud TPU API's queued resources through the
gcloud CLI (``adapters.gcloud``) or its v2 REST API (``adapters.rest``), both reading the same
JSON (``adapters/tpu_api_parse.py``). ``adapters.cloud_router.CloudRouter`` is a ``Cloud`` too:
it holds one cloud per API and sends each request to the one serving its ``api``
(``runtime/backends.py`` builds it). Each cloud says what it can do in a ``Capability``; the
controller reads that, never a class or a transport's name.

Every cloud classifies failures the same way:

- *done*: ALREADY_EXISTS on create and NOT_FOUND on delete return ``Outcome.ALREADY``;
- *transient*: ``TransientCloudError`` (429, UNAVAILABLE, RESOURCE_EXHAUSTED, timeouts,
  output that is not the expected JSON) with a suggested delay;
- *permanent*: ``PermanentCloudError`` (PERMISSION_DENIED, INVALID_ARGUMENT, a closed queue).

Creates and deletes are long-running operations: both return ``Submitted`` with the
operation's name when the cloud gave one that it can read back (``Capability.reads``), and
``get_operation`` reads it back later, so a create or delete whose operation failed after the
first reply is classified, not resent blindly (the controller does that; see
``runtime.lro``).

Observation cost never grows with the number of slots: ``observe`` is a bounded number of list
calls per zone in use (or for all zones), never one call per slot.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from reconciler.model.capacity import CapacityRequest
from reconciler.model.observed import Observation
from reconciler.model.requests import CreateRequest

__all__ = [
    "BootScripts",
    "Capability",
    "Cloud",
    "CreateRequest",
    "OperationStatus",
    "Outcome",
    "Submitted",
    "zones_to_observe",
]


class Outcome(StrEnum):
    DONE = "done"  # the request was accepted
    ALREADY = "already"  # ALREADY_EXISTS on create / NOT_FOUND on delete: nothing to do


@dataclass(frozen=True, slots=True)
class Submitted:
    """What a create or delete came back with: the outcome, and the long-running operation's
    full name when one was started that the cloud can read back."""

    outcome: Outcome
    operation: str | None = None


@dataclass(frozen=True, slots=True)
class Capability:
    """What one cloud can do, for the controller to read instead of a transport's name."""

    #: the API whose requests it holds ("tpu": the Cloud TPU API); a router's: its APIs
    #: joined with "+"
    api: str
    #: how it reaches the API, as users read it ("rest", "gcloud"; status's ``backend``)
    transport: str
    #: one ``observe(None)`` lists every zone completely (``locations/-``), in a bounded
    #: number of calls: the controller then asks for all zones (unmanaged requests anywhere
    #: are shown); else it asks for the file's zones only
    observes_all_zones: bool
    #: the operation names ``get_operation`` can read back (anything else is not remembered)
    operation_names: re.Pattern[str]
    #: ``guest_attributes`` answers (a node's guest attributes, per worker)
    guest_attributes: bool = False
    #: it can create flex-start requests (``mode: flex-start``)
    flex_start: bool = False

    def reads(self, name: object) -> str | None:
        """``name`` when it is an operation name this cloud can read back later, else None
        (an answer naming anything else is accepted, and its operation not remembered)."""
        return name if isinstance(name, str) and self.operation_names.fullmatch(name) else None


@dataclass(frozen=True, slots=True)
class OperationStatus:
    """A long-running operation read back: ``done``, and when it failed, the cloud's
    ``google.rpc.Status`` (gRPC ``code``, ``message``)."""

    name: str
    done: bool
    error_code: int | None = None
    error_message: str = ""

    @property
    def failed(self) -> bool:
        return self.done and (self.error_code is not None or bool(self.error_message))


class Cloud(Protocol):
    """What the controller needs from a cloud API. Implementations are safe to share in a
    loop."""

    @property
    def capability(self) -> Capability: ...

    async def observe(self, zones: Collection[str] | None) -> Observation:
        """All requests and nodes in ``zones`` (None: every zone). Zones that could not be
        listed are reported in ``Observation.unreachable``; raises TransientCloudError only
        when nothing at all could be observed."""
        ...

    async def create_request(self, request: CreateRequest) -> Submitted:
        """Ask for ``request``'s capacity (``request.api`` names the API)."""
        ...

    async def delete_request(self, api: str, zone: str, name: str, *, force: bool) -> Submitted:
        """Delete request ``name`` of ``api`` (``force``: with the nodes it has)."""
        ...

    async def describe_request(self, api: str, zone: str, name: str) -> CapacityRequest | None:
        """Request ``name`` of ``api`` as it is now; None when it does not exist."""
        ...

    async def get_operation(self, name: str) -> OperationStatus | None:
        """The operation ``name`` (as ``Submitted.operation`` gave it); None when the cloud no
        longer knows it."""
        ...

    async def guest_attributes(
        self, zone: str, node: str, query_path: str | None = None
    ) -> list[dict[str, Any]]: ...

    def quota_note(self) -> str:
        """Which project its API calls are charged to, and why (``doctor``)."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class BootScripts(Protocol):
    """A cloud that can change a live node's startup script (``setup.at_boot`` after its
    setup changed; ``workers``: the node's hosts, for Compute Engine's one VM each): every
    cloud here and the router; the controller checks for it."""

    async def set_boot_script(
        self, api: str, zone: str, node: str, script: str, workers: int = 1
    ) -> None: ...


@runtime_checkable
class BootReports(Protocol):
    """A cloud that reads ``setup.at_boot``'s reports: each worker's ``tpu-reconciler/``
    guest attributes (rows of ``worker_id``, ``namespace``, ``key``, ``value``) of node
    ``node`` of ``api`` with ``workers`` workers. Every cloud here does (the TPU API per node,
    Compute Engine per host)."""

    async def boot_reports(
        self, api: str, zone: str, node: str, workers: int
    ) -> list[dict[str, Any]]: ...


def zones_to_observe(cloud: Cloud, zones: Collection[str]) -> Collection[str] | None:
    """What to pass to ``cloud.observe`` for a file in ``zones``: None (every zone) when one
    observation covers them all at the same cost, else the file's zones."""
    return None if cloud.capability.observes_all_zones else zones
