"""The machinery of the Compute Engine routes: the request (``Call``), the route table,
dispatch with Google's error envelope and ``requestId`` replay, and the list helpers (paging
with ``maxResults`` / ``pageToken``, ``filter``, aggregated lists).

Pure request -> response mapping, like ``_api`` for the TPU side: no sockets, no clock, no
locking. The routes themselves register here from ``_compute_api`` and
``_compute_api_groups``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from reconciler.emulator import _compute_errors as err
from reconciler.emulator._api import paginate
from reconciler.emulator._compute_catalog import link
from reconciler.emulator._compute_errors import ComputeError
from reconciler.emulator._compute_filter import compile_filter
from reconciler.emulator._compute_records import JSON, render_op, wall_stamp
from reconciler.emulator._compute_resize import ComputeWorld
from reconciler.emulator._compute_schema import check
from reconciler.model.names import ZONE_RE

ROOT = "/compute/"
PREFIX = r"^/compute/v1/projects/(?P<project>[^/]+)/"
MAX_RESULTS = 500
_REGION = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")


@dataclass
class Call:
    world: ComputeWorld
    params: dict[str, str]
    query: dict[str, str]
    body: Any

    @property
    def project(self) -> str:
        return self.params["project"]

    @property
    def scope(self) -> str:
        """``zones/Z``, ``regions/R`` or ``global``: where the resource lives."""
        if "zone" in self.params:
            return f"zones/{self.params['zone']}"
        if "region" in self.params:
            return f"regions/{self.params['region']}"
        return "global"

    @property
    def request_id(self) -> str | None:
        return self.query.get("requestId") or None

    def op(self, op: Any) -> JSON:
        return render_op(op, self.project, self.world.t, wall_stamp(self.world.clock.wall))


Handler = Callable[[Call], JSON]


@dataclass(frozen=True, slots=True)
class Route:
    verb: str
    pattern: re.Pattern[str]
    name: str  # the API's method id, e.g. "compute.instances.insert"
    handler: Handler
    body: tuple[str, str] | None = None  # (SDK message, the request field it arrives in)
    mutates: bool = False


ROUTES: list[Route] = []


def register(
    verb: str, path: str, name: str, body: tuple[str, str] | None = None, mutates: bool = False
) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        ROUTES.append(Route(verb, re.compile(PREFIX + path + "$"), name, handler, body, mutates))
        return handler

    return register


def route(method: str, path: str) -> tuple[Route, dict[str, str]] | None:
    for r in ROUTES:
        if r.verb == method and (m := r.pattern.match(path)):
            return r, m.groupdict()
    return None


def classify(method: str, path: str) -> str | None:
    """The request-count key, ``"POST compute.instances.insert"``; None: not a Compute path."""
    if not path.startswith(ROOT):
        return None
    found = route(method, path)
    return f"{method} {found[0].name if found else 'compute.unknown'}"


def dispatch(
    world: ComputeWorld, method: str, path: str, query: dict[str, str], body: Any
) -> tuple[int, JSON]:
    found = route(method, path)
    project = path.split("/")[4] if path.count("/") >= 4 else "-"
    if found is None:
        return 404, err.ComputeError(404, "notFound", f"no such method: {method} {path}").body(
            project
        )
    r, params = found
    call = Call(world, params, query, body)
    try:
        _check_place(params)
        if r.mutates and (earlier := world.replay(call.request_id)) is not None:
            return 200, call.op(earlier)
        if r.body is not None:
            check(body if body is not None else {}, r.body[0], r.body[1])
        result = r.handler(call)
        if r.mutates:
            world.tend()
        return 200, result
    except ComputeError as exc:
        return exc.code, exc.body(project)


def error_body(code: int, reason: str, message: str) -> JSON:
    """Google's error envelope for a refusal made outside the routes (a fault, bad JSON)."""
    return ComputeError(code, reason, message).body("-")


def reason_for(code: int) -> str:
    """The ``errors[].reason`` Google pairs with an HTTP status [V: compute-engine.md §2]."""
    return {
        400: "badRequest",
        401: "authError",
        403: "forbidden",
        404: "notFound",
        409: "alreadyExists",
        412: "conditionNotMet",
        429: "rateLimitExceeded",
        500: "backendError",
        503: "backendError",
    }.get(code, "backendError")


