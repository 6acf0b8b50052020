"""``CloudRouter``: one ``Cloud`` over the clouds of several APIs (the port's composite).

The controller holds one cloud; ``runtime/backends.py`` builds it as a router over one cloud
per API the controller serves (today only the Cloud TPU API's, through REST or gcloud). The
router sends each request to the cloud serving its ``api`` — a create by
``CreateRequest.api``, a delete or describe by the ``api`` it is given, an operation to the
cloud that can read that name back (``Capability.reads``) — and merges their observations
into one, so a race group may one day list slots of several APIs. A request for an API no
configured cloud serves, or a flex-start one for a cloud without ``Capability.flex_start``, is
a ``PermanentCloudError`` (the action is blocked with that message), never a crash.

One observation is every cloud's, taken together: if any of them fails, the whole look fails
(nothing is decided on half a world); a zone counts as seen only where every cloud saw it.

May: call its clouds. May not: talk to an API itself, decide anything.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from reconciler.adapters.cloud import (
    BootReports,
    BootScripts,
    Capability,
    Cloud,
    OperationStatus,
    Submitted,
    zones_to_observe,
)
from reconciler.errors import PermanentCloudError
from reconciler.model import flex
from reconciler.model.capacity import CapacityRequest
from reconciler.model.observed import Observation
from reconciler.model.requests import CreateRequest


class CloudRouter:
    """``Cloud`` over ``clouds`` (API name -> the cloud serving it). ``aclose`` closes them."""

    def __init__(self, clouds: Mapping[str, Cloud]) -> None:
        if not clouds:
            raise ValueError("a router needs at least one cloud")
        for api, cloud in clouds.items():
            if cloud.capability.api != api:
                raise ValueError(f"the cloud for {api!r} serves {cloud.capability.api!r}")
        self.clouds = dict(clouds)
        self.capability = merged(c.capability for c in self.clouds.values())

    def __repr__(self) -> str:
        return f"CloudRouter({self.clouds!r})"

    @property
    def requests_sent(self) -> int:
        """Requests (or gcloud runs) its clouds sent so far (the metrics' requests per poll)."""
        counts = (getattr(c, "requests_sent", 0) for c in self.clouds.values())
        return sum(n for n in counts if isinstance(n, int))

    def serving(self, api: str) -> Cloud:
        """The cloud serving ``api``; a PermanentCloudError names the ones configured."""
        cloud = self.clouds.get(api)
        if cloud is None:
            raise PermanentCloudError(
                f"no configured cloud serves the {api!r} API "
                f"(this controller serves {', '.join(sorted(self.clouds))})",
                status="FAILED_PRECONDITION",
            )
        return cloud

    async def observe(self, zones: Collection[str] | None) -> Observation:
        clouds = list(self.clouds.values())
        asks = [c.observe(zones if zones is None else zones_to_observe(c, zones)) for c in clouds]
        if len(asks) == 1:
            return await asks[0]
        tasks = [asyncio.ensure_future(a) for a in asks]
        try:
            looks = await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return merge(looks)

    async def create_request(self, request: CreateRequest) -> Submitted:
        cloud = self.serving(request.api)
        if request.mode == flex.MODE and not cloud.capability.flex_start:
            raise PermanentCloudError(
                f"the {request.api!r} API's cloud ({cloud.capability.transport}) cannot create "
                "flex-start requests",
                status="FAILED_PRECONDITION",
            )
        return await cloud.create_request(request)

    async def delete_request(self, api: str, zone: str, name: str, *, force: bool) -> Submitted:
        return await self.serving(api).delete_request(api, zone, name, force=force)

    async def describe_request(self, api: str, zone: str, name: str) -> CapacityRequest | None:
        return await self.serving(api).describe_request(api, zone, name)

    async def get_operation(self, name: str) -> OperationStatus | None:
        for cloud in self.clouds.values():
            if cloud.capability.reads(name) is not None:
                return await cloud.get_operation(name)
        return None  # no cloud can read it back: unknown, as a forgotten operation

    async def guest_attributes(
        self, zone: str, node: str, query_path: str | None = None
    ) -> list[dict[str, Any]]:
        for cloud in self.clouds.values():
            if cloud.capability.guest_attributes:
                return await cloud.guest_attributes(zone, node, query_path)
        raise PermanentCloudError(
            "no configured cloud reads guest attributes", status="FAILED_PRECONDITION"
        )

    async def boot_reports(
        self, api: str, zone: str, node: str, workers: int
    ) -> list[dict[str, Any]]:
        cloud = self.serving(api)
        if not isinstance(cloud, BootReports):
            raise PermanentCloudError(
                f"the {api!r} API's cloud reads no boot reports", status="FAILED_PRECONDITION"
            )
        return await cloud.boot_reports(api, zone, node, workers)

    async def set_boot_script(
        self, api: str, zone: str, node: str, script: str, workers: int = 1
    ) -> None:
        cloud = self.serving(api)
        if not isinstance(cloud, BootScripts):
            raise PermanentCloudError(
                f"the {api!r} API's cloud cannot change a live node's startup script",
                status="FAILED_PRECONDITION",
            )
        await cloud.set_boot_script(api, zone, node, script, workers)

    def quota_note(self) -> str:
        if len(self.clouds) == 1:
            return next(iter(self.clouds.values())).quota_note()
        return "; ".join(f"{api}: {c.quota_note()}" for api, c in sorted(self.clouds.items()))

    async def aclose(self) -> None:
        for cloud in self.clouds.values():
            await cloud.aclose()


def merged(capabilities: Iterable[Capability]) -> Capability:
    """One capability for several clouds: each API and transport named once, every zone in
    one look only when each of them does, a feature when any of them has it (the router
    sends the call to one that has)."""
    caps: Sequence[Capability] = tuple(capabilities)
    if len(caps) == 1:
        return caps[0]
    patterns = "|".join(f"(?:{c.operation_names.pattern})" for c in caps)
    return Capability(
        api="+".join(dict.fromkeys(c.api for c in caps)),
        transport="+".join(dict.fromkeys(c.transport for c in caps)),
        observes_all_zones=all(c.observes_all_zones for c in caps),
        operation_names=re.compile(patterns),
        guest_attributes=any(c.guest_attributes for c in caps),
        flex_start=any(c.flex_start for c in caps),
    )


def merge(looks: Sequence[Observation]) -> Observation:
    """Several clouds' observations as one: every request and node, a zone unreachable when
    any cloud could not see it, and seen only where every cloud looked (None: everywhere)."""
    scopes = [o.zones for o in looks if o.zones is not None]
    zones = frozenset.intersection(*scopes) if scopes else None
    return Observation(
        requests=tuple(r for o in looks for r in o.requests),
        nodes=tuple(n for o in looks for n in o.nodes),
        unreachable=frozenset().union(*(o.unreachable for o in looks)),
        zones=zones,
    )
