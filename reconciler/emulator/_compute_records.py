"""The emulated Compute Engine's records (operations, instances, resource policies, instance
templates) and their API JSON.

Values and rendering only: no clock of its own, no I/O. Field names and enum values are the
SDK's (``google.cloud.compute_v1.types``: ``Operation``, ``Instance``, ``ResourcePolicy``,
``InstanceTemplate``); the tests decode every rendering with those classes. Records keep
paths relative (``zones/Z/instances/N``); every renderer takes the project to write into
links, as the TPU side's do.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reconciler.emulator._compute_catalog import MachineType, link, region_path, stamp
from reconciler.emulator._compute_errors import OpFailure

JSON = dict[str, Any]
Stamp = Callable[[float], str]  # emulated seconds -> the RFC 3339 text the API shows
OpKey = tuple[str, str]  # (scope path "zones/Z" | "regions/R" | "global", operation name)


def fingerprint(value: Any) -> str:
    """An opaque, content-derived fingerprint (base64 of 8 hash bytes, as Google's look)."""
    digest = hashlib.sha256(json.dumps(value, sort_keys=True).encode()).digest()[:8]
    return base64.b64encode(digest).decode()


@dataclass(slots=True)
class Operation:
    scope: str  # "zones/Z", "regions/R" or "global"
    name: str
    id: str
    op_type: str  # "insert", "compute.instanceGroupManagers.createInstances", ...
    target: str  # relative path of the resource it acts on
    target_id: str | None
    created: float
    user: str
    client_id: str | None = None  # the request's requestId
    ended: float | None = None  # DONE from then on
    due_at: float | None = None  # DONE at this time by itself (a timer), unless closed before
    failure: OpFailure | None = None

    @property
    def key(self) -> OpKey:
        return (self.scope, self.name)

    def close(self, t: float, failure: OpFailure | None = None) -> None:
        if self.ended is None:
            self.ended, self.due_at = t, None
            if failure is not None:
                self.failure = failure

    def status(self, now: float) -> str:
        """PENDING at the instant it is made, RUNNING after, DONE once closed [I]."""
        if self.ended is not None:
            return "DONE"
        return "RUNNING" if now > self.created else "PENDING"


def render_op(op: Operation, project: str, now: float, when: Stamp) -> JSON:
    status = op.status(now)
    body: JSON = {
        "kind": "compute#operation",
        "id": op.id,
        "name": op.name,
        "operationType": op.op_type,
        "targetLink": link(project, op.target),
        "status": status,
        "user": op.user,
        "progress": {"PENDING": 0, "RUNNING": 50, "DONE": 100}[status],
        "insertTime": when(op.created),
        "selfLink": link(project, f"{op.scope}/operations/{op.name}"),
    }
    if op.target_id:
        body["targetId"] = op.target_id
    if op.scope.startswith("zones/"):
        body["zone"] = link(project, op.scope)
    elif op.scope.startswith("regions/"):
        body["region"] = link(project, op.scope)
    if status != "PENDING":
        body["startTime"] = when(op.created)
    if op.ended is not None:
        body["endTime"] = when(op.ended)
        if op.failure is not None:
            body.update(op.failure.render(project))
    if op.client_id:
        body["clientOperationId"] = op.client_id
    return body


@dataclass(slots=True)
class Instance:
    zone: str
    name: str
    id: str
    seq: int
    created: float
    machine: MachineType
    body: JSON  # the Instance as requested (or built from a template): echoed where it says
    model: str  # scheduling.provisioningModel: STANDARD | SPOT | FLEX_START | RESERVATION_BOUND
    action: str  # scheduling.instanceTerminationAction: STOP | DELETE
    status: str = "PROVISIONING"
    next_at: float | None = None  # when the current status's timer fires
    deadline: float | None = None  # FLEX_START: still PENDING then -> the insert fails
    max_run: float | None = None  # scheduling.maxRunDuration, seconds
    ends: float | None = None  # when the termination action applies (once RUNNING)
    labels: dict[str, str] = field(default_factory=dict)
    metadata: list[JSON] = field(default_factory=list)
    meta_fingerprint: str = ""
    #: what its guest wrote under ``instance/guest-attributes/``: (namespace, key) -> value
    guest: dict[tuple[str, str], str] = field(default_factory=dict)
    #: ``resourceStatus.upcomingMaintenance`` as a test announced it (``set_maintenance``)
    maintenance: JSON | None = None
    network_ip: str | None = None
    nat_ip: str | None = None
    holds: bool = False  # holds one unit of (zone, machine type) capacity
    pool: str | None = None  # the quota pool it is charged to: "standard" | "preemptible"
    last_start: float | None = None
    last_stop: float | None = None
    group: str | None = None  # the relative path of the MIG that manages it
    waiting_ops: list[OpKey] = field(default_factory=list)  # closed when it settles
    after_stop: str | None = None  # while STOPPING: "TERMINATED" or "DELETED"

    @property
    def path(self) -> str:
        return f"zones/{self.zone}/instances/{self.name}"

    @property
    def capacity_key(self) -> tuple[str, str]:
        return (self.zone, self.machine.name)

    @property
    def spot(self) -> bool:
        return self.model == "SPOT" or bool((self.body.get("scheduling") or {}).get("preemptible"))


def render_instance(vm: Instance, project: str, when: Stamp) -> JSON:
    request = vm.body
    zone = f"zones/{vm.zone}"
    body: JSON = {
        "kind": "compute#instance",
        "id": vm.id,
        "creationTimestamp": when(vm.created),
        "name": vm.name,
        "machineType": link(project, f"{zone}/machineTypes/{vm.machine.name}"),
        "status": vm.status,
        "zone": link(project, zone),
        "canIpForward": bool(request.get("canIpForward", False)),
        "networkInterfaces": _interfaces(vm, project),
        "disks": _disks(vm, project),
        "metadata": {"kind": "compute#metadata", "fingerprint": vm.meta_fingerprint},
        "selfLink": link(project, vm.path),
        "scheduling": scheduling_of(vm),
        "cpuPlatform": "Unknown CPU Platform",
        "labelFingerprint": fingerprint(vm.labels),
        "startRestricted": False,
        "deletionProtection": bool(request.get("deletionProtection", False)),
        "fingerprint": fingerprint([vm.id, vm.status, vm.labels, vm.meta_fingerprint]),
    }
    if vm.metadata:
        body["metadata"]["items"] = copy.deepcopy(vm.metadata)
    if vm.labels:
        body["labels"] = dict(vm.labels)
    for key in (
        "description",
        "serviceAccounts",
        "tags",
        "reservationAffinity",
        "shieldedInstanceConfig",
        "advancedMachineFeatures",
        "hostname",
    ):
        if request.get(key):
            body[key] = copy.deepcopy(request[key])
    if request.get("resourcePolicies"):
        body["resourcePolicies"] = [
            link(project, f"{region_path(vm.zone)}/resourcePolicies/{p.rsplit('/', 1)[-1]}")
            for p in request["resourcePolicies"]
        ]
    if vm.last_start is not None:
        body["lastStartTimestamp"] = when(vm.last_start)
    if vm.last_stop is not None:
        body["lastStopTimestamp"] = when(vm.last_stop)
    if vm.ends is not None:
        body["resourceStatus"] = {"scheduling": {"terminationTimestamp": when(vm.ends)}}
    if vm.maintenance:
        body.setdefault("resourceStatus", {})["upcomingMaintenance"] = copy.deepcopy(vm.maintenance)
    return body


def scheduling_of(vm: Instance) -> JSON:
    """The request's ``scheduling`` with the defaults the service fills in [I]."""
    out: JSON = copy.deepcopy(vm.body.get("scheduling") or {})
    out["provisioningModel"] = vm.model
    out.setdefault("onHostMaintenance", "TERMINATE")  # a TPU VM cannot live-migrate [3P]
    out.setdefault("automaticRestart", vm.model in ("STANDARD", "RESERVATION_BOUND"))
    out.setdefault("preemptible", False)
    if vm.model != "STANDARD" or "maxRunDuration" in out or "terminationTime" in out:
        out["instanceTerminationAction"] = vm.action
    return out


def _interfaces(vm: Instance, project: str) -> list[JSON]:
    out = []
    region = region_path(vm.zone)
    for index, nic in enumerate(vm.body.get("networkInterfaces") or [{}]):
        network = str(nic.get("network") or "global/networks/default").rsplit("/", 1)[-1]
        subnet = str(nic.get("subnetwork") or network).rsplit("/", 1)[-1]
        entry: JSON = {
            "kind": "compute#networkInterface",
            "network": link(project, f"global/networks/{network}"),
            "subnetwork": link(project, f"{region}/subnetworks/{subnet}"),
            "name": f"nic{index}",
            "stackType": nic.get("stackType") or "IPV4_ONLY",
            "fingerprint": fingerprint([vm.id, index]),
        }
        if index == 0 and vm.network_ip:
            entry["networkIP"] = vm.network_ip
        configs = []
        for config in nic.get("accessConfigs") or []:
            shown: JSON = {
                "kind": "compute#accessConfig",
                "type": config.get("type") or "ONE_TO_ONE_NAT",
                "name": config.get("name") or "External NAT",
                "networkTier": config.get("networkTier") or "PREMIUM",
            }
            nat = config.get("natIP") or (vm.nat_ip if index == 0 else None)
            if nat:
                shown["natIP"] = nat
            configs.append(shown)
        if configs:
            entry["accessConfigs"] = configs
        out.append(entry)
    return out


def _disks(vm: Instance, project: str) -> list[JSON]:
    out = []
    for index, disk in enumerate(vm.body.get("disks") or []):
        params = disk.get("initializeParams") or {}
        name = params.get("diskName") or (vm.name if index == 0 else f"{vm.name}-{index}")
        source = disk.get("source") or link(project, f"zones/{vm.zone}/disks/{name}")
        out.append(
            {
                "kind": "compute#attachedDisk",
                "type": disk.get("type") or "PERSISTENT",
                "mode": disk.get("mode") or "READ_WRITE",
                "source": source,
                "deviceName": disk.get("deviceName") or f"persistent-disk-{index}",
                "index": index,
                "boot": bool(disk.get("boot", index == 0)),
                "autoDelete": bool(disk.get("autoDelete", False)),
                "interface": disk.get("interface") or "NVME",
                "diskSizeGb": str(params.get("diskSizeGb") or disk.get("diskSizeGb") or "10"),
            }
        )
    return out


@dataclass(slots=True)
class Policy:
    """A regional ``ResourcePolicy`` (a workload policy, or any other kind, kept as sent)."""

    region: str
    name: str
    id: str
    created: float
    body: JSON
    ready_at: float  # CREATING until then, READY after

    @property
    def path(self) -> str:
        return f"regions/{self.region}/resourcePolicies/{self.name}"

    @property
    def workload(self) -> JSON | None:
        policy = self.body.get("workloadPolicy")
        return policy if isinstance(policy, dict) else None


def render_policy(p: Policy, project: str, now: float, when: Stamp) -> JSON:
    body: JSON = {
        "kind": "compute#resourcePolicy",
        "id": p.id,
        "creationTimestamp": when(p.created),
        "name": p.name,
        "region": link(project, f"regions/{p.region}"),
        "selfLink": link(project, p.path),
        "status": "READY" if now >= p.ready_at else "CREATING",
    }
    for key, value in p.body.items():
        if key not in body and key not in ("status", "resourceStatus", "kind"):
            body[key] = copy.deepcopy(value)
    return body


@dataclass(slots=True)
class Template:
    """An ``InstanceTemplate``: global (``region`` None) or regional."""

    region: str | None
    name: str
    id: str
    created: float
    body: JSON

    @property
    def path(self) -> str:
        where = "global" if self.region is None else f"regions/{self.region}"
        return f"{where}/instanceTemplates/{self.name}"

    @property
    def properties(self) -> JSON:
        props = self.body.get("properties")
        return props if isinstance(props, dict) else {}


def render_template(tpl: Template, project: str, when: Stamp) -> JSON:
    body: JSON = {
        "kind": "compute#instanceTemplate",
        "id": tpl.id,
        "creationTimestamp": when(tpl.created),
        "name": tpl.name,
        "selfLink": link(project, tpl.path),
        "properties": copy.deepcopy(tpl.properties),
    }
    if tpl.region is not None:
        body["region"] = link(project, f"regions/{tpl.region}")
    if tpl.body.get("description"):
        body["description"] = tpl.body["description"]
    return body


def wall_stamp(wall: Callable[[float], float]) -> Stamp:
    """The ``Stamp`` of a clock's emulated -> wall time mapping."""
    return lambda t: stamp(wall(t))
