"""The Compute Engine side's test controls: ``Emulator.compute`` in process, and the same
methods as JSON under ``/_emulator/compute/`` for another process (``EmulatorClient.compute``).

``ComputeControls`` runs each control on the settled world under the emulator's lock (the
``run`` it is given) and translates a refusal: ``LookupError`` for something that does not
exist, ``ValueError`` for the rest, as the TPU controls do. ``ROUTES`` maps each control
request onto one method; ``_control`` serves them with the TPU side's.

    GET  /_emulator/compute/state             {instances, groups, policies, templates}
    GET  /_emulator/compute/operations        every operation
    POST /_emulator/compute/members           {location, group}: listManagedInstances' items
    POST /_emulator/compute/capacity          {zone, machine_type, count}   (null: unlimited)
    POST /_emulator/compute/capacity-used     {zone, machine_type}
    POST /_emulator/compute/quotas            {family, pool, region, chips} (null: no limit)
    POST /_emulator/compute/preempt           {zone, instance}
    POST /_emulator/compute/preempt-member    {location, group, index}
    POST /_emulator/compute/grant-flex        {zone, instance}
    POST /_emulator/compute/lapse-flex        {zone, instance}
    POST /_emulator/compute/end-run           {zone, instance}
    POST /_emulator/compute/fail-bulk         {location, group, member?, code?, message?}
    POST /_emulator/compute/fail-resize-request {location, group, name, code?, message?}
    POST /_emulator/compute/operation-failures {op_type?, zone?, name?, code?, message?,
                                                http_status?, after?, count?}
    POST /_emulator/compute/operation-delay   {seconds}
    POST /_emulator/compute/instances         {zone, name, machine_type, model?, status?, ...}
    POST /_emulator/compute/guest-attributes  {zone, instance, key, value, namespace?}
    POST /_emulator/compute/maintenance       {zone, instance, maintenance}  (null: none)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from reconciler.emulator._compute_api import group_view, instance_view, policy_view
from reconciler.emulator._compute_errors import ComputeError
from reconciler.emulator._compute_group_render import render_member
from reconciler.emulator._compute_instances import FailureRule
from reconciler.emulator._compute_records import JSON, render_op, render_template, wall_stamp
from reconciler.emulator._compute_resize import ComputeWorld
from reconciler.emulator._compute_routing import Call
from reconciler.model.names import ZONE_RE

_T = TypeVar("_T")
Runner = Callable[[Callable[[ComputeWorld], Any]], Any]


def scope_of(location: str) -> str:
    """A MIG's location as its scope: a zone (``us-central1-a``) or a region."""
    return f"zones/{location}" if ZONE_RE.fullmatch(location) else f"regions/{location}"


