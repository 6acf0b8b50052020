"""An in-memory ``Cloud`` for controller unit tests that need to steer timing exactly.

Only for the controller's internals (ordering, expectations, backoff); everything a user
meets is tested against the emulator through the real backends.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Collection
from typing import Any

from reconciler.adapters.cloud import (
    Capability,
    CreateRequest,
    OperationStatus,
    Outcome,
    Submitted,
)
from reconciler.model.capacity import CapacityRequest, RequestState
from reconciler.model.observed import Observation

CAPABILITY = Capability(
    api="tpu", transport="fake", observes_all_zones=False, operation_names=re.compile(".+")
)


class FakeCloud:
    capability = CAPABILITY

    def __init__(self) -> None:
        self.qrs: dict[tuple[str, str], CapacityRequest] = {}
        self.calls: list[tuple[str, str]] = []
        self.observe_gate: asyncio.Event | None = None  # observe waits on it when set
        self.observing = asyncio.Event()
        self.fail_create: Exception | None = None

    async def observe(self, zones: Collection[str] | None) -> Observation:
        snapshot = tuple(self.qrs.values())  # the list is taken when the call starts
        self.observing.set()
        if self.observe_gate is not None:
            await self.observe_gate.wait()
        self.observing.clear()
        return Observation(requests=snapshot, zones=frozenset(zones or ()) or None)

    async def create_request(self, request: CreateRequest) -> Submitted:
        self.calls.append(("create", request.name))
        if self.fail_create is not None:
            raise self.fail_create
        key = (request.zone, request.name)
        if key in self.qrs:
            return Submitted(Outcome.ALREADY)
        self.qrs[key] = CapacityRequest(
            name=request.name,
            zone=request.zone,
            state=RequestState.WAITING,
            api_state="ACCEPTED",
            labels=dict(request.labels),
        )
        return Submitted(Outcome.DONE)

    async def delete_request(self, api: str, zone: str, name: str, *, force: bool) -> Submitted:
        self.calls.append(("delete", name))
        gone = self.qrs.pop((zone, name), None)
        return Submitted(Outcome.DONE if gone else Outcome.ALREADY)

    async def get_operation(self, name: str) -> OperationStatus | None:
        self.calls.append(("get_operation", name))
        return None  # this cloud starts no operations

    async def describe_request(self, api: str, zone: str, name: str) -> CapacityRequest | None:
        return self.qrs.get((zone, name))

    async def guest_attributes(
        self, zone: str, node: str, query_path: str | None = None
    ) -> list[dict[str, Any]]:
        return []

    def quota_note(self) -> str:
        return "none (a fake cloud)"

    async def aclose(self) -> None:
        return None
