"""The ``Cloud`` protocol: everything the controller may ask of Cloud TPU.

Two implementations: ``adapters.gcloud`` (the gcloud CLI) and ``adapters.rest`` (the v2 REST
API). Both return the same ``model.observed`` values and classify failures the same way:

- *done*: ALREADY_EXISTS on create and NOT_FOUND on delete return ``Outcome.ALREADY``;
- *transient*: ``TransientCloudError`` (429, UNAVAILABLE, RESOURCE_EXHAUSTED, timeouts,
  output that is not the expected JSON) with a suggested delay;
- *permanent*: ``PermanentCloudError`` (PERMISSION_DENIED, INVALID_ARGUMENT, a closed queue).

Observation cost never grows with the number of slots: ``observe`` is a bounded number of list
calls per zone in use (or for all zones), never one call per slot.
"""

from __future__ import annotations

from collections.abc import Collection
from enum import StrEnum
from typing import Any, Protocol

from reconciler.model.observed import Observation, QueuedResource
from reconciler.model.requests import CreateRequest

__all__ = ["Cloud", "CreateRequest", "Outcome"]


class Outcome(StrEnum):
    DONE = "done"  # the request was accepted
    ALREADY = "already"  # ALREADY_EXISTS on create / NOT_FOUND on delete: nothing to do


class Cloud(Protocol):
    """What the controller needs from Cloud TPU. Implementations are safe to share in a loop."""

    backend: str  # "gcloud" | "rest", shown to users

    async def observe(self, zones: Collection[str] | None) -> Observation:
        """All QRs and nodes in ``zones`` (None: every zone). Zones that could not be listed are
        reported in ``Observation.unreachable``; raises TransientCloudError only when nothing
        at all could be observed."""
        ...

    async def create_queued_resource(self, request: CreateRequest) -> Outcome: ...

    async def delete_queued_resource(self, zone: str, name: str, *, force: bool) -> Outcome: ...

    async def describe_queued_resource(self, zone: str, name: str) -> QueuedResource | None:
        """None when it does not exist."""
        ...

    async def guest_attributes(
        self, zone: str, node: str, query_path: str | None = None
    ) -> list[dict[str, Any]]: ...

    async def aclose(self) -> None: ...