class ComputeControls:
    """The Compute Engine controls of one emulator. ``project`` names resources in the
    views these methods return."""

    def __init__(self, run: Runner, project: str) -> None:
        self._run = run
        self.project = project

    def _do(self, action: Callable[[ComputeWorld], _T]) -> _T:
        def guarded(world: ComputeWorld) -> _T:
            try:
                return action(world)
            except ComputeError as exc:
                text = exc.message.replace("{project}", self.project)
                raise (LookupError if exc.code == 404 else ValueError)(text) from None

        result: _T = self._run(guarded)
        return result

    def _call(self, world: ComputeWorld) -> Call:
        return Call(world, {"project": self.project}, {}, None)

    # --- the world -------------------------------------------------------------------------

    def set_capacity(self, zone: str, machine_type: str, count: int | None) -> None:
        """At most ``count`` VMs of ``machine_type`` hold capacity in ``zone`` (None:
        unlimited, the default). Lowering it takes nothing away; raising it serves the
        waiters (flex-start instances, BULK groups, repairs) oldest first."""
        self._do(lambda w: w.set_capacity(zone, machine_type, count))

    def capacity_used(self, zone: str, machine_type: str) -> int:
        return int(
            self._do(
                lambda w: sum(
                    1
                    for vm in w.instances.values()
                    if vm.holds and vm.capacity_key == (zone, machine_type)
                )
            )
        )

    def set_quota(self, family: str, pool: str, region: str, chips: int | None) -> None:
        """At most ``chips`` TPU chips of ``family`` (tpu7x, v6e, v5p) in ``pool`` (standard,
        preemptible) in ``region`` (None: no limit)."""
        self._do(lambda w: w.quotas.set(family, pool, region, chips))

    def preempt(self, zone: str, instance: str) -> JSON:
        """Preempt a spot VM: returns the ``compute.instances.preempted`` operation."""
        return self._do(
            lambda w: render_op(
                w.preempt(zone, instance), self.project, w.t, wall_stamp(w.clock.wall)
            )
        )

    def preempt_member(self, location: str, group: str, index: int) -> JSON:
        """Preempt member ``index`` (0-based, in the order the members were asked for) of a
        MIG in ``location`` (a zone or a region)."""

        def act(w: ComputeWorld) -> JSON:
            g = w.get_group(scope_of(location), group)
            members = list(g.members.values())
            if not 0 <= index < len(members):
                raise LookupError(f"group {group} has {len(members)} members, no {index}")
            m = members[index]
            if m.zone is None or w.member_instance(g, m) is None:
                raise ValueError(f"member {m.name} of {group} has no instance")
            return render_op(w.preempt(m.zone, m.name), self.project, w.t, wall_stamp(w.clock.wall))

        return self._do(act)

    def grant_flex(self, zone: str, instance: str) -> None:
        self._do(lambda w: w.grant_flex(zone, instance))

    def lapse_flex(self, zone: str, instance: str) -> None:
        self._do(lambda w: w.lapse_flex(zone, instance))

    def end_run(self, zone: str, instance: str) -> None:
        self._do(lambda w: w.end_run(zone, instance))

    def fail_bulk(
        self,
        location: str,
        group: str,
        member: str | None = None,
        code: str = "INTERNAL_ERROR",
        message: str = "Internal error while creating the instance.",
    ) -> None:
        self._do(lambda w: w.fail_bulk(scope_of(location), group, member, code, message))

    def fail_resize_request(
        self,
        location: str,
        group: str,
        name: str,
        code: str = "ZONE_RESOURCE_POOL_EXHAUSTED",
        message: str = "The resize request could not be provisioned.",
    ) -> None:
        """An ACCEPTED (or CREATING) resize request goes FAILED with ``status.error``."""
        self._do(lambda w: w.fail_resize_request(scope_of(location), group, name, code, message))

    def fail_operations(self, **fields: Any) -> None:
        """Arm a ``FailureRule``: matching requests (``op_type`` "insert" by default, or
        "compute.instanceGroupManagers.insert", ...) are accepted with an operation that fails
        ``after`` seconds later with ``code`` and ``message``."""
        rule = FailureRule(**fields)
        self._do(lambda w: w.failure_rules.append(rule))

    def set_operation_delay(self, seconds: float) -> None:
        """Every operation reaches DONE ``seconds`` (emulated) later than its work."""
        if seconds < 0:
            raise ValueError("seconds must be >= 0")

        def act(w: ComputeWorld) -> None:
            w.slow_ops = float(seconds)

        self._do(act)

    def add_instance(
        self,
        zone: str,
        name: str,
        machine_type: str,
        *,
        model: str = "SPOT",
        status: str = "RUNNING",
        action: str = "DELETE",
        labels: dict[str, str] | None = None,
        external_ip: bool = False,
        metadata: dict[str, str] | None = None,
    ) -> JSON:
        """Put an instance in place without the API (e.g. one without our label)."""
        nic: JSON = {"network": "global/networks/default"}
        if external_ip:
            nic["accessConfigs"] = [{"type": "ONE_TO_ONE_NAT", "name": "External NAT"}]
        scheduling: JSON = {
            "provisioningModel": model,
            "instanceTerminationAction": action,
            "onHostMaintenance": "TERMINATE",
        }
        if model == "FLEX_START":
            scheduling["maxRunDuration"] = {"seconds": "3600"}
        body: JSON = {
            "name": name,
            "machineType": f"zones/{zone}/machineTypes/{machine_type}",
            "scheduling": scheduling,
            "labels": dict(labels or {}),
            "networkInterfaces": [nic],
            "disks": [{"boot": True, "autoDelete": True}],
            "metadata": {"items": [{"key": k, "value": v} for k, v in (metadata or {}).items()]},
        }
        return self._do(
            lambda w: instance_view(self._call(w), w.place_instance(zone, body, status))
        )

    def set_guest_attribute(
        self, zone: str, instance: str, key: str, value: str, namespace: str = "tpu-reconciler"
    ) -> None:
        """Write the instance's guest attribute ``namespace/key`` as its guest would (refused
        unless its metadata enables guest attributes)."""
        self._do(lambda w: w.set_guest_attribute(zone, instance, namespace, key, value))

    def set_maintenance(self, zone: str, instance: str, maintenance: JSON | None) -> None:
        """Announce the instance's ``resourceStatus.upcomingMaintenance`` (the API's
        ``UpcomingMaintenance`` JSON, as given; None or empty: none)."""

        def act(w: ComputeWorld) -> None:
            w.get_instance(zone, instance).maintenance = dict(maintenance or {}) or None

        self._do(act)

    # --- views (the API JSON, rendered with ``project``) -------------------------------------

    def instance(self, zone: str, name: str) -> JSON | None:
        def view(w: ComputeWorld) -> JSON | None:
            vm = w.instances.get((zone, name))
            return None if vm is None else instance_view(self._call(w), vm)

        return self._do(view)

    def instances(self) -> list[JSON]:
        return self._do(
            lambda w: [instance_view(self._call(w), vm) for _, vm in sorted(w.instances.items())]
        )

    def group(self, location: str, name: str) -> JSON | None:
        def view(w: ComputeWorld) -> JSON | None:
            g = w.groups.get(f"{scope_of(location)}/instanceGroupManagers/{name}")
            return None if g is None else group_view(self._call(w), g)

        return self._do(view)

    def groups(self) -> list[JSON]:
        return self._do(
            lambda w: [group_view(self._call(w), g) for _, g in sorted(w.groups.items())]
        )

    def members(self, location: str, name: str) -> list[JSON]:
        def view(w: ComputeWorld) -> list[JSON]:
            g = w.get_group(scope_of(location), name)
            return [
                render_member(g, m, w.member_instance(g, m), self.project)
                for m in g.members.values()
            ]

        return self._do(view)

    def policies(self) -> list[JSON]:
        return self._do(
            lambda w: [policy_view(self._call(w), p) for _, p in sorted(w.policies.items())]
        )

    def templates(self) -> list[JSON]:
        return self._do(
            lambda w: [
                render_template(t, self.project, wall_stamp(w.clock.wall))
                for _, t in sorted(w.templates.items())
            ]
        )

    def operations(self) -> list[JSON]:
        return self._do(
            lambda w: [
                render_op(op, self.project, w.t, wall_stamp(w.clock.wall)) for op in w.ops.values()
            ]
        )

    def state(self) -> JSON:
        return {
            "instances": self.instances(),
            "groups": self.groups(),
            "policies": self.policies(),
            "templates": self.templates(),
        }


