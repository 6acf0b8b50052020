"""Routing of Compute Engine v1 REST requests onto the emulated world.

Pure request -> response mapping, like ``_api`` for the TPU side: ``dispatch`` takes a parsed
request and a settled ``ComputeWorld`` and returns (HTTP status, JSON); no sockets, no clock,
no locking. Every route is under ``/compute/v1/projects/P/`` — where gcloud sends them when
``CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE`` is the emulator's bare URL [V: gcloud's
``_BuildEndpointOverride`` appends the API's own path to an override whose path is ``/``]::

    POST/GET     zones/Z/instances                       insert / list
    GET/DELETE   zones/Z/instances/N                     get / delete
    POST         zones/Z/instances/N/{stop,start,setMetadata}
    GET          aggregated/instances                    every zone, paged
    POST/GET     {global,regions/R}/instanceTemplates    insert / list
    GET/DELETE   {global,regions/R}/instanceTemplates/T
    POST/GET     regions/R/resourcePolicies              insert / list
    GET/DELETE   regions/R/resourcePolicies/N
    POST/GET     {zones/Z,regions/R}/instanceGroupManagers            insert / list
    GET/DELETE   {zones/Z,regions/R}/instanceGroupManagers/M
    POST         .../instanceGroupManagers/M/{createInstances,deleteInstances,resize,
                                               listManagedInstances}
    GET          aggregated/instanceGroupManagers
    GET          {zones/Z,regions/R,global}/operations[/OP]         list / get
    POST         {zones/Z,regions/R,global}/operations/OP/wait      (blocks in ``_server``)

Lists take ``maxResults`` (default and most 500), ``pageToken`` and ``filter``
(``_compute_filter``). Mutations take ``requestId``: the same id answers with the operation
it made the first time. Request bodies are checked against the SDK's fields first
(``_compute_schema``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from reconciler.emulator import _compute_errors as err
from reconciler.emulator._api import paginate
from reconciler.emulator._compute_catalog import link, region_path
from reconciler.emulator._compute_errors import ComputeError
from reconciler.emulator._compute_filter import compile_filter
from reconciler.emulator._compute_group_render import render_group, render_member
from reconciler.emulator._compute_groups import ComputeWorld, Group
from reconciler.emulator._compute_records import (
    JSON,
    render_instance,
    render_op,
    render_policy,
    render_template,
    wall_stamp,
)
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


def _route(
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


def _page(
    call: Call, items: Iterable[tuple[tuple[str, ...], JSON]]
) -> tuple[list[JSON], str | None]:
    keep = compile_filter(call.query.get("filter"))
    rows = sorted(((k, v) for k, v in items if keep(v)), key=lambda kv: kv[0])
    try:
        size = int(call.query.get("maxResults") or MAX_RESULTS)
    except ValueError:
        raise err.bad_field("maxResults", call.query["maxResults"]) from None
    size = MAX_RESULTS if size <= 0 else min(size, MAX_RESULTS)
    try:
        page, token = paginate(rows, call.query.get("pageToken"), size)
    except ValueError:
        raise err.bad_field(
            "pageToken", call.query.get("pageToken"), "Invalid page token."
        ) from None
    return [v for _, v in page], token


def _list(call: Call, kind: str, path: str, items: Iterable[tuple[tuple[str, ...], JSON]]) -> JSON:
    page, token = _page(call, items)
    out: JSON = {
        "kind": kind,
        "id": f"projects/{call.project}/{path}",
        "selfLink": link(call.project, path),
    }
    if page:
        out["items"] = page
    if token:
        out["nextPageToken"] = token
    return out


def _list_in(
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
    return _list(call, kind, f"{scope}/{collection}", items)


def _aggregated(
    call: Call,
    kind: str,
    field: str,
    path: str,
    items: Iterable[tuple[tuple[str, ...], JSON]],
    scopes: Iterable[str],
) -> JSON:
    """An aggregated list: one entry per scope, ``{field: [...]}`` or the warning Google
    gives a scope without results on this page."""
    page, token = _page(call, items)
    by_scope: dict[str, list[JSON]] = {}
    for item in page:
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


# --- instances --------------------------------------------------------------------------------

_Z, _R, _N = r"zones/(?P<zone>[^/]+)", r"regions/(?P<region>[^/]+)", r"(?P<name>[^/]+)"


def instance_view(call: Call, vm: Any) -> JSON:
    return render_instance(vm, call.project, wall_stamp(call.world.clock.wall))


@_route(
    "POST", f"{_Z}/instances", "compute.instances.insert", ("Instance", "instance_resource"), True
)
def _insert_instance(call: Call) -> JSON:
    if call.query.get("sourceInstanceTemplate") or call.query.get("sourceMachineImage"):
        raise err.invalid("The emulator creates instances from a full body only.")
    return call.op(call.world.insert_instance(call.params["zone"], call.body, call.request_id))


@_route("GET", f"{_Z}/instances", "compute.instances.list")
def _list_instances(call: Call) -> JSON:
    instances = call.world.instances.values()
    return _list_in(call, "compute#instanceList", "instances", instances, instance_view)


@_route("GET", "aggregated/instances", "compute.instances.aggregatedList")
def _aggregated_instances(call: Call) -> JSON:
    w = call.world
    items = (((vm.zone, vm.name), instance_view(call, vm)) for vm in w.instances.values())
    scopes = [f"zones/{z}" for z in w.zones_seen]
    return _aggregated(
        call, "compute#instanceAggregatedList", "instances", "aggregated/instances", items, scopes
    )


@_route("GET", f"{_Z}/instances/{_N}", "compute.instances.get")
def _get_instance(call: Call) -> JSON:
    return instance_view(call, call.world.get_instance(call.params["zone"], call.params["name"]))


def _instance_verb(verb: str) -> Handler:
    def handler(call: Call) -> JSON:
        w, zone, name = call.world, call.params["zone"], call.params["name"]
        if verb == "delete":
            return call.op(w.delete_instance(zone, name, call.request_id))
        if verb == "stop":
            return call.op(w.stop_instance(zone, name, call.request_id))
        if verb == "start":
            return call.op(w.start_instance(zone, name, call.request_id))
        return call.op(w.set_metadata(zone, name, call.body or {}, call.request_id))

    return handler


_route("DELETE", f"{_Z}/instances/{_N}", "compute.instances.delete", None, True)(
    _instance_verb("delete")
)
for _verb in ("stop", "start"):
    _route("POST", f"{_Z}/instances/{_N}/{_verb}", f"compute.instances.{_verb}", None, True)(
        _instance_verb(_verb)
    )
_route(
    "POST",
    f"{_Z}/instances/{_N}/setMetadata",
    "compute.instances.setMetadata",
    ("Metadata", "metadata_resource"),
    True,
)(_instance_verb("setMetadata"))


# --- templates and policies -------------------------------------------------------------------


def _templates(where: str, prefix: str) -> None:
    def region(call: Call) -> str | None:
        return call.params.get("region")

    def insert(call: Call) -> JSON:
        return call.op(call.world.insert_template(region(call), call.body, call.request_id))

    def listing(call: Call) -> JSON:
        def view(call: Call, tpl: Any) -> JSON:
            return render_template(tpl, call.project, wall_stamp(call.world.clock.wall))

        templates = call.world.templates.values()
        return _list_in(call, "compute#instanceTemplateList", "instanceTemplates", templates, view)

    def get(call: Call) -> JSON:
        tpl = call.world.get_template(region(call), call.params["name"])
        return render_template(tpl, call.project, wall_stamp(call.world.clock.wall))

    def delete(call: Call) -> JSON:
        name = call.params["name"]
        return call.op(call.world.delete_template(region(call), name, call.request_id))

    body = ("InstanceTemplate", "instance_template_resource")
    _route("POST", f"{where}/instanceTemplates", f"{prefix}.insert", body, True)(insert)
    _route("GET", f"{where}/instanceTemplates", f"{prefix}.list")(listing)
    _route("GET", f"{where}/instanceTemplates/{_N}", f"{prefix}.get")(get)
    _route("DELETE", f"{where}/instanceTemplates/{_N}", f"{prefix}.delete", None, True)(delete)


_templates("global", "compute.instanceTemplates")
_templates(_R, "compute.regionInstanceTemplates")


def policy_view(call: Call, p: Any) -> JSON:
    return render_policy(p, call.project, call.world.t, wall_stamp(call.world.clock.wall))


@_route(
    "POST",
    f"{_R}/resourcePolicies",
    "compute.resourcePolicies.insert",
    ("ResourcePolicy", "resource_policy_resource"),
    True,
)
def _insert_policy(call: Call) -> JSON:
    return call.op(call.world.insert_policy(call.params["region"], call.body, call.request_id))


@_route("GET", f"{_R}/resourcePolicies", "compute.resourcePolicies.list")
def _list_policies(call: Call) -> JSON:
    policies = call.world.policies.values()
    return _list_in(call, "compute#resourcePolicyList", "resourcePolicies", policies, policy_view)


@_route("GET", f"{_R}/resourcePolicies/{_N}", "compute.resourcePolicies.get")
def _get_policy(call: Call) -> JSON:
    return policy_view(call, call.world.get_policy(call.params["region"], call.params["name"]))


@_route("DELETE", f"{_R}/resourcePolicies/{_N}", "compute.resourcePolicies.delete", None, True)
def _delete_policy(call: Call) -> JSON:
    w = call.world
    return call.op(w.delete_policy(call.params["region"], call.params["name"], call.request_id))


# --- managed instance groups ------------------------------------------------------------------


def group_view(call: Call, g: Group) -> JSON:
    w = call.world
    return render_group(
        g, w.member_instance, call.project, w.t, w.timings.activate, wall_stamp(w.clock.wall)
    )


def _groups(prefix: str, where: str, request_word: str) -> None:
    def g_of(call: Call) -> Group:
        return call.world.get_group(call.scope, call.params["name"])

    def insert(call: Call) -> JSON:
        return call.op(call.world.insert_group(call.scope, call.body, call.request_id))

    def listing(call: Call) -> JSON:
        regional = call.scope.startswith("regions/")
        kind = (
            "compute#regionInstanceGroupManagerList"
            if regional
            else ("compute#instanceGroupManagerList")
        )
        groups = call.world.groups.values()
        return _list_in(call, kind, "instanceGroupManagers", groups, group_view)

    def get(call: Call) -> JSON:
        return group_view(call, g_of(call))

    def delete(call: Call) -> JSON:
        return call.op(call.world.delete_group(call.scope, call.params["name"], call.request_id))

    def create(call: Call) -> JSON:
        w, name = call.world, call.params["name"]
        return call.op(w.create_instances(call.scope, name, call.body or {}, call.request_id))

    def remove(call: Call) -> JSON:
        w, name = call.world, call.params["name"]
        return call.op(w.delete_instances(call.scope, name, call.body or {}, call.request_id))

    def resize(call: Call) -> JSON:
        size = call.query.get("size")
        if size is None or not re.fullmatch(r"-?\d+", size):
            raise err.bad_field("size", size or "", "The size parameter is required.")
        return call.op(
            call.world.resize(call.scope, call.params["name"], int(size), call.request_id)
        )

    def members(call: Call) -> JSON:
        g = g_of(call)
        rows = (
            (
                (f"{m.seq:012d}", m.name),  # the order they were asked for [I]
                render_member(g, m, call.world.member_instance(g, m), call.project),
            )
            for m in g.members.values()
        )
        page, token = _page(call, rows)
        out: JSON = {"managedInstances": page} if page else {}
        if token:
            out["nextPageToken"] = token
        return out

    base = f"{where}/instanceGroupManagers"
    resource = ("InstanceGroupManager", "instance_group_manager_resource")
    _route("POST", base, f"{prefix}.insert", resource, True)(insert)
    _route("GET", base, f"{prefix}.list")(listing)
    _route("GET", f"{base}/{_N}", f"{prefix}.get")(get)
    _route("DELETE", f"{base}/{_N}", f"{prefix}.delete", None, True)(delete)
    _route(
        "POST",
        f"{base}/{_N}/createInstances",
        f"{prefix}.createInstances",
        (
            "InstanceGroupManagersCreateInstancesRequest",
            f"{request_word}_create_instances_request_resource",
        ),
        True,
    )(create)
    _route(
        "POST",
        f"{base}/{_N}/deleteInstances",
        f"{prefix}.deleteInstances",
        (
            "InstanceGroupManagersDeleteInstancesRequest",
            f"{request_word}_delete_instances_request_resource",
        ),
        True,
    )(remove)
    _route("POST", f"{base}/{_N}/resize", f"{prefix}.resize", None, True)(resize)
    _route("POST", f"{base}/{_N}/listManagedInstances", f"{prefix}.listManagedInstances")(members)


_groups("compute.instanceGroupManagers", _Z, "instance_group_managers")
_groups("compute.regionInstanceGroupManagers", _R, "region_instance_group_managers")


@_route("GET", "aggregated/instanceGroupManagers", "compute.instanceGroupManagers.aggregatedList")
def _aggregated_groups(call: Call) -> JSON:
    w = call.world
    items = ((tuple(g.path.split("/")), group_view(call, g)) for g in w.groups.values())
    scopes = {f"zones/{z}" for z in w.zones_seen} | {region_path(z) for z in w.zones_seen}
    return _aggregated(
        call,
        "compute#instanceGroupManagerAggregatedList",
        "instanceGroupManagers",
        "aggregated/instanceGroupManagers",
        items,
        scopes,
    )


# --- operations -------------------------------------------------------------------------------


def _operations(where: str, prefix: str) -> None:
    def get(call: Call) -> JSON:
        return call.op(call.world.get_op(call.scope, call.params["name"]))

    def listing(call: Call) -> JSON:
        scope = call.scope
        items = (
            ((op.scope, f"{op.created:020.6f}", op.name), call.op(op))
            for op in call.world.ops.values()
            if op.scope == scope
        )
        return _list(call, "compute#operationList", f"{scope}/operations", items)

    _route("GET", f"{where}/operations", f"{prefix}.list")(listing)
    _route("GET", f"{where}/operations/{_N}", f"{prefix}.get")(get)
    _route("POST", f"{where}/operations/{_N}/wait", f"{prefix}.wait")(get)


_operations(_Z, "compute.zoneOperations")
_operations(_R, "compute.regionOperations")
_operations("global", "compute.globalOperations")


def waited_operation(method: str, path: str) -> tuple[str, str] | None:
    """(scope, operation name) when the request is an ``operations.wait``, else None."""
    found = route(method, path)
    if found is None or not found[0].name.endswith("Operations.wait"):
        return None
    params = found[1]
    call = Call(None, params, {}, None)  # type: ignore[arg-type]
    return call.scope, params["name"]
