"""The capacity port (``adapters.cloud.Cloud``) over Compute Engine's v1 REST API: TPU VMs
(one instance per single-host slice) and MIG slices (a BULK MIG per multi-host slice) are its
capacity requests. Bodies are ``adapters/compute_body.py``, parsing
``adapters/compute_parse.py``, the state tables ``adapters/compute_states.py``; the HTTP
session (tokens, quota project, transport errors) is ``adapters/google_http.py``, shared with
the TPU API's REST cloud.

**Observation stays flat**: one ``aggregated/instances`` list filtered to our label and one
``aggregated/instanceGroupManagers`` list (both paged, fetched concurrently) per look,
whatever the number of slots; ``UNREACHABLE`` scopes are zones not seen. Instances without
our label are not listed (a TPU VM made by hand is not shown; name a slot like it and the
create says the name is taken).

**Creates** (``create_request``): a single-host slice is one ``instances.insert`` whose
operation is not waited for (its stockout or quota failure is read back by the controller's
``runtime/lro``, like a TPU API create). A multi-host slot is made step by step, each step's
operation waited for (``operations.wait``): the instance template, the workload policy,
then per slice the MIG and its ``createInstances`` (that last operation is returned, not
waited for; a BULK MIG waits for capacity by itself, ``CREATING``). Every step carries its
own ``requestId`` and is sent once more with the same id when the first try got no answer,
so a resend dedupes; 409 alreadyExists counts as done when the resource is this slot's (a
name another slot's resource holds is a permanent error naming it). A step that fails undoes
what this create made before raising, so a failed create leaves nothing; a crash between
steps leaves a template and policy no MIG uses (the sweep's) or a MIG without hosts (read
FAILED ``INCOMPLETE``: the planner replaces it).

**Deletes** remove every resource the request has: its instances, or its MIGs (their hosts
go with them); the template and policy follow once no MIG uses them (the sweep).

**The sweep** removes our templates and workload policies that no MIG uses and that no
create of this process is making (or finished after the MIG list it reads began): one
template list (plus a
delete per orphan), run in the background at the first look after a start, whenever one of
our MIGs disappeared since the last look, and every ``SWEEP_EVERY`` seconds otherwise — not
every poll. A template names its policy in its description, and is deleted only after its
policy is gone, so nothing it anchors is lost.

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
import logging
import os
import secrets
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from typing import Any, Final

import httpx

from reconciler.adapters import compute_body as cb
from reconciler.adapters import compute_boot
from reconciler.adapters import compute_parse as cp
from reconciler.adapters import compute_states as cs
from reconciler.adapters.auth import QuotaChoice, TokenProvider
from reconciler.adapters.cloud import OperationStatus, Outcome, Submitted
from reconciler.adapters.cloud_errors import CloudFailure, Operation, classify
from reconciler.adapters.compute_errors import classify_compute
from reconciler.adapters.google_http import GoogleSession, both
from reconciler.errors import PermanentCloudError, TransientCloudError, UnsafeName
from reconciler.model.capacity import MANAGED_LABEL, MANAGED_VALUE, CapacityRequest
from reconciler.model.names import check_name, check_zone
from reconciler.model.observed import Observation
from reconciler.model.requests import CreateRequest

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT: Final = "https://compute.googleapis.com/compute/v1/"
ENDPOINT_ENV: Final = "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE"
CAPABILITY: Final = cp.capability()
#: Items per list page (the API's most).
PAGE_SIZE: Final = 500
MAX_PAGES: Final = 1000
#: The sweep's pace (besides the first look and a MIG of ours gone).
SWEEP_EVERY: Final = 300.0
#: Longest a create waits for one step's operation.
STEP_TIMEOUT: Final = 300.0
_TITLE: Final = "Compute Engine"
_PARSE_ERRORS: Final = (ValueError, TypeError, AttributeError, KeyError, IndexError)
_MANAGED_FILTER: Final = f"labels.{MANAGED_LABEL} = {MANAGED_VALUE}"


class ComputeCloud:
    """``Cloud`` over Compute Engine v1. Share one per event loop; ``aclose`` it.
    ``reservations``: zone -> the reservation a ``mode: reserved`` slot there consumes."""

    capability = CAPABILITY

    def __init__(
        self,
        project: str,
        *,
        endpoint: str | None = None,
        token_provider: TokenProvider | None = None,
        concurrency: int = 8,
        timeout: float = 30.0,
        env: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
        page_size: int = PAGE_SIZE,
        quota_project: str | None = None,
        adc: bool = False,
        reservations: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        env = os.environ if env is None else env
        self._http = GoogleSession(
            project,
            compute_endpoint(endpoint or env.get(ENDPOINT_ENV) or DEFAULT_ENDPOINT),
            title=_TITLE,
            token_provider=token_provider,
            concurrency=concurrency,
            timeout=timeout,
            env=env,
            client=client,
            quota_project=quota_project,
            adc=adc,
            classifier=classify_compute,
        )
        self.project = self._http.project
        self.endpoint = self._http.endpoint
        self.page_size = max(1, min(PAGE_SIZE, int(page_size)))
        self.reservations = dict(reservations or {})
        self._clock = clock
        self._base = f"{self.endpoint}projects/{self.project}/"
        #: (zone, slot) of creates under way; the tokens of this process's creates, and
        #: when each finished (None: still running)
        self._creating: dict[tuple[str, str], int] = {}
        self._made: dict[str, float | None] = {}
        #: (zone, slot) this controller deleted, until they are no longer seen
        self._deleting: set[tuple[str, str]] = set()
        #: the last look: single-host requests up, what each request is, our MIGs
        self._up: Mapping[tuple[str, str], CapacityRequest] = {}
        self._kinds: dict[tuple[str, str], str] = {}
        self._parts: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {}
        self._groups: frozenset[tuple[str, str]] | None = None
        self._sweep_at = 0.0
        self._sweep: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"ComputeCloud(project={self.project!r}, endpoint={self.endpoint!r})"

    @property
    def requests_sent(self) -> int:
        """HTTP requests so far (the metrics' requests per poll)."""
        return self._http.requests_sent

    async def __aenter__(self) -> ComputeCloud:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            with contextlib.suppress(BaseException):
                await self._sweep
        await self._http.aclose()

    def quota_choice(self) -> QuotaChoice:
        return self._http.quota_choice()

    def quota_note(self) -> str:
        return self._http.quota_note()

    # --- observe -------------------------------------------------------------------------

    async def observe(self, zones: Collection[str] | None) -> Observation:
        wanted = None if zones is None else frozenset(check_zone(z) for z in zones)
        started = self._clock()
        (instances, gone_a), (groups, gone_b) = await both(
            self._aggregated("instances", _MANAGED_FILTER),
            self._aggregated("instanceGroupManagers", None),
        )
        creating = frozenset(k for k, n in self._creating.items() if n > 0)
        try:
            seen = cs.look(instances, groups, creating=creating, deleting=frozenset(self._deleting))
        except _PARSE_ERRORS as exc:
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
        groups_now = frozenset(k for k, kind in seen.kinds.items() if kind == cp.KIND_GROUP)
        if self._groups is not None and self._groups - groups_now:
            self._sweep_at = 0.0  # a MIG of ours is gone: its template and policy follow
        self._groups = groups_now
        self._start_sweep(seen.templates, started)
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

    async def _aggregated(self, collection: str, filter_: str | None) -> tuple[list[Any], set[str]]:
        """Every item of ``aggregated/<collection>`` over all pages, and the zones whose
        scope said UNREACHABLE."""
        url = f"{self._base}aggregated/{collection}"
        base: dict[str, str] = {"maxResults": str(self.page_size), "returnPartialSuccess": "true"}
        if filter_:
            base["filter"] = filter_
        items: list[Any] = []
        unreachable: set[str] = set()
        for page in await self._pages(url, base, f"aggregated/{collection}"):
            scopes = page.get("items") or {}
            if not isinstance(scopes, dict):
                raise self._http.malformed(collection, "items is not an object")
            for scope, entry in scopes.items():
                if not isinstance(entry, dict):
                    raise self._http.malformed(collection, f"{scope} is not an object")
                found = entry.get(collection) or []
                if not isinstance(found, list):
                    raise self._http.malformed(collection, f"{scope}.{collection} is not a list")
                items.extend(found)
                warning = entry.get("warning")
                if (
                    isinstance(warning, dict)
                    and warning.get("code") == "UNREACHABLE"
                    and str(scope).startswith("zones/")
                ):
                    unreachable.add(check_zone(str(scope).split("/", 1)[1]))
        return items, unreachable

    async def _pages(self, url: str, params: Mapping[str, str], what: str) -> list[dict[str, Any]]:
        pages: list[dict[str, Any]] = []
        seen: set[str] = set()
        query = dict(params)
        for _ in range(MAX_PAGES):
            page = await self._http.call(Operation.LIST, "GET", url, params=query)
            if isinstance(page, Outcome):  # pragma: no cover - LIST never yields ALREADY
                raise self._http.malformed(what, "no list")
            pages.append(page)
            token = page.get("nextPageToken") or None
            if token is None:
                return pages
            if not isinstance(token, str) or token in seen:
                raise self._http.malformed(what, "pagination repeats or is not a token")
            seen.add(token)
            query = {**params, "pageToken": token}
        raise self._http.malformed(what, f"more than {MAX_PAGES} pages")

    # --- create --------------------------------------------------------------------------

    async def create_request(self, request: CreateRequest) -> Submitted:
        check_api(request.api)
        token = secrets.token_hex(3)
        plan = cb.layout(request, token)
        key = (plan.zone, plan.slot)
        self._made[token] = None
        self._creating[key] = self._creating.get(key, 0) + 1
        made: list[str] = []  # URLs of what this create made, to undo on failure
        try:
            if not plan.multi_host:
                return await self._create_instances(request, plan, made)
            return await self._create_slices(request, plan, made)
        except BaseException:
            await self._undo(made)
            raise
        finally:
            self._made[token] = self._clock()
            self._creating[key] -= 1
            if not self._creating[key]:
                del self._creating[key]

    async def _create_instances(
        self, request: CreateRequest, plan: cb.Layout, made: list[str]
    ) -> Submitted:
        reservation = self.reservations.get(plan.zone)
        last: Submitted = Submitted(Outcome.ALREADY)
        for k, name in enumerate(plan.parts):
            body = cb.instance_body(self.project, request, k, reservation=reservation)
            url = f"{self._base}zones/{plan.zone}/instances"
            answer = await self._mutate("POST", url, body=body)
            if isinstance(answer, Outcome):
                await self._owned("instances", plan.zone, name, plan.slot)
                continue
            made.append(f"{url}/{name}")
            status = self._status(answer)
            if status.failed:  # refused at once, in an operation that is already DONE
                raise _failure(status)
            last = Submitted(Outcome.DONE, CAPABILITY.reads(status.name))
        return last

    async def _create_slices(
        self, request: CreateRequest, plan: cb.Layout, made: list[str]
    ) -> Submitted:
        reservation = self.reservations.get(plan.zone)
        template = cb.template_body(request, plan, reservation=reservation)
        policy = cb.policy_body(request, plan)
        await self._step(f"{self._base}global/instanceTemplates", template, made)
        await self._step(f"{self._base}regions/{plan.region}/resourcePolicies", policy, made)
        last: Submitted = Submitted(Outcome.ALREADY)
        zone = f"{self._base}zones/{plan.zone}/instanceGroupManagers"
        for k, name in enumerate(plan.parts):
            body = cb.group_body(self.project, request, plan, k)
            if not await self._step(zone, body, made):
                await self._owned("instanceGroupManagers", plan.zone, name, plan.slot)
                continue  # already this slot's: the planner sees it next look
            answer = await self._mutate(
                "POST", f"{zone}/{name}/createInstances", body=cb.create_instances_body(plan, k)
            )
            if isinstance(answer, Outcome):  # pragma: no cover - a POST never yields ALREADY
                continue
            status = self._status(answer)
            if status.failed:
                raise _failure(status)
            last = Submitted(Outcome.DONE, CAPABILITY.reads(status.name))
        return last

    async def _step(self, url: str, body: Mapping[str, Any], made: list[str]) -> bool:
        """Insert one resource and wait for its operation: True when made now, False when
        it was there already (409). Raises the step's failure."""
        answer = await self._mutate("POST", url, body=body)
        if isinstance(answer, Outcome):
            return False
        made.append(f"{url}/{body['name']}")
        status = await self._wait(answer)
        if status.failed:
            raise _failure(status)
        return True

    async def _mutate(
        self, method: str, url: str, *, body: Mapping[str, Any] | None = None
    ) -> dict[str, Any] | Outcome:
        """One change with its own ``requestId``, sent once more with the same id when the
        first try got no answer at all (so the service dedupes it)."""
        params = {"requestId": str(uuid.uuid4())}
        operation = Operation.DELETE if method == "DELETE" else Operation.CREATE
        try:
            return await self._http.call(operation, method, url, params=params, body=body)
        except TransientCloudError as e:
            if e.code is not None:  # the service answered: not a lost request
                raise
            return await self._http.call(operation, method, url, params=params, body=body)

    async def _wait(self, answer: Mapping[str, Any]) -> OperationStatus:
        """Wait for an operation (``operations.wait``, at most ``STEP_TIMEOUT``)."""
        status = self._status(answer)
        deadline = self._clock() + STEP_TIMEOUT
        pause = 0.05
        while not status.done:
            if self._clock() > deadline:
                raise TransientCloudError(
                    f"operation {status.name} did not finish within {STEP_TIMEOUT:g}s", delay=30
                )
            url = f"{self.endpoint}{check_operation_name(status.name)}/wait"
            again = await self._http.call(Operation.GET, "POST", url)
            if isinstance(again, Outcome):
                raise TransientCloudError(f"operation {status.name} was forgotten", delay=30)
            status = self._status(again)
            if not status.done:  # a wait that answered early (it may): not in a tight loop
                await asyncio.sleep(pause)
                pause = min(2.0, pause * 2)
        return status

    def _status(self, answer: Mapping[str, Any]) -> OperationStatus:
        try:
            return cp.operation_status(answer)
        except _PARSE_ERRORS as exc:
            raise self._http.malformed("operation", str(exc)) from None

    async def _owned(self, collection: str, zone: str, name: str, slot: str) -> None:
        """A create met ``name`` already there: fine when it is this slot's, else a
        permanent error naming whose it is."""
        got = await self._http.call(
            Operation.GET, "GET", f"{self._base}zones/{zone}/{collection}/{name}"
        )
        if isinstance(got, Outcome):
            raise TransientCloudError(f"{name} exists and then does not; looking again", delay=5)
        if collection == "instances":
            labels = got.get("labels") or {}
            owner = labels.get(cb.LABEL_SLOT) if isinstance(labels, dict) else None
        else:
            owner = (cb.described(got.get("description")) or {}).get("slot")
        if owner != slot:
            whose = f"slot {owner}'s" if owner else "not made by tpu-reconciler"
            raise PermanentCloudError(
                f"the name {name} is taken in {zone} ({whose}); rename slot {slot} "
                "or remove that resource",
                status="ALREADY_EXISTS",
                code=409,
            )

    async def _undo(self, made: list[str]) -> None:
        """Delete what a failed create made, newest first, waiting only for a policy's delete
        (a template's comes after it). Best effort: a MIG still going keeps its policy and
        template in use, and the sweep removes them once it is gone; the planner catches
        what else this misses."""
        for url in reversed(made):
            with contextlib.suppress(Exception):
                answer = await self._mutate("DELETE", url)
                if not isinstance(answer, Outcome) and "/resourcePolicies/" in url:
                    await self._wait(answer)

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
            answer = await self._mutate("DELETE", url)
            if isinstance(answer, Outcome):
                continue
            status = self._status(answer)
            if status.failed and status.error_code != 404:
                raise _failure(status, Operation.DELETE)
            if outcome.outcome is Outcome.ALREADY:
                outcome = Submitted(Outcome.DONE, CAPABILITY.reads(status.name))
        return outcome

    async def describe_request(self, api: str, zone: str, name: str) -> CapacityRequest | None:
        """The request as it is now: one zone's instances of the slot and its MIGs."""
        check_api(api)
        zone, name = check_zone(zone), check_name(name)
        label = f"labels.{cb.LABEL_SLOT} = {name}"
        where = f"{self._base}zones/{zone}"
        (instances, groups) = await both(
            self._list(f"{where}/instances", "items", label),
            self._list(f"{where}/instanceGroupManagers", "items", None),
        )
        try:
            seen = cs.look(instances, groups, deleting=frozenset(self._deleting))
        except _PARSE_ERRORS as exc:
            raise self._http.malformed("list", str(exc)) from None
        if (zone, name) in seen.parts:
            self._parts[(zone, name)] = seen.parts[(zone, name)]
        return next((r for r in seen.requests if r.key == (zone, name)), None)

    async def _list(self, url: str, field: str, filter_: str | None) -> list[Any]:
        params = {"maxResults": str(self.page_size), **({"filter": filter_} if filter_ else {})}
        out: list[Any] = []
        for page in await self._pages(url, params, url.rsplit("/", 1)[-1]):
            found = page.get(field) or []
            if not isinstance(found, list):
                raise self._http.malformed(field, "not a list")
            out += found
        return out

    async def get_operation(self, name: str) -> OperationStatus | None:
        url = f"{self.endpoint}{check_operation_name(name)}"
        answer = await self._http.call(Operation.GET, "GET", url)
        if isinstance(answer, Outcome):
            return None  # NOT_FOUND: the cloud forgot it
        return self._status(answer)

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

    # --- the sweep -----------------------------------------------------------------------

    def _start_sweep(self, used: frozenset[str], listed: float) -> None:
        """Start a sweep when one is due; ``used``: the templates of the MIGs a list begun at
        ``listed`` showed."""
        now = self._clock()
        if now < self._sweep_at or (self._sweep is not None and not self._sweep.done()):
            return
        self._sweep_at = now + SWEEP_EVERY
        self._sweep = asyncio.create_task(self._sweep_orphans(used, listed), name="compute-sweep")

    async def _sweep_orphans(self, used: frozenset[str], listed: float) -> None:
        """Delete our templates (and the policy each names) that no MIG uses. A create of
        this process still running, or finished after the MIG list began, is left alone
        (that list may not show its MIG yet)."""
        try:
            templates = await self._list(f"{self._base}global/instanceTemplates", "items", None)
            self._made = {t: at for t, at in self._made.items() if at is None or at >= listed}
            fresh = set(self._made)
            for template in templates:
                name = template.get("name") if isinstance(template, dict) else None
                facts = cb.described(template.get("description")) if name else None
                if facts is None or name in used or _token(str(name)) in fresh:
                    continue
                await self._remove_orphan(str(name), facts.get("policy"))
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the next sweep tries again; a look never fails for it
            log.warning("sweeping Compute Engine templates and policies failed: %s", e)
            self._sweep_at = min(self._sweep_at, self._clock() + 60.0)

    async def _remove_orphan(self, template: str, policy: str | None) -> None:
        if policy:
            parts = policy.split("/")
            if len(parts) != 4 or parts[0] != "regions" or parts[2] != "resourcePolicies":
                return
            url = f"{self._base}regions/{parts[1]}/resourcePolicies/{check_name(parts[3])}"
            answer = await self._mutate("DELETE", url)
            if not isinstance(answer, Outcome):
                status = await self._wait(answer)
                if status.failed:
                    return  # still in use: the template stays too, for the next sweep
        log.info("removing orphaned Compute Engine template %s and its policy", template)
        url = f"{self._base}global/instanceTemplates/{check_name(template)}"
        answer = await self._mutate("DELETE", url)
        if not isinstance(answer, Outcome):
            await self._wait(answer)


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


def check_operation_name(name: str) -> str:
    """``projects/P/{zones/Z|regions/R|global}/operations/OP``, nothing else (a URL path)."""
    if CAPABILITY.reads(name) is None:
        raise UnsafeName(f"invalid operation name {str(name)[:120]!r}")
    return name


def _token(name: str) -> str:
    return name.rsplit("-", 1)[-1]


def _failure(status: OperationStatus, operation: Operation = Operation.CREATE) -> CloudFailure:
    """The error a failed operation means (``compute_parse.failure`` chose its code)."""
    message = status.error_message or "the operation failed"
    verdict = classify(operation, code=status.error_code, message=message)
    if isinstance(verdict, Outcome):  # a create's 409 / a delete's 404: said by the caller
        return PermanentCloudError(message, status="ALREADY_EXISTS", code=status.error_code)
    return verdict


__all__ = [
    "CAPABILITY",
    "DEFAULT_ENDPOINT",
    "ENDPOINT_ENV",
    "SWEEP_EVERY",
    "ComputeCloud",
    "check_operation_name",
    "compute_endpoint",
]
