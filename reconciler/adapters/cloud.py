"""The ``Cloud`` protocol: everything the controller may ask of Cloud TPU.

Two implementations: ``adapters.gcloud`` (the gcloud CLI) and ``adapters.rest`` (the v2 REST
API). Both return the same ``model.observed`` values and classify failures the same way:

- *done*: ALREADY_EXISTS on create and NOT_FOUND on delete return ``Outcome.ALREADY``;
- *transient*: ``TransientCloudError`` (429, UNAVAILABLE, RESOURCE_EXHAUSTED, timeouts,
  output that is not the expected JSON) with a suggested delay;
- *permanent*: ``PermanentCloudError`` (PERMISSION_DENIED, INVALID_ARGUMENT, a closed queue).

Creates and deletes are long-running operations: both return ``Submitted`` with the
operation's name (when the cloud gave one), and ``get_operation`` reads it back later, so a
create or delete whose operation failed after the first reply is classified, not resent
blindly (the controller does that; see ``runtime.operations``).

Observation cost never grows with the number of slots: ``observe`` is a bounded number of list
calls per zone in use (or for all zones), never one call per slot.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, Protocol

from reconciler.model.observed import Observation, QueuedResource
from reconciler.model.requests import CreateRequest

__all__ = ["Cloud", "CreateRequest", "OperationStatus", "Outcome", "Submitted"]


class Outcome(StrEnum):
    DONE = "done"  # the request was accepted
    ALREADY = "already"  # ALREADY_EXISTS on create / NOT_FOUND on delete: nothing to do


@dataclass(frozen=True, slots=True)
class Submitted:
    """What a create or delete came back with: the outcome, and the long-running operation's
    full name (``projects/P/locations/Z/operations/ID``) when one was started."""

    outcome: Outcome
    operation: str | None = None


#: A long-running operation's full name, the only shape that is read back later (it lands in
#: a URL path).
OPERATION_NAME_RE: Final = re.compile(
    r"projects/(?!\.)[A-Za-z0-9.:_-]{1,100}/locations/[a-z0-9-]{1,40}"
    r"/operations/(?!\.)[A-Za-z0-9._-]{1,200}"
)


def readable_operation(name: object) -> str | None:
    """``name`` when it is an operation name that can be read back later, else None (an
    answer naming anything else is accepted, and its operation not remembered)."""
    return name if isinstance(name, str) and OPERATION_NAME_RE.fullmatch(name) else None


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
    """What the controller needs from Cloud TPU. Implementations are safe to share in a loop."""

    backend: str  # "gcloud" | "rest", shown to users

    async def observe(self, zones: Collection[str] | None) -> Observation:
        """All QRs and nodes in ``zones`` (None: every zone). Zones that could not be listed are
        reported in ``Observation.unreachable``; raises TransientCloudError only when nothing
        at all could be observed."""
        ...

    async def create_queued_resource(self, request: CreateRequest) -> Submitted: ...

    async def delete_queued_resource(self, zone: str, name: str, *, force: bool) -> Submitted: ...

    async def get_operation(self, name: str) -> OperationStatus | None:
        """The operation ``name`` (as ``Submitted.operation`` gave it); None when the cloud no
        longer knows it."""
        ...

    async def describe_queued_resource(self, zone: str, name: str) -> QueuedResource | None:
        """None when it does not exist."""
        ...

    async def guest_attributes(
        self, zone: str, node: str, query_path: str | None = None
    ) -> list[dict[str, Any]]: ...

    async def aclose(self) -> None: ...
