"""A managed instance group and its members as the API shows them: ``InstanceGroupManager``
(with ``status``, ``currentActions``, ``appliedAcceleratorTopologies``) and ``ManagedInstance``.

Rendering only: no clock of its own, no I/O; it reads the group and its instances, changes
nothing. The SDK's field names, checked by decoding with its message classes in the tests.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable

from reconciler.emulator._compute_catalog import link
from reconciler.emulator._compute_groups import Group, Member
from reconciler.emulator._compute_records import JSON, Instance, Stamp, fingerprint

InstanceOf = Callable[[Group, Member], Instance | None]
_ACTIONS = (
    "abandoning",
    "creating",
    "creatingWithoutRetries",
    "deleting",
    "none",
    "recreating",
    "refreshing",
    "restarting",
    "resuming",
    "starting",
    "stopping",
    "suspending",
    "verifying",
)
_STATUSES = {
    "DEPROVISIONING": "deprovisioning",
    "PENDING": "pending",
    "PENDING_STOP": "pendingStop",
    "PROVISIONING": "provisioning",
    "REPAIRING": "repairing",
    "RUNNING": "running",
    "STAGING": "staging",
    "STOPPED": "stopped",
    "STOPPING": "stopping",
    "SUSPENDED": "suspended",
    "SUSPENDING": "suspending",
    "TERMINATED": "terminated",
}


def topology_state(g: Group, instance_of: InstanceOf, now: float, activate: float) -> str:
    """The ``appliedAcceleratorTopologies[0].state`` (see ``_compute_groups``)."""
    if g.failed is not None:
        return "FAILED"
    statuses = [vm.status if (vm := instance_of(g, m)) else None for m in g.members.values()]
    running = statuses.count("RUNNING")
    hosts = g.hosts or 0
    if running >= hosts and running == len(statuses) and g.running_since is not None:
        if now >= g.running_since + activate:
            return "ACTIVE"
        return "REACTIVATING" if g.was_active else "ACTIVATING"
    if any(s in ("PROVISIONING", "STAGING") for s in statuses):
        return "REACTIVATING" if g.was_active else "ACTIVATING"
    return "INCOMPLETE"


def render_group(
    g: Group, instance_of: InstanceOf, project: str, now: float, activate: float, when: Stamp
) -> JSON:
    where = "region" if g.regional else "zone"
    actions = Counter(m.action.lower() for m in g.members.values())
    statuses = Counter(
        _STATUSES.get(vm.status, "nonExistent") if (vm := instance_of(g, m)) else "nonExistent"
        for m in g.members.values()
    )
    busy = any(m.action != "NONE" for m in g.members.values()) or g.deleting is not None
    status: JSON = {
        "isStable": not busy,
        "versionTarget": {"isReached": True},
        "stateful": {"hasStatefulConfig": False, "perInstanceConfigs": {"allEffective": True}},
        "currentInstanceStatuses": {
            k: statuses.get(k, 0) for k in [*_STATUSES.values(), "nonExistent"]
        },
    }
    if g.bulk:
        waiting = any(m.action in ("CREATING", "RECREATING") for m in g.members.values())
        bulk: JSON = {"inProgress": waiting and g.failed is None}
        if g.bulk_error is not None and g.bulk_checked is not None:
            bulk["lastProgressCheck"] = {
                "error": {"errors": [dict(g.bulk_error)]},
                "timestamp": when(g.bulk_checked),
            }
        status["bulkInstanceOperation"] = bulk
    if g.topology is not None:
        applied: JSON = {
            "acceleratorTopology": g.topology,
            "state": topology_state(g, instance_of, now, activate),
        }
        if g.failed is not None and g.failed_at is not None:
            applied["stateDetails"] = {
                "error": copy.deepcopy(g.failed),
                "timestamp": when(g.failed_at),
            }
        status["appliedAcceleratorTopologies"] = [applied]
    template = link(project, g.template.path)
    body: JSON = {
        "kind": "compute#instanceGroupManager",
        "id": g.id,
        "creationTimestamp": when(g.created),
        "name": g.name,
        where: link(project, g.scope),
        "instanceTemplate": template,
        "versions": [{"instanceTemplate": template}],
        "instanceGroup": link(project, f"{g.scope}/instanceGroups/{g.name}"),
        "baseInstanceName": g.body.get("baseInstanceName") or g.name,
        "fingerprint": fingerprint([g.id, g.target_size, sorted(g.members)]),
        "currentActions": {a: actions.get(a.lower(), 0) for a in _ACTIONS},
        "status": status,
        "targetSize": g.target_size,
        "targetStoppedSize": 0,
        "targetSuspendedSize": 0,
        "listManagedInstancesResults": g.body.get("listManagedInstancesResults") or "PAGELESS",
        "instanceLifecyclePolicy": {
            "defaultActionOnFailure": "REPAIR" if g.repair else "DO_NOTHING",
            "forceUpdateOnRepair": "NO",
        },
        "targetSizePolicy": {"mode": "BULK" if g.bulk else "INDIVIDUAL"},
        "updatePolicy": copy.deepcopy(
            g.body.get("updatePolicy")
            or {
                "type": "OPPORTUNISTIC",
                "minimalAction": "REPLACE",
                "replacementMethod": "SUBSTITUTE",
            }
        ),
        "selfLink": link(project, g.path),
    }
    if g.regional:
        body["distributionPolicy"] = {
            "zones": [{"zone": link(project, f"zones/{z}")} for z in g.zones],
            "targetShape": (g.body.get("distributionPolicy") or {}).get("targetShape") or "EVEN",
        }
    if g.policy is not None:
        body["resourcePolicies"] = {"workloadPolicy": link(project, g.policy.path)}
    if g.body.get("description"):
        body["description"] = g.body["description"]
    return body


def render_member(g: Group, m: Member, vm: Instance | None, project: str) -> JSON:
    body: JSON = {
        "name": m.name,
        "currentAction": m.action,
        "version": {"instanceTemplate": link(project, g.template.path)},
    }
    if m.zone is not None:
        body["instance"] = link(project, f"zones/{m.zone}/instances/{m.name}")
    if vm is not None:
        body["id"] = vm.id
        body["instanceStatus"] = vm.status
    if m.action != "DELETING":
        body["targetStatus"] = "RUNNING"
    if m.errors:
        body["lastAttempt"] = {"errors": {"errors": copy.deepcopy(m.errors)}}
    return body
