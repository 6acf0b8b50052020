"""The emulated Compute Engine's managed instance groups (MIGs), on top of its instances,
resource policies and instance templates.

Pure: no I/O, no threads, no wall clock (``World.settle`` drives it like the instances).

A MIG's members are names, created from its template as instances of the same name. With
``targetSizePolicy.mode: BULK`` the members waiting to be created are created together, in one
zone, only when that zone has capacity (and the project quota) for all of them; until then the
group waits (``currentActions.creating``, ``isStable: false``, the reason in
``status.bulkInstanceOperation.lastProgressCheck.error``) [V: BULK's meaning; I: the rest].
With a workload policy naming an ``acceleratorTopology`` the group reports
``status.appliedAcceleratorTopologies[0].state``::

    INCOMPLETE   fewer hosts running than the topology needs, nothing under way
    ACTIVATING   hosts being created, or all running for less than ``activate``
    ACTIVE       every host (chips in the topology / chips per VM) RUNNING for ``activate``
    REACTIVATING as ACTIVATING, after the topology was ACTIVE once (a repair)
    FAILED       a bulk creation failed (``fail_bulk``): ``stateDetails.error``

A member whose instance is preempted or ends its run: with ``instanceLifecyclePolicy.
defaultActionOnFailure: DO_NOTHING`` it stays TERMINATED or missing; with ``REPAIR`` (the
default) the group recreates it when capacity allows [I].
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field
from typing import Any

from reconciler.emulator import _compute_errors as err
from reconciler.emulator._addresses import AddressPool
from reconciler.emulator._compute_catalog import (
    MachineType,
    hosts_per_slice,
    relative,
    resource_id,
    valid_name,
)
from reconciler.emulator._compute_errors import OpFailure
from reconciler.emulator._compute_instances import UP
from reconciler.emulator._compute_intake import machine_type, scheduling
from reconciler.emulator._compute_records import (
    JSON,
    Instance,
    Operation,
    OpKey,
    Policy,
    Template,
    fingerprint,
)
from reconciler.emulator._compute_templates import TemplateWorld, resource_name
from reconciler.emulator._records import Clock
from reconciler.emulator._scenario import ComputeTimings
from reconciler.model.quotas import region_of


@dataclass(slots=True)
class Member:
    name: str
    seq: int
    zone: str | None  # where its instance is (or will be); None until a regional group picks
    action: str = "CREATING"  # currentAction: CREATING | NONE | DELETING | RECREATING
    errors: list[JSON] = field(default_factory=list)  # lastAttempt.errors.errors
    run: float | None = None  # made by a resize request: deleted this long after it runs
    #: its ``preservedState.metadata`` (createInstances): set on its instance over the
    #: template's items [V: per-instance configs carry metadata; I: how they merge]
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Group:
    scope: str  # "zones/Z" | "regions/R"
    name: str
    id: str
    seq: int
    created: float
    body: JSON
    template: Template
    machine: MachineType
    target_size: int = 0
    bulk: bool = False
    repair: bool = True
    policy: Policy | None = None
    hosts: int | None = None  # hosts per slice of the workload policy's topology
    zones: list[str] = field(default_factory=list)
    members: dict[str, Member] = field(default_factory=dict)
    bulk_error: JSON | None = None  # why a BULK creation waits
    bulk_checked: float | None = None
    failed: JSON | None = None  # the bulk failure that made the topology FAILED
    failed_at: float | None = None
    running_since: float | None = None  # every host RUNNING since then
    was_active: bool = False
    deleting: list[OpKey] | None = None  # the deletes waiting for the group to be gone

    @property
    def path(self) -> str:
        return f"{self.scope}/instanceGroupManagers/{self.name}"

    @property
    def regional(self) -> bool:
        return self.scope.startswith("regions/")

    @property
    def topology(self) -> str | None:
        workload = self.policy.workload if self.policy is not None else None
        topology = (workload or {}).get("acceleratorTopology")
        return str(topology) if topology else None


class GroupWorld(TemplateWorld):
    def __init__(
        self, clock: Clock, timings: ComputeTimings, addresses: AddressPool, user: str
    ) -> None:
        super().__init__(clock, timings, addresses, user)
        self.groups: dict[str, Group] = {}  # by relative path

    # --- the clock ---------------------------------------------------------------------------

    def next_time(self) -> float | None:
        times = [super().next_time()]
        for g in self.groups.values():
            if g.running_since is not None and not g.was_active:
                times.append(g.running_since + self.timings.activate)
        return min((t for t in times if t is not None), default=None)

    def fire(self, t: float) -> None:
        super().fire(t)
        self.tend()

    def tend(self) -> None:
        """Bring every group up to date with its instances, then create what can be."""
        for g in sorted(self.groups.values(), key=lambda g: g.seq):
            self._tend(g)
        self.grant()

    def users_of(self, resource: object) -> list[str]:
        return [g.path for g in self.groups.values() if resource in (g.policy, g.template)]

    def grant(self) -> None:
        super().grant()
        for g in sorted(self.groups.values(), key=lambda g: g.seq):
            self._create_members(g)

    # --- managed instance groups -------------------------------------------------------------

    def insert_group(self, scope: str, body: JSON, request_id: str | None) -> Operation:
        name = resource_name(body)
        path = f"{scope}/instanceGroupManagers/{name}"
        if path in self.groups:
            raise err.already_exists(path)
        region = scope.split("/", 1)[1] if scope.startswith("regions/") else None
        zone = None if region is not None else scope.split("/", 1)[1]
        region = region or region_of(str(zone))
        template = self._template_of(body)
        props = template.properties
        machine = machine_type(
            zone, str(props.get("machineType")), field="resource.instanceTemplate"
        )
        seq = self.next_seq()
        g = Group(
            scope, name, resource_id(seq, 2), seq, self.t, copy.deepcopy(body), template, machine
        )
        g.bulk = (body.get("targetSizePolicy") or {}).get("mode") == "BULK"
        policy = (body.get("instanceLifecyclePolicy") or {}).get("defaultActionOnFailure")
        g.repair = policy != "DO_NOTHING"
        g.zones = self._zones_of(body, zone, region)
        g.policy = self._workload_policy(body, region)
        self._check_tpu7x(g, props)
        target = _size(body.get("targetSize") or 0, "resource.targetSize")
        self.check_size(g, target)
        op_type = "compute.instanceGroupManagers.insert"
        rule = self.take_failure(op_type, zone or region, name)
        if rule is not None:
            return self.failing_op(scope, op_type, path, rule, request_id)
        self.groups[path] = g
        self._grow(g, target)
        op = self.new_op(scope, "compute.instanceGroupManagers.insert", path, g.id, request_id)
        self.finish(op, after=self.timings.operation)
        return op

    def get_group(self, scope: str, name: str) -> Group:
        g = self.groups.get(f"{scope}/instanceGroupManagers/{name}")
        if g is None:
            raise err.not_found(f"{scope}/instanceGroupManagers/{name}")
        return g

    def delete_group(self, scope: str, name: str, request_id: str | None) -> Operation:
        g = self.get_group(scope, name)
        op = self.new_op(scope, "compute.instanceGroupManagers.delete", g.path, g.id, request_id)
        g.deleting = (g.deleting or []) + [op.key]
        for m in list(g.members.values()):
            self._drop(g, m)
        self._tend(g)
        return op

    def create_instances(
        self, scope: str, name: str, body: JSON, request_id: str | None
    ) -> Operation:
        g = self.live_group(scope, name)
        configs = [i for i in body.get("instances") or [] if isinstance(i, dict)]
        names = [i.get("name") for i in configs]
        if not names:
            raise err.bad_field("resource.instances", "[]", "At least one instance is required.")
        for n in names:
            if not valid_name(n):
                raise err.bad_field("resource.instances.name", n)
            if n in g.members or names.count(n) > 1:
                raise err.invalid(
                    f"Instance name '{n}' is already used in the group '{err.named(g.path)}'."
                )
            if not g.regional and (g.zones[0], n) in self.instances:
                raise err.already_exists(f"zones/{g.zones[0]}/instances/{n}")
        self.check_size(g, g.target_size + len(names))
        op_type = "compute.instanceGroupManagers.createInstances"
        rule = self.take_failure(op_type, g.scope.split("/", 1)[1], name)
        if rule is not None:
            return self.failing_op(scope, op_type, g.path, rule, request_id)
        for config in configs:
            member = self.add_member(g, str(config.get("name")))
            meta = (config.get("preservedState") or {}).get("metadata") or {}
            member.metadata = {str(k): str(v) for k, v in meta.items()}
        g.target_size += len(names)
        op = self.new_op(scope, op_type, g.path, g.id, request_id)
        self.finish(op, after=self.timings.operation)
        self.grant()
        return op

    def delete_instances(
        self, scope: str, name: str, body: JSON, request_id: str | None
    ) -> Operation:
        g = self.live_group(scope, name)
        wanted = [relative(str(u)).rsplit("/", 1)[-1] for u in body.get("instances") or []]
        unknown = [n for n in wanted if n not in g.members]
        if unknown and not body.get("skipInstancesOnValidationError"):
            raise err.invalid(
                f"The instance '{unknown[0]}' is not a member of the group '{err.named(g.path)}'."
            )
        for n in wanted:
            if n in g.members and g.members[n].action != "DELETING":
                self._drop(g, g.members[n])
                g.target_size -= 1
        op_type = "compute.instanceGroupManagers.deleteInstances"
        op = self.new_op(scope, op_type, g.path, g.id, request_id)
        self.finish(op, after=self.timings.operation)
        return op

    def resize(self, scope: str, name: str, size: int, request_id: str | None) -> Operation:
        g = self.live_group(scope, name)
        self.check_size(g, size)
        if size > g.target_size:
            self._grow(g, size)
        else:
            live = [m for m in g.members.values() if m.action != "DELETING"]
            live.sort(key=lambda m: (self.member_instance(g, m) is not None, -m.seq))
            for m in live[: g.target_size - size]:  # not yet created first, then the newest
                self._drop(g, m)
            g.target_size = size
        op = self.new_op(scope, "compute.instanceGroupManagers.resize", g.path, g.id, request_id)
        self.finish(op, after=self.timings.operation)
        self.grant()
        return op

    def fail_bulk(self, scope: str, name: str, member: str | None, code: str, message: str) -> None:
        """A bulk creation fails: the created hosts are rolled back, the failing member (the
        first when none is named) carries the error in ``lastAttempt``, the topology is
        FAILED, and the group does not retry [I]."""
        g = self.live_group(scope, name)
        names = list(g.members)
        culprit = member or (names[0] if names else None)
        if culprit not in g.members:
            raise err.not_found(f"{g.path}/instances/{culprit}")
        error = {"code": code, "message": message}
        for m in g.members.values():
            vm = self.member_instance(g, m)
            if vm is not None:
                vm.group = None
                self.delete_instance(vm.zone, vm.name, None)
            m.action, m.errors = "NONE", ([dict(error)] if m.name == culprit else [])
        g.failed, g.failed_at = {"errors": [dict(error)]}, self.t
        g.running_since = None

    # --- the group's life --------------------------------------------------------------------

    def _grow(self, g: Group, size: int) -> None:
        base = g.body.get("baseInstanceName") or g.name
        while len([m for m in g.members.values() if m.action != "DELETING"]) < size:
            self.add_member(g, generated_name(base, g.seq, self.next_seq()))
        g.target_size = size

    def add_member(self, g: Group, name: str, zone: str | None = None) -> Member:
        zone = zone or (None if g.regional else g.zones[0])
        member = g.members[name] = Member(name, self.next_seq(), zone)
        g.failed = None  # asking for hosts again starts a new attempt
        return member

    def member_instance(self, g: Group, m: Member) -> Instance | None:
        vm = self.instances.get((m.zone or "", m.name))
        return vm if vm is not None and vm.group == g.path else None

    def _drop(self, g: Group, m: Member) -> None:
        vm = self.member_instance(g, m)
        m.action = "DELETING"
        if vm is None:
            del g.members[m.name]
        elif not (vm.status == "STOPPING" and vm.after_stop == "DELETED"):
            self.delete_instance(vm.zone, vm.name, None)

    def _tend(self, g: Group) -> None:
        """Bring a group up to date after its instances moved: forget deleted members, mark
        failed ones for repair, follow the topology, finish a delete."""
        for m in list(g.members.values()):
            vm = self.member_instance(g, m)
            if m.action == "DELETING" and vm is None:
                del g.members[m.name]
            elif (
                m.action in ("CREATING", "RECREATING") and vm is not None and vm.status == "RUNNING"
            ):
                m.action, m.errors = "NONE", []
            elif (
                g.repair
                and m.action == "NONE"
                and (vm is None or vm.status == "TERMINATED")
                and g.failed is None
            ):  # REPAIR: a failed (preempted, ended) member is made again
                if vm is not None:
                    vm.group = None
                    self._remove(vm, err.failure("RESOURCE_NOT_FOUND", "recreated", 404))
                m.action = "RECREATING"
        if g.deleting is not None and not g.members:
            del self.groups[g.path]
            for key in g.deleting:
                if key in self.ops:
                    self.finish(self.ops[key])
            return
        running = [
            m
            for m in g.members.values()
            if (vm := self.member_instance(g, m)) and vm.status == "RUNNING"
        ]
        full = g.hosts is not None and len(running) >= g.hosts and len(running) == len(g.members)
        if not full:
            g.running_since = None
        elif g.running_since is None:
            g.running_since = self.t
        if (
            full
            and g.running_since is not None
            and self.t >= g.running_since + self.timings.activate
        ):
            g.was_active = True

    def _create_members(self, g: Group) -> None:
        if g.deleting is not None or g.failed is not None:
            return
        waiting = [
            m
            for m in g.members.values()
            if m.action in ("CREATING", "RECREATING") and self.member_instance(g, m) is None
        ]
        if not waiting:
            g.bulk_error = None
            return
        batches = (
            [waiting]
            if g.bulk and any(m.action == "CREATING" for m in waiting)
            else [[m] for m in waiting]
        )  # a BULK group creates its hosts together; a repair is one host
        for batch in batches:
            zone, refusal = self.place(g, len(batch))
            if zone is None:
                error = (refusal or err.stockout(g.zones[0])).errors[0]
                for m in batch:
                    m.errors = [dict(error)]
                g.bulk_error, g.bulk_checked = dict(error), self.t
                continue
            g.bulk_error = None
            for m in batch:
                m.zone = zone
                self.create_member(g, m)

    def place(self, g: Group, count: int) -> tuple[str | None, OpFailure | None]:
        """The first of the group's zones with capacity and quota for ``count`` hosts."""
        model, _ = scheduling(g.template.properties, "properties.scheduling")
        refusal: OpFailure | None = None
        for zone in g.zones:
            if model != "RESERVATION_BOUND" and self.free(zone, g.machine.name) < count:
                refusal = refusal or err.stockout(zone)
                continue
            _, quota = self.quotas.admit(self.instances.values(), g.machine, zone, model, count)
            if quota is not None:
                refusal = quota
                continue
            return zone, None
        return None, refusal

    def create_member(self, g: Group, m: Member) -> None:
        assert m.zone is not None
        props = copy.deepcopy(g.template.properties)
        props["name"] = m.name
        props["machineType"] = f"zones/{m.zone}/machineTypes/{g.machine.name}"
        if m.metadata:
            items = [
                i
                for i in (props.get("metadata") or {}).get("items") or []
                if i.get("key") not in m.metadata
            ]
            items += [{"key": k, "value": v} for k, v in m.metadata.items()]
            props["metadata"] = {**(props.get("metadata") or {}), "items": items}
        model, action = scheduling(props, "properties.scheduling")
        stale = self.instances.get((m.zone, m.name))
        if stale is not None:  # a leftover of the same name blocks the member
            m.errors = [
                {
                    "code": "RESOURCE_ALREADY_EXISTS",
                    "message": f"The resource '{err.named(stale.path)}' already exists",
                }
            ]
            return
        vm = self.make_instance(m.zone, m.name, g.machine, props, model, action)
        if m.run is not None:
            vm.max_run, vm.action = m.run, "DELETE"
        vm.group = g.path
        self.admit(vm)
        self.instances[(m.zone, m.name)] = vm
        self._provision(vm)
        m.errors = []

    # --- checks ------------------------------------------------------------------------------

    def live_group(self, scope: str, name: str) -> Group:
        g = self.get_group(scope, name)
        if g.deleting is not None:
            raise err.invalid(f"The instance group manager '{err.named(g.path)}' is being deleted.")
        return g

    def _template_of(self, body: JSON) -> Template:
        versions = body.get("versions") or []
        link = body.get("instanceTemplate") or (
            versions[0].get("instanceTemplate") if versions else None
        )
        if not link:
            raise err.bad_field(
                "resource.instanceTemplate", "", "An instance template is required."
            )
        path = relative(str(link))
        tpl = self.templates.get(path)
        if tpl is None:
            raise err.not_found(path)
        return tpl

    def _zones_of(self, body: JSON, zone: str | None, region: str) -> list[str]:
        if zone is not None:
            return [zone]
        given = [
            relative(str(z.get("zone", ""))).rsplit("/", 1)[-1]
            for z in (body.get("distributionPolicy") or {}).get("zones") or []
        ]
        for z in given:
            if region_of(z) != region:
                raise err.bad_field("resource.distributionPolicy.zones", z, f"Not in {region}.")
        return given or [f"{region}-{c}" for c in "abc"]  # Google's default: three zones [I]

    def _workload_policy(self, body: JSON, region: str) -> Policy | None:
        link = (body.get("resourcePolicies") or {}).get("workloadPolicy")
        if not link:
            return None
        path = relative(str(link))
        parts = path.split("/")
        if len(parts) != 4 or parts[0] != "regions" or parts[2] != "resourcePolicies":
            raise err.bad_field("resource.resourcePolicies.workloadPolicy", link)
        if parts[1] != region:
            raise err.bad_field(
                "resource.resourcePolicies.workloadPolicy",
                link,
                f"The policy must be in region {region}.",
            )
        policy = self.get_policy(parts[1], parts[3])
        if policy.workload is None:
            raise err.bad_field(
                "resource.resourcePolicies.workloadPolicy", link, "It is not a workload policy."
            )
        return policy

    def _check_tpu7x(self, g: Group, props: JSON) -> None:
        machine = g.machine
        placements = [
            relative(str(p)).rsplit("/", 1)[-1] for p in props.get("resourcePolicies") or []
        ]
        region = g.scope.split("/", 1)[1] if g.regional else region_of(g.zones[0])
        placed = any(
            "groupPlacementPolicy" in self.policies[(region, p)].body
            for p in placements
            if (region, p) in self.policies
        )
        if machine.family == "tpu7x" and placed:
            raise err.placement_policy_refused(machine.name)
        topology = g.topology
        if g.policy is not None and topology is None and machine.family == "tpu7x":
            raise err.topology_required(machine.name)
        if topology is not None:
            g.hosts = hosts_per_slice(topology, machine)
            if g.hosts is None:
                raise err.bad_field(
                    "resource.resourcePolicies.workloadPolicy",
                    topology,
                    f"The topology does not divide into {machine.name} VMs of "
                    f"{machine.chips} chips.",
                )

    def check_size(self, g: Group, size: int) -> None:
        if size < 0:
            raise err.bad_field("size", size, "It must not be negative.")
        if g.hosts is not None and size > g.hosts:
            raise err.invalid(
                f"The target size {size} is larger than the {g.hosts} hosts of "
                f"accelerator topology {g.topology}."
            )
        if g.policy is None and g.machine.name == "tpu7x-standard-4t" and size > 1:
            raise err.placement_policy_refused(g.machine.name)


def _size(value: Any, field: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise err.bad_field(field, value) from None


def generated_name(base: str, group_seq: int, seq: int) -> str:
    """``base-xxxx``: a random-looking 4-character suffix, deterministic per emulator [V]."""
    digest = hashlib.sha256(f"{group_seq}/{seq}".encode()).hexdigest()
    alphabet = "bcdfghjklmnpqrstvwxz0123456789"
    suffix = "".join(alphabet[int(digest[i : i + 2], 16) % len(alphabet)] for i in range(0, 8, 2))
    return f"{base[:58]}-{suffix}"


__all__ = ["UP", "Group", "GroupWorld", "Member", "fingerprint"]
