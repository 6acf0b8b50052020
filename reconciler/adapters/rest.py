"""The capacity port (``adapters.cloud.Cloud``) over the Cloud TPU v2 REST API (httpx, async,
keep-alive): the TPU API's queued resources are its capacity requests.

Purpose: the fast backend. One ``observe`` is exactly one paginated queued-resource list and one
paginated node list on ``locations/-`` (all zones, fetched concurrently) however many slots
there are (``Capability.observes_all_zones``); a zone named in ``unreachable[]`` is reported as
*unknown*, never as empty. Creates and deletes return long-running operations that are not
waited for (the controller observes again); an operation that is already ``done`` with an
``error`` is classified like any failure.

Bodies are read by ``adapters/tpu_api_parse`` and written by ``adapters/tpu_api_body``, as
gcloud's are. Failures are classified by ``adapters.cloud_errors``, exactly as the gcloud
backend does. The HTTP session (tokens, a 401's one fresh token, ``X-Goog-User-Project`` as
gcloud sends it, transport errors and answers that are not JSON as ``TransientCloudError``)
is ``adapters/google_http.py``, shared with Compute Engine's cloud. Nodes of the old v1 API
are left out of the node list, as gcloud's ``tpu-vm list`` does (``IsTPUVMNode``). An
observation is either complete or not returned at all.

The endpoint is ``https://tpu.googleapis.com/`` unless ``CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU``
(gcloud's own override, so the emulator works for both backends) or ``endpoint`` says otherwise.

May: send HTTP requests, read tokens through ``adapters.auth``. Must: validate every name before
it reaches a URL or body, never log or raise with a token. May not: decide what to do.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Final, TypeVar, Unpack

from reconciler.adapters.cloud import OperationStatus, Outcome, Submitted
from reconciler.adapters.cloud_errors import DEFAULT_DELAY, Operation, check
from reconciler.adapters.google_http import (
    SessionCloud,
    SessionOptions,
    both,
    check_endpoint,
    endpoint_from,
    retry_after,
)
from reconciler.adapters.tpu_api_body import create_body
from reconciler.adapters.tpu_api_boot import GuestAttributeBootReports
from reconciler.adapters.tpu_api_parse import (
    capability,
    check_api,
    node_from_api,
    request_from_api,
)
from reconciler.errors import TransientCloudError, UnsafeName
from reconciler.model import flex
from reconciler.model.boot_script import boot_metadata
from reconciler.model.capacity import CapacityRequest
from reconciler.model.names import (
    ZONE_RE,
    check_name,
    check_query_path,
    check_zone,
)
from reconciler.model.observed import Observation
from reconciler.model.requests import CreateRequest
from reconciler.model.vocabulary import REST

#: Items asked for per list page: a poll stays one request per collection up to this many QRs
#: (the server may return fewer; pagination still follows nextPageToken).
PAGE_SIZE: Final = 1000

DEFAULT_ENDPOINT: Final = "https://tpu.googleapis.com/"
ENDPOINT_ENV: Final = "CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU"
#: A list longer than this many pages is treated as a broken server, not read forever.
MAX_PAGES: Final = 1000
#: What this cloud can do: every zone in one list (``locations/-``, ``unreachable[]`` kept).
CAPABILITY: Final = capability(REST, observes_all_zones=True)
#: The API version that speaks flex-start (creates of flex-start slots, and the QR list
#: while the file has one).
ALPHA: Final = "v2alpha1"
#: What the model's parsers raise on JSON of the wrong shape (ValueError by contract; the
#: others when a nested field has the wrong type): all mean "malformed", none may crash us.
_PARSE_ERRORS: Final = (ValueError, TypeError, AttributeError, KeyError)
_TITLE: Final = "the TPU API"

T = TypeVar("T")


class RestCloud(SessionCloud, GuestAttributeBootReports):
    """``Cloud`` over the TPU v2 REST API. Share one instance per event loop; ``aclose`` it."""

    capability = CAPABILITY

    def __init__(
        self,
        project: str,
        *,
        endpoint: str | None = None,
        page_size: int = PAGE_SIZE,
        alpha_reads: bool = False,
        **options: Unpack[SessionOptions],
    ) -> None:
        endpoint = endpoint_from(endpoint, options.get("env"), ENDPOINT_ENV, DEFAULT_ENDPOINT)
        super().__init__(project, endpoint, title=_TITLE, **options)
        #: list queued resources on v2alpha1 (it alone reports a flex-start run's end)
        self.alpha_reads = alpha_reads
        self.page_size = max(1, int(page_size))
        self.timeout = self._http.timeout
        self._base = f"{self.endpoint}v2/projects/{self.project}/locations/"
        self._alpha = f"{self.endpoint}{ALPHA}/projects/{self.project}/locations/"

    # --- the Cloud protocol ----------------------------------------------------------------

    async def observe(self, zones: Collection[str] | None) -> Observation:
        wanted = None if zones is None else frozenset(check_zone(z) for z in zones)
        qr_base = self._alpha if self.alpha_reads else self._base
        (qr_items, qr_gone), (node_items, node_gone) = await both(
            self._list_all("queuedResources", qr_base), self._list_all("nodes")
        )
        try:
            qrs = {q.key: q for q in map(request_from_api, qr_items)}
            nodes = {n.key: n for n in map(node_from_api, filter(is_tpu_vm_node, node_items))}
        except _PARSE_ERRORS as exc:
            raise _malformed("list", str(exc)) from None
        unreachable = frozenset(_unreachable_zone(u) for u in qr_gone | node_gone)
        if wanted is not None:
            qrs = {k: q for k, q in qrs.items() if q.zone in wanted}
            nodes = {k: n for k, n in nodes.items() if n.zone in wanted}
            unreachable &= wanted
        return Observation(
            requests=tuple(_sorted(qrs)),
            nodes=tuple(_sorted(nodes)),
            unreachable=unreachable,
            zones=wanted,
        )

    async def create_request(self, request: CreateRequest) -> Submitted:
        check_api(request.api)
        body = create_body(self.project, request)
        base = self._alpha if request.mode == flex.MODE else self._base
        url = f"{base}{request.zone}/queuedResources"
        answer = await self._http.call(
            Operation.CREATE, "POST", url, params={"queuedResourceId": request.name}, body=body
        )
        return _submitted(Operation.CREATE, answer)

    async def delete_request(self, api: str, zone: str, name: str, *, force: bool) -> Submitted:
        check_api(api)
        url = self._qr_url(zone, name)
        params = {"force": "true"} if force else None
        answer = await self._http.call(Operation.DELETE, "DELETE", url, params=params)
        return _submitted(Operation.DELETE, answer)

    async def get_operation(self, name: str) -> OperationStatus | None:
        url = f"{self.endpoint}v2/{check_operation_name(name)}"
        answer = await self._http.call(Operation.GET, "GET", url)
        if isinstance(answer, Outcome):
            return None  # NOT_FOUND: the cloud forgot it
        return operation_status(answer)

    async def describe_request(self, api: str, zone: str, name: str) -> CapacityRequest | None:
        check_api(api)
        answer = await self._http.call(Operation.GET, "GET", self._qr_url(zone, name))
        if isinstance(answer, Outcome):
            return None  # NOT_FOUND
        try:
            return request_from_api(answer)
        except _PARSE_ERRORS as exc:
            raise _malformed("get", str(exc)) from None

    async def guest_attributes(
        self, zone: str, node: str, query_path: str | None = None
    ) -> list[dict[str, Any]]:
        """Flattened like gcloud's ``get-guest-attributes``: one dict per entry with
        ``worker_id``, ``namespace``, ``key`` and ``value``."""
        url = f"{self._base}{check_zone(zone)}/nodes/{check_name(node)}:getGuestAttributes"
        body: dict[str, Any] = {}
        if query_path:
            body["queryPath"] = check_query_path(query_path)
        answer = await self._http.call(Operation.OTHER, "POST", url, body=body)
        if isinstance(answer, Outcome):  # pragma: no cover - OTHER never yields ALREADY
            return []
        try:
            return flatten_guest_attributes(answer)
        except ValueError as exc:
            raise _malformed("getGuestAttributes", str(exc)) from None

    async def set_boot_script(
        self, api: str, zone: str, node: str, script: str, workers: int = 1
    ) -> None:
        """``setup.at_boot`` on a live node: its next boots run ``script``. The node's metadata
        is read, the startup script and guest attributes set in it, and the whole map written
        back (``nodes.patch``, ``updateMask=metadata``, what ``gcloud compute tpus tpu-vm
        update`` sends), so keys others set (``ssh-keys``) stay. A node that is gone has
        nothing to update."""
        check_api(api)
        url = f"{self._base}{check_zone(zone)}/nodes/{check_name(node)}"
        answer = await self._http.call(Operation.GET, "GET", url)
        if isinstance(answer, Outcome):
            return
        metadata = answer.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise _malformed("get", "node metadata is not an object")
        metadata = {str(k): str(v) for k, v in metadata.items()} | boot_metadata(script)
        body = {"metadata": metadata}
        await self._http.call(
            Operation.OTHER, "PATCH", url, params={"updateMask": "metadata"}, body=body
        )

    # --- HTTP ------------------------------------------------------------------------------

    def _qr_url(self, zone: str, name: str) -> str:
        return f"{self._base}{check_zone(zone)}/queuedResources/{check_name(name)}"

    async def _list_all(
        self, collection: str, base: str | None = None
    ) -> tuple[list[Any], set[str]]:
        """Every item of ``locations/-/<collection>`` over all pages, and ``unreachable[]``."""
        url = f"{base or self._base}-/{collection}"
        items: list[Any] = []
        unreachable: set[str] = set()
        seen: set[str] = set()
        params: dict[str, str] = {"pageSize": str(self.page_size)}
        for _ in range(MAX_PAGES):
            page = await self._http.call(Operation.LIST, "GET", url, params=params)
            if isinstance(page, Outcome):  # pragma: no cover - LIST never yields ALREADY
                raise _malformed(collection, "no list")
            chunk = page.get(collection, [])
            gone = page.get("unreachable", [])
            token = page.get("nextPageToken") or None
            if not isinstance(chunk, list):
                raise _malformed(collection, f"{collection} is not a list")
            if not isinstance(gone, list) or not all(isinstance(u, str) for u in gone):
                raise _malformed(collection, "unreachable is not a list of names")
            if token is not None and not isinstance(token, str):
                raise _malformed(collection, "nextPageToken is not a string")
            items.extend(chunk)
            unreachable.update(gone)
            if token is None:
                return items, unreachable
            if token in seen:
                raise _malformed(collection, "pagination repeats a page token")
            seen.add(token)
            params = {"pageSize": str(self.page_size), "pageToken": token}
        raise _malformed(collection, f"more than {MAX_PAGES} pages")


# --- pure helpers (no I/O) -----------------------------------------------------------------


def flatten_guest_attributes(answer: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``GetGuestAttributesResponse`` -> gcloud's rows. Raises ValueError when malformed."""
    rows: list[dict[str, Any]] = []
    workers = answer.get("guestAttributes") or []
    if not isinstance(workers, list):
        raise ValueError("guestAttributes is not a list")
    for worker_id, attrs in enumerate(workers):
        if not isinstance(attrs, dict):
            raise ValueError("a guest attribute is not an object")
        value = attrs.get("queryValue") or {}
        entries = (value.get("items") or []) if isinstance(value, dict) else None
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise ValueError("queryValue.items is not a list of objects")
        for entry in entries:
            rows.append(
                {
                    "worker_id": worker_id,
                    "namespace": entry.get("namespace"),
                    "key": entry.get("key"),
                    "value": entry.get("value"),
                }
            )
    return rows


