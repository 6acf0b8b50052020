"""Routing of Cloud TPU v2 REST requests onto the emulated world.

Pure request -> response mapping: ``dispatch`` takes a parsed request and a settled ``World``
and returns (HTTP status, JSON). It mutates the world for create/delete and nothing else; no
sockets, no clock, no locking (the server does those).

Served subset (what gcloud ``compute tpus queued-resources`` and ``tpu-vm`` use):

    GET    /v2/projects/P/locations/Z/queuedResources          list (Z may be "-")
    POST   /v2/projects/P/locations/Z/queuedResources?queuedResourceId=ID
    GET    /v2/projects/P/locations/Z/queuedResources/ID
    DELETE /v2/projects/P/locations/Z/queuedResources/ID[?force=true]
    GET    /v2/projects/P/locations/Z/nodes                    list (Z may be "-")
    GET    /v2/projects/P/locations/Z/nodes/ID
    PATCH  /v2/projects/P/locations/Z/nodes/ID?updateMask=metadata   (metadata only)
    POST   /v2/projects/P/locations/Z/nodes/ID:getGuestAttributes
    GET    /v2/projects/P/locations/Z/operations/ID

each also under ``/v2alpha1/`` (gcloud alpha), whose queued resources add flex-start's
``provisioningModel`` and ``runDuration``;

and of OS Login v1 (what ``gcloud compute os-login describe-profile`` asks, with
``CLOUDSDK_API_ENDPOINT_OVERRIDES_OSLOGIN`` pointing here):

    GET    /v1/users/U/loginProfile                            one POSIX account, primary

and of Cloud Quotas v1 (``CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDQUOTAS`` pointing here), limits
only, as the real one gives:

    GET    /v1/projects/P/locations/global/services/tpu.googleapis.com/quotaInfos
    GET    /v1/projects/P/locations/global/services/compute.googleapis.com/quotaInfos
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from reconciler.emulator import _records as rec
from reconciler.emulator._records import ApiError
from reconciler.emulator._world import World

_LOC = r"^/(?P<version>v2|v2alpha1)/projects/(?P<project>[^/]+)/locations/(?P<zone>[^/]+)"
#: Fields of a QueuedResource only v2alpha1 knows (v2 refuses them as unknown names).
_ALPHA_FIELDS = ("provisioningModel", "runDuration")
ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    ("GET", re.compile(_LOC + r"/queuedResources/?$"), "queuedResources.list"),
    ("POST", re.compile(_LOC + r"/queuedResources/?$"), "queuedResources.create"),
    ("GET", re.compile(_LOC + r"/queuedResources/(?P<id>[^/:]+)$"), "queuedResources.get"),
    ("DELETE", re.compile(_LOC + r"/queuedResources/(?P<id>[^/:]+)$"), "queuedResources.delete"),
    ("GET", re.compile(_LOC + r"/nodes/?$"), "nodes.list"),
    ("GET", re.compile(_LOC + r"/nodes/(?P<id>[^/:]+)$"), "nodes.get"),
    ("PATCH", re.compile(_LOC + r"/nodes/(?P<id>[^/:]+)$"), "nodes.patch"),
    (
        "POST",
        re.compile(_LOC + r"/nodes/(?P<id>[^/:]+):getGuestAttributes$"),
        "nodes.getGuestAttributes",
    ),
    ("GET", re.compile(_LOC + r"/operations/(?P<id>[^/]+)$"), "operations.get"),
    ("GET", re.compile(r"^/v1/users/(?P<user>[^/]+)/loginProfile$"), "users.getLoginProfile"),
    (
        "GET",
        re.compile(
            r"^/v1/projects/(?P<project>[^/]+)/locations/global/services/tpu\.googleapis\.com"
            r"/quotaInfos/?$"
        ),
        "quotaInfos.list",
    ),
    (
        "GET",
        re.compile(
            r"^/v1/projects/(?P<project>[^/]+)/locations/global/services/compute\.googleapis\.com"
            r"/quotaInfos/?$"
        ),
        "computeQuotaInfos.list",
    ),
]
MAX_PAGE_SIZE = 1000
_T = TypeVar("_T")


def route(method: str, path: str) -> tuple[str, dict[str, str]] | None:
    for verb, pattern, name in ROUTES:
        if verb == method and (m := pattern.match(path)):
            return name, m.groupdict()
    return None


def classify(method: str, path: str) -> str:
    """The request-count key: ``"POST queuedResources.create"``, ``"GET unknown"``."""
    found = route(method, path)
    return f"{method} {found[0] if found else 'unknown'}"


def dispatch(
    world: World, method: str, path: str, query: dict[str, str], body: Any, page_size: int
) -> tuple[int, rec.JSON]:
    found = route(method, path)
    if found is None:
        return 404, ApiError("NOT_FOUND", f"no such method: {method} {path}").body()
    name, params = found
    try:
        return 200, _HANDLERS[name](world, params, query, body, page_size)
    except ApiError as exc:
        return exc.http_status, exc.body()


def _list_qrs(world: World, p: dict[str, str], q: dict[str, str], _: Any, size: int) -> rec.JSON:
    def render(r: rec.QRRecord) -> rec.JSON:
        return rec.render_qr(r, p["project"], world.clock, alpha=_alpha(p))

    return _list(world, p, q, size, "queuedResources", world.qrs, render)


def _list_nodes(world: World, p: dict[str, str], q: dict[str, str], _: Any, size: int) -> rec.JSON:
    def render(n: rec.NodeRecord) -> rec.JSON:
        return rec.render_node(n, world.qrs[(n.zone, n.qr_name)], p["project"], world.clock)

    return _list(world, p, q, size, "nodes", world.nodes, render)


def _list(
    world: World,
    p: dict[str, str],
    query: dict[str, str],
    size: int,
    field: str,
    records: dict[tuple[str, str], _T],
    render: Callable[[_T], rec.JSON],
) -> rec.JSON:
    zones, unreachable = world.zones_for(p["zone"])
    items = [
        (key, r)
        for key, r in records.items()
        if (zones is None or key[0] in zones) and key[0] not in unreachable
    ]
    items.sort(key=lambda kv: kv[0])
    page, token = _page(items, query, size)
    out: rec.JSON = {field: [render(r) for _, r in page]}
    return _finish_list(out, field, token, unreachable, p["project"])


def _finish_list(
    out: rec.JSON, field: str, token: str | None, unreachable: list[str], project: str
) -> rec.JSON:
    if not out[field]:
        del out[field]  # Google omits empty repeated fields
    if token:
        out["nextPageToken"] = token
    if unreachable:
        out["unreachable"] = [rec.location(project, z) for z in unreachable]
    return out


def _page(
    items: list[tuple[tuple[str, str], _T]], query: dict[str, str], default_size: int
) -> tuple[list[tuple[tuple[str, str], _T]], str | None]:
    """One page after the key in ``pageToken``; the token names the last key served."""
    size = default_size
    if query.get("pageSize"):
        try:
            size = int(query["pageSize"])
        except ValueError:
            raise ApiError("INVALID_ARGUMENT", "pageSize must be an integer") from None
        size = default_size if size <= 0 else min(size, MAX_PAGE_SIZE)
    try:
        return paginate(items, query.get("pageToken"), size)
    except ValueError:
        raise ApiError("INVALID_ARGUMENT", f"invalid pageToken {query['pageToken']!r}") from None


_K = TypeVar("_K", bound=tuple[str, ...])


def paginate(
    items: list[tuple[_K, _T]], token: str | None, size: int
) -> tuple[list[tuple[_K, _T]], str | None]:
    """The ``size`` items (sorted by key) after the key ``token`` names, and the token of the
    next page (None on the last). The token is opaque to clients; a malformed one raises
    ``ValueError``. Naming the last key served, a page boundary never skips or repeats an item
    when others come or go between pages."""
    if token:
        try:
            after = tuple(json.loads(base64.urlsafe_b64decode(token.encode())))
        except (ValueError, TypeError):
            raise ValueError(f"invalid page token {token!r}") from None
        items = [kv for kv in items if kv[0] > after]
    page = items[:size]
    if len(items) <= size:
        return page, None
    return page, base64.urlsafe_b64encode(json.dumps(page[-1][0]).encode()).decode()


def _alpha(p: dict[str, str]) -> bool:
    return p.get("version") == "v2alpha1"


def _create(world: World, p: dict[str, str], q: dict[str, str], body: Any, _: int) -> rec.JSON:
    unknown = [k for k in _ALPHA_FIELDS if isinstance(body, dict) and k in body]
    if unknown and not _alpha(p):
        raise ApiError(
            "INVALID_ARGUMENT",
            f"Invalid JSON payload received. Unknown name \"{unknown[0]}\" at 'queued_resource'",
        )
    op = world.create(p["project"], p["zone"], q.get("queuedResourceId"), body)
    world.settle(world.t)
    return rec.render_op(op, p["project"], world.clock)


def _get_qr(world: World, p: dict[str, str], _q: dict[str, str], _b: Any, _s: int) -> rec.JSON:
    q = world.get(p["zone"], p["id"])
    return rec.render_qr(q, p["project"], world.clock, alpha=_alpha(p))


def _delete(world: World, p: dict[str, str], q: dict[str, str], _b: Any, _s: int) -> rec.JSON:
    force = q.get("force", "").lower() in {"true", "1"}
    op = world.delete(p["zone"], p["id"], force=force)
    world.settle(world.t)
    return rec.render_op(op, p["project"], world.clock)


def _get_node(world: World, p: dict[str, str], _q: dict[str, str], _b: Any, _s: int) -> rec.JSON:
    node = world.get_node(p["zone"], p["id"])
    return rec.render_node(node, world.qrs[(node.zone, node.qr_name)], p["project"], world.clock)


def _patch_node(world: World, p: dict[str, str], q: dict[str, str], body: Any, _s: int) -> rec.JSON:
    op = world.update_node(p["zone"], p["id"], body, q.get("updateMask", ""))
    return rec.render_op(op, p["project"], world.clock)


def _guest(world: World, p: dict[str, str], _q: dict[str, str], body: Any, _s: int) -> rec.JSON:
    node = world.get_node(p["zone"], p["id"])
    body = body if isinstance(body, dict) else {}
    workers = body.get("workerIds") or []
    return rec.guest_attributes(node, str(body.get("queryPath") or ""), list(workers))


def _get_op(world: World, p: dict[str, str], _q: dict[str, str], _b: Any, _s: int) -> rec.JSON:
    return rec.render_op(world.get_op(p["zone"], p["id"]), p["project"], world.clock)


def _login_profile(
    world: World, p: dict[str, str], q: dict[str, str], _b: Any, _s: int
) -> rec.JSON:
    return rec.login_profile(p["user"], world.os_login_user, q.get("projectId"))


_Handler = Callable[[World, dict[str, str], dict[str, str], Any, int], rec.JSON]
_HANDLERS: dict[str, _Handler] = {
    "queuedResources.list": _list_qrs,
    "queuedResources.create": _create,
    "queuedResources.get": _get_qr,
    "queuedResources.delete": _delete,
    "nodes.list": _list_nodes,
    "nodes.get": _get_node,
    "nodes.patch": _patch_node,
    "nodes.getGuestAttributes": _guest,
    "operations.get": _get_op,
    "users.getLoginProfile": _login_profile,
    "quotaInfos.list": lambda world, p, _q, _b, _s: world.quotas.quota_infos(p["project"]),
    "computeQuotaInfos.list": lambda world, p, _q, _b, _s: world.compute.quotas.quota_infos(
        p["project"]
    ),
}