def _check_place(params: dict[str, str]) -> None:
    if "zone" in params and not ZONE_RE.fullmatch(params["zone"]):
        raise err.not_found(f"zones/{params['zone']}")
    if "region" in params and not _REGION.fullmatch(params["region"]):
        raise err.not_found(f"regions/{params['region']}")


# --- lists ------------------------------------------------------------------------------------


def page(
    call: Call, items: Iterable[tuple[tuple[str, ...], JSON]]
) -> tuple[list[JSON], str | None]:
    """The filtered, key-ordered page of ``items`` the call asks for, and the next token."""
    keep = compile_filter(call.query.get("filter"))
    rows = sorted(((k, v) for k, v in items if keep(v)), key=lambda kv: kv[0])
    try:
        size = int(call.query.get("maxResults") or MAX_RESULTS)
    except ValueError:
        raise err.bad_field("maxResults", call.query["maxResults"]) from None
    size = MAX_RESULTS if size <= 0 else min(size, MAX_RESULTS)
    try:
        chunk, token = paginate(rows, call.query.get("pageToken"), size)
    except ValueError:
        raise err.bad_field(
            "pageToken", call.query.get("pageToken"), "Invalid page token."
        ) from None
    return [v for _, v in chunk], token


def list_page(
    call: Call, kind: str, path: str, items: Iterable[tuple[tuple[str, ...], JSON]]
) -> JSON:
    rows, token = page(call, items)
    out: JSON = {
        "kind": kind,
        "id": f"projects/{call.project}/{path}",
        "selfLink": link(call.project, path),
    }
    if rows:
        out["items"] = rows
    if token:
        out["nextPageToken"] = token
    return out


def list_in(
    call: Call,
    kind: str,
    collection: str,
    records: Iterable[Any],
    view: Callable[[Call, Any], JSON],
) -> JSON:
    """The records of one scope (each has a ``path`` ``<scope>/<collection>/<name>``)."""
    scope = call.scope
    items = (
        (tuple(r.path.split("/")), view(call, r))
        for r in records
        if r.path.startswith(f"{scope}/{collection}/")
    )
    return list_page(call, kind, f"{scope}/{collection}", items)


def aggregated(
    call: Call,
    kind: str,
    field: str,
    path: str,
    items: Iterable[tuple[tuple[str, ...], JSON]],
    scopes: Iterable[str],
) -> JSON:
    """An aggregated list: one entry per scope, ``{field: [...]}`` or the warning Google
    gives a scope without results on this page."""
    rows, token = page(call, items)
    by_scope: dict[str, list[JSON]] = {}
    for item in rows:
        by_scope.setdefault(_scope_of(item), []).append(item)
    out_items: JSON = {}
    for scope in sorted(set(scopes) | set(by_scope)):
        if scope in by_scope:
            out_items[scope] = {field: by_scope[scope]}
        else:
            out_items[scope] = {
                "warning": {
                    "code": "NO_RESULTS_ON_PAGE",
                    "message": f"There are no results for scope '{scope}' on this page.",
                    "data": [{"key": "scope", "value": scope}],
                }
            }
    out: JSON = {
        "kind": kind,
        "id": f"projects/{call.project}/{path}",
        "items": out_items,
        "selfLink": link(call.project, path),
    }
    if token:
        out["nextPageToken"] = token
    return out


def _scope_of(item: JSON) -> str:
    place = item.get("zone") or item.get("region") or ""
    return "/".join(str(place).split("/")[-2:])


ZONE, REGION, NAME = r"zones/(?P<zone>[^/]+)", r"regions/(?P<region>[^/]+)", r"(?P<name>[^/]+)"


def waited_operation(method: str, path: str) -> tuple[str, str] | None:
    """(scope, operation name) when the request is an ``operations.wait``, else None."""
    found = route(method, path)
    if found is None or not found[0].name.endswith("Operations.wait"):
        return None
    params = found[1]
    call = Call(None, params, {}, None)  # type: ignore[arg-type]
    return call.scope, params["name"]
