"""The managed instance group routes (zonal and regional) and their resize requests::

    POST/GET     {zones/Z,regions/R}/instanceGroupManagers/M/resizeRequests   insert / list
    GET/DELETE   .../resizeRequests/RR
    POST         .../resizeRequests/RR/cancel


Pure request -> response mapping; registers into ``_compute_routing``'s table (``_compute_api``
imports this module, so every route is known once it is imported).
"""

from __future__ import annotations

import re
from typing import Any

from reconciler.emulator import _compute_errors as err
from reconciler.emulator._compute_catalog import region_path
from reconciler.emulator._compute_group_render import render_group, render_member
from reconciler.emulator._compute_groups import Group
from reconciler.emulator._compute_records import JSON, wall_stamp
from reconciler.emulator._compute_resize import render_resize_request
from reconciler.emulator._compute_routing import (
    NAME as _N,
)
from reconciler.emulator._compute_routing import (
    REGION as _R,
)
from reconciler.emulator._compute_routing import (
    ZONE as _Z,
)
from reconciler.emulator._compute_routing import (
    Call,
    aggregated,
    list_in,
    list_page,
    page,
)
from reconciler.emulator._compute_routing import (
    register as _route,
)


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
        return list_in(call, kind, "instanceGroupManagers", groups, group_view)

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
        listed, token = page(call, rows)
        out: JSON = {"managedInstances": listed} if listed else {}
        if token:
            out["nextPageToken"] = token
        return out

    def resize_view(call: Call, rr: Any) -> JSON:
        return render_resize_request(rr, call.project, wall_stamp(call.world.clock.wall))

    def rr_insert(call: Call) -> JSON:
        w, name = call.world, call.params["name"]
        return call.op(w.insert_resize_request(call.scope, name, call.body or {}, call.request_id))

    def rr_list(call: Call) -> JSON:
        g = g_of(call)
        rows = (
            ((rr.path,), resize_view(call, rr))
            for rr in call.world.resize_requests.values()
            if rr.group is g
        )
        kind = "compute#instanceGroupManagerResizeRequestList"
        return list_page(call, kind, f"{g.path}/resizeRequests", rows)

    def rr_get(call: Call) -> JSON:
        p = call.params
        return resize_view(call, call.world.get_resize_request(call.scope, p["name"], p["rr"]))

    def rr_cancel(call: Call) -> JSON:
        w, p = call.world, call.params
        return call.op(w.cancel_resize_request(call.scope, p["name"], p["rr"], call.request_id))

    def rr_delete(call: Call) -> JSON:
        w, p = call.world, call.params
        return call.op(w.delete_resize_request(call.scope, p["name"], p["rr"], call.request_id))

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
    rr_prefix = prefix.replace("GroupManagers", "GroupManagerResizeRequests")
    requests, one = f"{base}/{_N}/resizeRequests", f"{base}/{_N}/resizeRequests/(?P<rr>[^/]+)"
    body = ("InstanceGroupManagerResizeRequest", "instance_group_manager_resize_request_resource")
    _route("POST", requests, f"{rr_prefix}.insert", body, True)(rr_insert)
    _route("GET", requests, f"{rr_prefix}.list")(rr_list)
    _route("GET", one, f"{rr_prefix}.get")(rr_get)
    _route("POST", f"{one}/cancel", f"{rr_prefix}.cancel", None, True)(rr_cancel)
    _route("DELETE", one, f"{rr_prefix}.delete", None, True)(rr_delete)


_groups("compute.instanceGroupManagers", _Z, "instance_group_managers")
_groups("compute.regionInstanceGroupManagers", _R, "region_instance_group_managers")


@_route("GET", "aggregated/instanceGroupManagers", "compute.instanceGroupManagers.aggregatedList")
def _aggregated_groups(call: Call) -> JSON:
    w = call.world
    items = ((tuple(g.path.split("/")), group_view(call, g)) for g in w.groups.values())
    scopes = {f"zones/{z}" for z in w.zones_seen} | {region_path(z) for z in w.zones_seen}
    return aggregated(
        call,
        "compute#instanceGroupManagerAggregatedList",
        "instanceGroupManagers",
        "aggregated/instanceGroupManagers",
        items,
        scopes,
    )
