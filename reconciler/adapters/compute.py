"""The capacity port (``adapters.cloud.Cloud``) over Compute Engine's v1 REST API: TPU VMs
(one instance per single-host slice) and MIG slices (a BULK MIG per multi-host slice) are its
capacity requests. Bodies are ``adapters/compute_body.py``, parsing
``adapters/compute_parse.py``, the state tables ``adapters/compute_states.py``; its calls
(paged lists, changes with a ``requestId``, operations) are ``adapters/_compute_calls.py``,
its MIG slice path (their creates, the sweep) ``adapters/_compute_mig.py``; the HTTP session
(tokens, quota project, transport errors) is ``adapters/google_http.py``, shared with the TPU
API's REST cloud.

**Observation stays flat**: one ``aggregated/instances`` list filtered to our label and one
``aggregated/instanceGroupManagers`` list (both paged, fetched concurrently) per look,
whatever the number of slots; ``UNREACHABLE`` scopes are zones not seen. Instances without
our label are not listed (a TPU VM made by hand is not shown; name a slot like it and the
create says the name is taken).

**Creates** (``create_request``): a single-host slice is one ``instances.insert`` whose
operation is not waited for (its stockout or quota failure is read back by the controller's
``runtime/lro``, like a TPU API create). A multi-host slot is made step by step, each step's
operation waited for but the last (``adapters/_compute_mig.py``). Every step carries its own
``requestId`` and is sent once more with the same id when the first try got no answer, so a
resend dedupes; 409 alreadyExists counts as done when the resource is this slot's (a name
another slot's resource holds is a permanent error naming it). A step that fails undoes what
this create made before raising, so a failed create leaves nothing.

**Deletes** remove every resource the request has: its instances, or its MIGs (their hosts
go with them); the template and policy follow once no MIG uses them (the sweep, started by
a look: ``adapters/_compute_mig.py``).

**Preemption** both ways: a spot VM whose action is STOP stays TERMINATED (SUSPENDED,
SERVICE); one whose action is DELETE disappears — a single-host request seen RUNNING in the
last look and gone now, without a delete from here, is reported once as SUSPENDED by SERVICE with
the word DELETED (``compute_states.gone``), so the preemption is told like any other and the
slot asks again. A MIG slice with a host lost is SUSPENDED whole.

The endpoint is ``https://compute.googleapis.com/compute/v1/`` unless
``CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE`` (gcloud's own variable; a bare ``http://H:P/``
gets ``compute/v1/`` appended, as gcloud does) or ``endpoint`` says otherwise; plain http only
to loopback.

May: send HTTP requests, read tokens, remove the templates and policies it made. Must: check
every name before it reaches a URL or body. May not: decide what capacity to hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, Final, Unpack

import httpx

from reconciler.adapters import compute_body as cb
from reconciler.adapters import compute_boot
from reconciler.adapters import compute_states as cs
from reconciler.adapters._compute_calls import (
    CAPABILITY,
    PARSE_ERRORS,
    ComputeCalls,
    check_operation_name,
    done,
    failure,
)
from reconciler.adapters._compute_mig import SWEEP_EVERY, MigSlices
from reconciler.adapters.cloud import OperationStatus, Outcome, Submitted
from reconciler.adapters.cloud_errors import Operation
from reconciler.adapters.compute_errors import classify_compute
from reconciler.adapters.compute_parse import KIND_GROUP
from reconciler.adapters.google_http import SessionCloud, SessionOptions, both, endpoint_from
from reconciler.errors import PermanentCloudError
from reconciler.model.capacity import MANAGED_LABEL, MANAGED_VALUE, CapacityRequest
from reconciler.model.names import check_name, check_zone
from reconciler.model.observed import Observation
from reconciler.model.requests import CreateRequest

DEFAULT_ENDPOINT: Final = "https://compute.googleapis.com/compute/v1/"
ENDPOINT_ENV: Final = "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE"
#: Items per list page (the API's most).
PAGE_SIZE: Final = 500
_TITLE: Final = "Compute Engine"
_MANAGED_FILTER: Final = f"labels.{MANAGED_LABEL} = {MANAGED_VALUE}"


class ComputeCloud(SessionCloud):
    """``Cloud`` over Compute Engine v1. Share one per event loop; ``aclose`` it.
    ``reservations``: zone -> the reservation a ``mode: reserved`` slot there consumes."""

    capability = CAPABILITY

    def __init__(
        self,
        project: str,
        *,
        endpoint: str | None = None,
        page_size: int = PAGE_SIZE,
        reservations: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        **options: Unpack[SessionOptions],
    ) -> None:
        endpoint = endpoint_from(endpoint, options.get("env"), ENDPOINT_ENV, DEFAULT_ENDPOINT)
        super().__init__(
            project,
            compute_endpoint(endpoint),
            title=_TITLE,
            classifier=classify_compute,
            **options,
        )
        self.page_size = max(1, min(PAGE_SIZE, int(page_size)))
        self.reservations = dict(reservations or {})
        self._clock = clock
        self._calls = ComputeCalls(self._http, page_size=self.page_size, clock=clock)
        self._base = self._calls.base
        self._slices = MigSlices(self._calls)
        #: (zone, slot) of creates under way
        self._creating: dict[tuple[str, str], int] = {}
        #: (zone, slot) this controller deleted, until they are no longer seen
        self._deleting: set[tuple[str, str]] = set()
        #: the last look: single-host requests up, what each request is, their parts
        self._up: Mapping[tuple[str, str], CapacityRequest] = {}
        self._kinds: dict[tuple[str, str], str] = {}
        self._parts: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {}

    @property
    def _sweep(self) -> asyncio.Task[None] | None:
        """The background sweep the last look started, if any."""
        return self._slices.sweep

    async def aclose(self) -> None:
        await self._slices.aclose()
        await super().aclose()

    # --- observe -------------------------------------------------------------------------

    async def observe(self, zones: Collection[str] | None) -> Observation:
        wanted = None if zones is None else frozenset(check_zone(z) for z in zones)
        started = self._clock()
        (instances, gone_a), (groups, gone_b) = await both(
            self._calls.aggregated("instances", _MANAGED_FILTER),
            self._calls.aggregated("instanceGroupManagers", None),
        )
        creating = frozenset(k for k, n in self._creating.items() if n > 0)
        try:
            seen = cs.look(instances, groups, creating=creating, deleting=frozenset(self._deleting))
        except PARSE_ERRORS as exc:
            raise self._http.malformed("aggregated list", str(exc)) from None
        requests = list(seen.requests)
        kinds = dict(seen.kinds)
        for key, before in self._up.items():  # up last look, gone now, not by our hand
            if key not in kinds and key not in self._deleting and key not in creating:
                requests.append(cs.gone(before))
                kinds[key] = "gone"
        self._deleting &= set(seen.kinds)
        self._up, self._kinds = seen.up, kinds
        self._parts = dict(seen.parts)
        ours = frozenset(k for k, kind in seen.kinds.items() if kind == KIND_GROUP)
        self._slices.looked(ours, seen.templates, started)
        unreachable = frozenset(gone_a | gone_b)
        if wanted is not None:
            requests = [r for r in requests if r.zone in wanted]
            unreachable &= wanted
        nodes = [n for n in seen.nodes if wanted is None or n.zone in wanted]
        return Observation(
            requests=tuple(sorted(requests, key=lambda r: r.key)),
            nodes=tuple(nodes),
            unreachable=unreachable,
            zones=wanted,
        )

    # --- create --------------------------------------------------------------------------

    async def create_request(self, request: CreateRequest) -> Submitted:
        check_api(request.api)
        token = secrets.token_hex(3)
        plan = cb.layout(request, token)
        key = (plan.zone, plan.slot)
        reservation = self.reservations.get(plan.zone)
        self._creating[key] = self._creating.get(key, 0) + 1
        made: list[str] = []  # URLs of what this create made, to undo on failure
        try:
            with self._slices.making(token):
                try:
                    if not plan.multi_host:
                        return await self._create_instances(request, plan, made, reservation)
                    return await self._slices.create(request, plan, made, reservation)
                except BaseException:
                    await self._undo(made)
                    raise
        finally:
            self._creating[key] -= 1
            if not self._creating[key]:
                del self._creating[key]

    async def _create_instances(
        self, request: CreateRequest, plan: cb.Layout, made: list[str], reservation: str | None
    ) -> Submitted:
        last: Submitted = Submitted(Outcome.ALREADY)
        for k, name in enumerate(plan.parts):
            body = cb.instance_body(self.project, request, k, reservation=reservation)
            url = f"{self._base}zones/{plan.zone}/instances"
            answer = await self._calls.mutate("POST", url, body=body)
            if isinstance(answer, Outcome):
                await self._calls.owned("instances", plan.zone, name, plan.slot)
                continue
            made.append(f"{url}/{name}")
            status = self._calls.status(answer)
            if status.failed:  # refused at once, in an operation that is already DONE
                raise failure(status)
            last = done(status)
        return last

    async def _undo(self, made: list[str]) -> None:
        """Delete what a failed create made, newest first, waiting only for a policy's delete
        (a template's comes after it). Best effort: a MIG still going keeps its policy and
        template in use, and the sweep removes them once it is gone; the planner catches
        what else this misses."""
        for url in reversed(made):
            with contextlib.suppress(Exception):
                answer = await self._calls.mutate("DELETE", url)
                if not isinstance(answer, Outcome) and "/resourcePolicies/" in url:
                    await self._calls.wait(answer)

    # --- delete, describe, operations -------------------------------------------------------

    async def delete_request(self, api: str, zone: str, name: str, *, force: bool) -> Submitted:
        check_api(api)
        key = (check_zone(zone), check_name(name))
        kind = self._kinds.get(key)
        if kind == "gone":
            self._kinds.pop(key, None)
            return Submitted(Outcome.ALREADY)  # the cloud deleted it already
        parts = self._parts.get(key)
        if parts is None:
            await self.describe_request(api, zone, name)
            parts = self._parts.get(key, ())
        self._deleting.add(key)
        outcome = Submitted(Outcome.ALREADY)
        for collection, part in parts:
            url = f"{self._base}zones/{key[0]}/{collection}/{check_name(part)}"
            answer = await self._calls.mutate("DELETE", url)
            if isinstance(answer, Outcome):
                continue
            status = self._calls.status(answer)
            if status.failed and status.error_code != 404:
                raise failure(status, Operation.DELETE)
            if outcome.outcome is Outcome.ALREADY:
                outcome = done(status)
        return outcome

    async def describe_request(self, api: str, zone: str, name: str) -> CapacityRequest | None:
        """The request as it is now: one zone's instances of the slot and its MIGs."""
        check_api(api)
        zone, name = check_zone(zone), check_name(name)
        label = f"labels.{cb.LABEL_SLOT} = {name}"
        where = f"{self._base}zones/{zone}"
        (instances, groups) = await both(
            self._calls.items(f"{where}/instances", "items", label),
            self._calls.items(f"{where}/instanceGroupManagers", "items", None),
        )
        try:
            seen = cs.look(instances, groups, deleting=frozenset(self._deleting))
        except PARSE_ERRORS as exc:
            raise self._http.malformed("list", str(exc)) from None
        if (zone, name) in seen.parts:
            self._parts[(zone, name)] = seen.parts[(zone, name)]
        return next((r for r in seen.requests if r.key == (zone, name)), None)

    async def get_operation(self, name: str) -> OperationStatus | None:
        url = f"{self.endpoint}{check_operation_name(name)}"
        answer = await self._http.call(Operation.GET, "GET", url)
        if isinstance(answer, Outcome):
            return None  # NOT_FOUND: the cloud forgot it
        return self._calls.status(answer)

    async def guest_attributes(
        self, zone: str, node: str, query_path: str | None = None
    ) -> list[dict[str, Any]]:
        raise PermanentCloudError(
            "Compute Engine TPU VMs name no workers in guest attributes", status="UNIMPLEMENTED"
        )

    async def boot_reports(
        self, api: str, zone: str, node: str, workers: int
    ) -> list[dict[str, Any]]:
        """``setup.at_boot``'s reports, host by host (``adapters/compute_boot``)."""
        check_api(api)
        return await compute_boot.boot_reports(self._http, self._base, zone, node, workers)

    async def set_boot_script(
        self, api: str, zone: str, node: str, script: str, workers: int = 1
    ) -> None:
        """A live slot's hosts boot with ``script`` from now on (``adapters/compute_boot``)."""
        check_api(api)
        await compute_boot.set_boot_script(self._http, self._base, zone, node, workers, script)


# --- pure helpers -------------------------------------------------------------------------------


def compute_endpoint(endpoint: str) -> str:
    """The base URL of the v1 API: a bare ``scheme://host[:port]/`` gets ``compute/v1/``, as
    gcloud adds it to an endpoint override."""
    url = httpx.URL(endpoint)
    if url.path in ("", "/") and url.scheme in ("http", "https") and url.host:
        return str(url.copy_with(path="/compute/v1/"))
    return endpoint


def check_api(api: str) -> str:
    if api != cb.API:
        raise PermanentCloudError(
            f"a request of the {api!r} API reached Compute Engine's adapter",
            status="FAILED_PRECONDITION",
        )
    return api


__all__ = [
    "CAPABILITY",
    "DEFAULT_ENDPOINT",
    "ENDPOINT_ENV",
    "PAGE_SIZE",
    "SWEEP_EVERY",
    "ComputeCloud",
    "check_operation_name",
    "compute_endpoint",
]