def _submitted(operation: Operation, answer: dict[str, Any] | Outcome) -> Submitted:
    """DONE (with the operation's name) for an accepted long-running operation; its
    ``error`` classified when it is already done and failed (ALREADY_EXISTS / NOT_FOUND then
    mean ALREADY as usual)."""
    if isinstance(answer, Outcome):
        return Submitted(answer)
    status = operation_status(answer)
    if status.failed:
        return Submitted(check(operation, code=status.error_code, message=status.error_message))
    return Submitted(Outcome.DONE, CAPABILITY.reads(status.name))


def operation_status(answer: Mapping[str, Any]) -> OperationStatus:
    """An ``Operation`` JSON -> ``OperationStatus``; raises the malformed-answer error."""
    name = answer.get("name", "")
    error = answer.get("error")
    if not isinstance(name, str) or (error is not None and not isinstance(error, dict)):
        raise _malformed("operation", "name is not a string or error is not an object")
    code = (error or {}).get("code")
    message = (error or {}).get("message")
    return OperationStatus(
        name=name,
        done=answer.get("done") is True,
        error_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
        error_message=message if isinstance(message, str) else "",
    )


def check_operation_name(name: str) -> str:
    """``projects/P/locations/Z/operations/ID``, nothing else (it lands in a URL path)."""
    if CAPABILITY.reads(name) is None:
        raise UnsafeName(f"invalid operation name {str(name)[:120]!r}")
    return name