_Action = Callable[[ComputeControls, dict[str, Any]], Any]

#: (method, path under ``/_emulator/compute/``) -> the control it runs.
ROUTES: dict[tuple[str, str], _Action] = {
    ("GET", "state"): lambda c, a: c.state(),
    ("POST", "capacity"): lambda c, a: c.set_capacity(a["zone"], a["machine_type"], a.get("count")),
    ("POST", "capacity-used"): lambda c, a: c.capacity_used(a["zone"], a["machine_type"]),
    ("POST", "members"): lambda c, a: c.members(a["location"], a["group"]),
    ("GET", "operations"): lambda c, a: c.operations(),
    ("POST", "quotas"): lambda c, a: c.set_quota(
        a["family"], a["pool"], a["region"], a.get("chips")
    ),
    ("POST", "preempt"): lambda c, a: c.preempt(a["zone"], a["instance"]),
    ("POST", "preempt-member"): lambda c, a: c.preempt_member(
        a["location"], a["group"], int(a["index"])
    ),
    ("POST", "grant-flex"): lambda c, a: c.grant_flex(a["zone"], a["instance"]),
    ("POST", "lapse-flex"): lambda c, a: c.lapse_flex(a["zone"], a["instance"]),
    ("POST", "end-run"): lambda c, a: c.end_run(a["zone"], a["instance"]),
    ("POST", "fail-bulk"): lambda c, a: c.fail_bulk(a.pop("location"), a.pop("group"), **a),
    ("POST", "fail-resize-request"): lambda c, a: c.fail_resize_request(
        a.pop("location"), a.pop("group"), a.pop("name"), **a
    ),
    ("POST", "operation-failures"): lambda c, a: c.fail_operations(**a),
    ("POST", "operation-delay"): lambda c, a: c.set_operation_delay(float(a["seconds"])),
    ("POST", "guest-attributes"): lambda c, a: c.set_guest_attribute(
        a.pop("zone"), a.pop("instance"), a.pop("key"), a.pop("value"), **a
    ),
    ("POST", "maintenance"): lambda c, a: c.set_maintenance(
        a["zone"], a["instance"], a.get("maintenance")
    ),
    ("POST", "instances"): lambda c, a: c.add_instance(
        a.pop("zone"), a.pop("name"), a.pop("machine_type"), **a
    ),
}
