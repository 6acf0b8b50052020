"""Routing of Compute Engine v1 REST requests onto the emulated world.

Pure request -> response mapping, like ``_api`` for the TPU side: ``dispatch`` takes a parsed
request and a settled ``ComputeWorld`` and returns (HTTP status, JSON); no sockets, no clock,
no locking. Every route is under ``/compute/v1/projects/P/`` — where gcloud sends them when
``CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE`` is the emulator's bare URL [V: gcloud's
``_BuildEndpointOverride`` appends the API's own path to an override whose path is ``/``]::

    POST/GET     zones/Z/instances                       insert / list
    GET/DELETE   zones/Z/instances/N                     get / delete
    POST         zones/Z/instances/N/{stop,start,setMetadata}
    GET          zones/Z/instances/N/getGuestAttributes  ?queryPath=NAMESPACE/[KEY]
    GET          aggregated/instances                    every zone, paged
    POST/GET     {global,regions/R}/instanceTemplates    insert / list
    GET/DELETE   {global,regions/R}/instanceTemplates/T
    POST/GET     regions/R/resourcePolicies              insert / list
    GET/DELETE   regions/R/resourcePolicies/N
    POST/GET     {zones/Z,regions/R}/instanceGroupManagers            insert / list
    GET/DELETE   {zones/Z,regions/R}/instanceGroupManagers/M
    POST         .../instanceGroupManagers/M/{createInstances,deleteInstances,resize,
                                               listManagedInstances}
    POST/GET     .../instanceGroupManagers/M/resizeRequests[/RR[/cancel]]  (DELETE RR)
    GET          aggregated/instanceGroupManagers
    GET          {zones/Z,regions/R,global}/operations[/OP]         list / get
    POST         {zones/Z,regions/R,global}/operations/OP/wait      (blocks in ``_server``)

Lists take ``maxResults`` (default and most 500), ``pageToken`` and ``filter``
(``_compute_filter``). Mutations take ``requestId``: the same id answers with the operation
it made the first time. Request bodies are checked against the SDK's fields first
(``_compute_schema``).
"""

from __future__ import annotations

from typing import Any

from reconciler.emulator import _compute_errors as err
from reconciler.emulator._compute_api_groups import group_view
from reconciler.emulator._compute_records import (
    JSON,
    render_instance,
    render_policy,
    render_template,
    wall_stamp,
)
from reconciler.emulator._compute_routing import (
    NAME as _N,
)
from reconciler.emulator._compute_routing import (
    REGION as _R,
)
from reconciler.emulator._compute_routing import (
    ROOT,
    Call,
    Handler,
    aggregated,
    classify,
    dispatch,
    error_body,
    list_in,
    list_page,
    reason_for,
    waited_operation,
)
from reconciler.emulator._compute_routing import (
    ZONE as _Z,
)
from reconciler.emulator._compute_routing import (
    register as _route,
)

__all__ = [
    "ROOT",
    "classify",
    "dispatch",
    "error_body",
    "group_view",
    "instance_view",
    "policy_view",
    "reason_for",
    "waited_operation",
]


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
    return list_in(call, "compute#instanceList", "instances", instances, instance_view)


@_route("GET", "aggregated/instances", "compute.instances.aggregatedList")
def _aggregated_instances(call: Call) -> JSON:
    w = call.world
    items = (((vm.zone, vm.name), instance_view(call, vm)) for vm in w.instances.values())
    scopes = [f"zones/{z}" for z in w.zones_seen]
    return aggregated(
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


@_route("GET", f"{_Z}/instances/{_N}/getGuestAttributes", "compute.instances.getGuestAttributes")
def _guest_attributes(call: Call) -> JSON:
    w, zone, name = call.world, call.params["zone"], call.params["name"]
    return w.guest_attributes(zone, name, call.query.get("queryPath") or "")


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
        return list_in(call, "compute#instanceTemplateList", "instanceTemplates", templates, view)

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
    return list_in(call, "compute#resourcePolicyList", "resourcePolicies", policies, policy_view)


@_route("GET", f"{_R}/resourcePolicies/{_N}", "compute.resourcePolicies.get")
def _get_policy(call: Call) -> JSON:
    return policy_view(call, call.world.get_policy(call.params["region"], call.params["name"]))


@_route("DELETE", f"{_R}/resourcePolicies/{_N}", "compute.resourcePolicies.delete", None, True)
def _delete_policy(call: Call) -> JSON:
    w = call.world
    return call.op(w.delete_policy(call.params["region"], call.params["name"], call.request_id))


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
        return list_page(call, "compute#operationList", f"{scope}/operations", items)

    _route("GET", f"{where}/operations", f"{prefix}.list")(listing)
    _route("GET", f"{where}/operations/{_N}", f"{prefix}.get")(get)
    _route("POST", f"{where}/operations/{_N}/wait", f"{prefix}.wait")(get)


_operations(_Z, "compute.zoneOperations")
_operations(_R, "compute.regionOperations")
_operations("global", "compute.globalOperations")