def is_tpu_vm_node(item: Any) -> bool:
    """gcloud's ``IsTPUVMNode``: a node whose ``apiVersion`` is V1* or unspecified belongs to
    the old v1 API and is not listed (an absent field is kept, as gcloud keeps it)."""
    if not isinstance(item, dict):
        return True  # let the parser call it malformed
    version = item.get("apiVersion")
    if not isinstance(version, str):
        return True
    upper = version.upper()
    return not upper.startswith("V1") and upper != "API_VERSION_UNSPECIFIED"


def _unreachable_zone(entry: str) -> str:
    """``projects/p/locations/us-east1-d`` or ``us-east1-d`` -> the zone. Anything else (a
    region, garbage) would leave unknown which zones went unseen: the observation is void."""
    zone = entry.rsplit("locations/", 1)[-1].strip("/")
    if not ZONE_RE.fullmatch(zone):
        raise _malformed("list", f"unreachable location {entry[:80]!r} is not a zone")
    return zone


def _sorted(index: Mapping[tuple[str, str], T]) -> list[T]:
    return [index[key] for key in sorted(index)]


def _malformed(what: str, detail: str, *, code: int | None = None) -> TransientCloudError:
    return TransientCloudError(
        f"malformed answer from {_TITLE} ({what}): {detail}", delay=DEFAULT_DELAY, code=code
    )


__all__ = [
    "DEFAULT_ENDPOINT",
    "ENDPOINT_ENV",
    "RestCloud",
    "check_endpoint",
    "check_operation_name",
    "flatten_guest_attributes",
    "is_tpu_vm_node",
    "operation_status",
    "retry_after",
]
