"""The emulated Compute Engine's instances and operations, on the TPU world's clock.

Pure: no I/O, no threads, no wall clock. ``World.settle`` drives it: ``next_time`` says when
the next timer is due, ``fire(t)`` runs what is due at ``t`` (instances oldest first), and
``grant`` hands free capacity to waiters, oldest first.

Instance lifecycle (timings from ``ComputeTimings``)::

    insert --> PROVISIONING --provision--> STAGING --stage--> RUNNING   (insert op DONE)
    FLEX_START, no capacity --> PENDING --capacity--> PROVISIONING ...
               still PENDING after params.requestValidForDuration --> gone, insert op failed
    stop / STOP action --> STOPPING --stop--> TERMINATED              (capacity, natIP freed)
    delete / DELETE action --> STOPPING --delete--> gone
    start --> PROVISIONING --> STAGING --> RUNNING
    RUNNING for scheduling.maxRunDuration (or at terminationTime) --> the termination action
    spot preemption --> a compute.instances.preempted operation, then the termination action

An instance holds one unit of (zone, machine type) capacity from PROVISIONING until it is
TERMINATED or gone; a RESERVATION_BOUND one draws on its reservation instead. Without
capacity, an insert's or a start's operation fails with ZONE_RESOURCE_POOL_EXHAUSTED and
nothing is created; past a quota limit, with QUOTA_EXCEEDED.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import uuid
from dataclasses import dataclass
from typing import Any

from reconciler.emulator import _compute_errors as err
from reconciler.emulator._addresses import AddressPool
from reconciler.emulator._compute_catalog import (
    MachineType,
    resource_id,
    valid_name,
)
from reconciler.emulator._compute_errors import ComputeError, OpFailure
from reconciler.emulator._compute_intake import duration, machine_type, scheduling
from reconciler.emulator._compute_quota import ComputeQuotaBook
from reconciler.emulator._compute_records import Instance, Operation, OpKey, fingerprint
from reconciler.emulator._records import Clock
from reconciler.emulator._scenario import ComputeTimings

#: Statuses in which an instance is (being) started and holds capacity.
UP = frozenset({"PROVISIONING", "STAGING", "RUNNING"})


@dataclass(frozen=True, slots=True)
class FailureRule:
    """Requests of ``op_type`` matching ``zone`` and ``name`` (a full-match regular
    expression) are accepted with an operation that fails ``after`` seconds later with
    ``code`` and ``message``; nothing is made. ``count`` None: every match."""

    op_type: str = "insert"
    zone: str | None = None
    name: str | None = None
    code: str = "RESOURCE_OPERATION_RATE_EXCEEDED"
    message: str = "the request was refused after it was accepted"
    http_status: int = 400
    after: float = 1.0
    count: int | None = None


class InstanceWorld:
    def __init__(
        self, clock: Clock, timings: ComputeTimings, addresses: AddressPool, user: str
    ) -> None:
        self.clock = clock
        self.timings = timings
        self.addresses = addresses
        self.user = user
        self.t = 0.0
        self.ops: dict[OpKey, Operation] = {}
        self.instances: dict[tuple[str, str], Instance] = {}
        self.capacity: dict[tuple[str, str], int | None] = {}
        self.quotas = ComputeQuotaBook()
        self.zones_seen: set[str] = set()
        self.request_ids: dict[str, OpKey] = {}
        self.failure_rules: list[FailureRule] = []
        self.slow_ops = 0.0  # extra emulated seconds before any operation is DONE
        self._seq = 0

    # --- the clock ---------------------------------------------------------------------------

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def next_time(self) -> float | None:
        times: list[float] = []
        for vm in self.instances.values():
            if vm.next_at is not None:
                times.append(vm.next_at)
            if vm.deadline is not None and vm.status == "PENDING":
                times.append(vm.deadline)
            if vm.ends is not None and vm.status == "RUNNING":
                times.append(vm.ends)
        times.extend(op.due_at for op in self.ops.values() if op.due_at is not None)
        return min(times, default=None)

    def fire(self, t: float) -> None:
        for vm in sorted(self.instances.values(), key=lambda v: v.seq):
            if vm.deadline is not None and vm.deadline <= t and vm.status == "PENDING":
                self._remove(vm, err.stockout(vm.zone))
            elif vm.ends is not None and vm.ends <= t and vm.status == "RUNNING":
                self.terminate(vm)
            elif vm.next_at is not None and vm.next_at <= t:
                vm.next_at = None
                self._advance(vm)
        for op in self.ops.values():
            if op.due_at is not None and op.due_at <= t:
                op.close(op.due_at)
        self.grant()

    # --- operations --------------------------------------------------------------------------

    def new_op(
        self,
        scope: str,
        op_type: str,
        target: str,
        target_id: str | None = None,
        request_id: str | None = None,
        user: str | None = None,
    ) -> Operation:
        seq = self.next_seq()
        millis = int(self.clock.wall(self.t) * 1000)
        tail = hashlib.sha256(f"{millis}/{seq}".encode()).hexdigest()
        name = f"operation-{millis}-{tail[:13]}-{tail[13:21]}-{tail[21:29]}"  # Google's shape
        op = Operation(
            scope,
            name,
            resource_id(seq, 6),
            op_type,
            target,
            target_id,
            self.t,
            user or self.user,
            request_id,
        )
        self.ops[op.key] = op
        if request_id:
            self.request_ids[request_id] = op.key
        return op

    def finish(
        self, op: Operation, failure: OpFailure | None = None, *, after: float = 0.0
    ) -> None:
        """The work behind ``op`` is over (``after`` seconds from now): DONE then, or later
        when operations are slowed."""
        if op.ended is not None:
            return
        if failure is not None:
            op.failure = failure
        delay = after + self.slow_ops
        if delay > 0:
            op.due_at = self.t + delay
        else:
            op.close(self.t, failure)

    def replay(self, request_id: str | None) -> Operation | None:
        """The operation an earlier request with this ``requestId`` made, if any [V: the
        request id dedupes]; a malformed id is refused [V: it must be a non-zero UUID]."""
        if request_id is None:
            return None
        try:
            parsed = uuid.UUID(request_id)
        except ValueError:
            parsed = None
        if parsed is None or parsed.int == 0:
            raise err.bad_field("requestId", request_id, "The request id must be a UUID.")
        key = self.request_ids.get(request_id)
        return self.ops.get(key) if key else None

    def get_op(self, scope: str, name: str) -> Operation:
        op = self.ops.get((scope, name))
        if op is None:
            raise err.not_found(f"{scope}/operations/{name}")
        return op

    def take_failure(self, op_type: str, zone: str | None, name: str) -> FailureRule | None:
        for index, rule in enumerate(self.failure_rules):
            if rule.op_type != op_type or (rule.zone is not None and rule.zone != zone):
                continue
            if rule.name is not None and not re.fullmatch(rule.name, name):
                continue
            if rule.count is not None:
                if rule.count <= 1:
                    del self.failure_rules[index]
                else:
                    self.failure_rules[index] = dataclasses.replace(rule, count=rule.count - 1)
            return rule
        return None

    def failing_op(
        self, scope: str, op_type: str, target: str, rule: FailureRule, request_id: str | None
    ) -> Operation:
        op = self.new_op(scope, op_type, target, request_id=request_id)
        self.finish(op, err.failure(rule.code, rule.message, rule.http_status), after=rule.after)
        return op

    # --- capacity ----------------------------------------------------------------------------

    def free(self, zone: str, machine: str) -> float:
        limit = self.capacity.get((zone, machine))
        if limit is None:
            return float("inf")
        held = sum(
            1 for vm in self.instances.values() if vm.holds and vm.capacity_key == (zone, machine)
        )
        return limit - held

    def set_capacity(self, zone: str, machine: str, count: int | None) -> None:
        machine_type(zone, machine)  # refuses an unknown or refused machine type
        if count is not None and count < 0:
            raise ValueError("count must be >= 0")
        self.capacity[(zone, machine)] = count
        self.zones_seen.add(zone)
        self.grant()

    def grant(self) -> None:
        """Free capacity goes to the oldest waiting flex-start instance that fits."""
        for vm in sorted(self.instances.values(), key=lambda v: v.seq):
            if vm.status == "PENDING" and self.free(*vm.capacity_key) >= 1:
                self._provision(vm)

    # --- instances ---------------------------------------------------------------------------

    def get_instance(self, zone: str, name: str) -> Instance:
        vm = self.instances.get((zone, name))
        if vm is None:
            raise err.not_found(f"zones/{zone}/instances/{name}")
        return vm

    def insert_instance(self, zone: str, body: dict[str, Any], request_id: str | None) -> Operation:
        name = body.get("name")
        if not valid_name(name):
            raise err.bad_field(
                "resource.name",
                name,
                "Must be a match of regex '[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?'",
            )
        assert isinstance(name, str)
        path = f"zones/{zone}/instances/{name}"
        if (zone, name) in self.instances:
            raise err.already_exists(path)
        machine = machine_type(
            zone, str(body.get("machineType") or ""), field="resource.machineType"
        )
        model, action = scheduling(body)
        if not any(isinstance(d, dict) and d.get("boot", True) for d in body.get("disks") or []):
            raise err.bad_field("resource.disks", "", "Boot disk must be specified.")
        rule = self.take_failure("insert", zone, name)
        if rule is not None:
            return self.failing_op(f"zones/{zone}", "insert", path, rule, request_id)
        vm = self.make_instance(zone, name, machine, body, model, action)
        op = self.new_op(f"zones/{zone}", "insert", path, vm.id, request_id)
        refusal = self.admit(vm, op)
        if refusal is not None:
            self.finish(op, refusal, after=self.timings.operation)
            return op
        self.instances[(zone, name)] = vm
        vm.waiting_ops.append(op.key)
        if model == "FLEX_START" and self.free(zone, machine.name) < 1:
            vm.status = "PENDING"
            valid = (body.get("params") or {}).get("requestValidForDuration")
            if valid is not None:
                vm.deadline = self.t + duration(valid, "resource.params.requestValidForDuration")
        else:
            self._provision(vm)
        return op

    def make_instance(
        self,
        zone: str,
        name: str,
        machine: MachineType,
        body: dict[str, Any],
        model: str,
        action: str,
    ) -> Instance:
        seq = self.next_seq()
        vm = Instance(zone, name, resource_id(seq, 5), seq, self.t, machine, body, model, action)
        sched = body.get("scheduling") or {}
        if sched.get("maxRunDuration") is not None:
            vm.max_run = duration(sched["maxRunDuration"], "resource.scheduling.maxRunDuration")
        vm.labels = dict(body.get("labels") or {})
        vm.metadata = [dict(i) for i in (body.get("metadata") or {}).get("items") or []]
        vm.meta_fingerprint = fingerprint([vm.id, vm.metadata])
        self.zones_seen.add(zone)
        return vm

    def admit(self, vm: Instance, op: Operation | None = None) -> OpFailure | None:
        """Charge ``vm`` to its quota pool and check there is capacity for it (a FLEX_START
        one may wait for capacity instead): the refusal, or None."""
        pool, refusal = self.quotas.admit(self.instances.values(), vm.machine, vm.zone, vm.model, 1)
        if refusal is not None:
            return refusal
        vm.pool = pool
        needs = vm.model not in ("RESERVATION_BOUND", "FLEX_START")
        if needs and self.free(*vm.capacity_key) < 1:
            return err.stockout(vm.zone)
        return None

    def _provision(self, vm: Instance) -> None:
        vm.status = "PROVISIONING"
        vm.deadline = None
        vm.holds = vm.model != "RESERVATION_BOUND"
        vm.next_at = self.t + self.timings.provision
        if vm.network_ip is None:
            vm.network_ip = self.addresses.take()

    def _advance(self, vm: Instance) -> None:
        if vm.status == "PROVISIONING":
            vm.status = "STAGING"
            vm.next_at = self.t + self.timings.stage
            nics = vm.body.get("networkInterfaces") or [{}]
            configs = (nics[0] or {}).get("accessConfigs") or []
            if configs and not configs[0].get("natIP") and vm.nat_ip is None:
                vm.nat_ip = self.addresses.take()
        elif vm.status == "STAGING":
            vm.status = "RUNNING"
            vm.last_start = self.t
            vm.ends = self._run_end(vm)
            self._settled(vm)
        elif vm.status == "STOPPING" and vm.after_stop == "DELETED":
            self._remove(
                vm,
                err.failure(
                    "RESOURCE_NOT_FOUND", f"The resource '{err.named(vm.path)}' was deleted", 404
                ),
            )
        elif vm.status == "STOPPING":
            vm.status, vm.after_stop = "TERMINATED", None
            vm.last_stop = self.t
            vm.ends = None
            self._release(vm, keep_internal=True)
            self._settled(vm)

    def _run_end(self, vm: Instance) -> float | None:
        sched = vm.body.get("scheduling") or {}
        if sched.get("terminationTime"):
            try:
                return self.clock.parse(str(sched["terminationTime"]))
            except ValueError:
                return None
        return None if vm.max_run is None else self.t + vm.max_run

    def _settled(self, vm: Instance) -> None:
        for key in vm.waiting_ops:
            if key in self.ops:
                self.finish(self.ops[key])
        vm.waiting_ops.clear()

    def _release(self, vm: Instance, *, keep_internal: bool) -> None:
        vm.holds = False
        self.addresses.release([vm.nat_ip] + ([] if keep_internal else [vm.network_ip]))
        vm.nat_ip = None
        if not keep_internal:
            vm.network_ip = None

    def _remove(self, vm: Instance, failure: OpFailure) -> None:
        """``vm`` is gone: operations waiting for it to run fail with ``failure``, the others
        (its deletes) are DONE."""
        self.instances.pop((vm.zone, vm.name), None)
        self._release(vm, keep_internal=False)
        for key in vm.waiting_ops:
            op = self.ops.get(key)
            if op is not None:
                self.finish(op, None if op.op_type == "delete" else failure)
        vm.waiting_ops.clear()
        vm.status = "GONE"

    def terminate(self, vm: Instance) -> None:
        """Apply the instance's termination action now (a run's end, a preemption)."""
        vm.ends = None
        self._stopping(vm, "DELETED" if vm.action == "DELETE" else "TERMINATED")

    def _stopping(self, vm: Instance, after: str) -> None:
        if vm.status == "PENDING":
            self._remove(
                vm,
                err.failure(
                    "RESOURCE_NOT_FOUND", f"The resource '{err.named(vm.path)}' was deleted", 404
                ),
            )
            return
        if vm.status == "STOPPING" and vm.after_stop == "DELETED":
            return
        deleting = after == "DELETED"
        vm.after_stop = after
        if vm.status == "TERMINATED" and not deleting:
            return
        if vm.status != "STOPPING":
            vm.next_at = self.t + (self.timings.delete if deleting else self.timings.stop)
        vm.status = "STOPPING"

    def delete_instance(self, zone: str, name: str, request_id: str | None) -> Operation:
        vm = self.get_instance(zone, name)
        op = self.new_op(f"zones/{zone}", "delete", vm.path, vm.id, request_id)
        if vm.status == "PENDING":
            self._stopping(vm, "DELETED")
            self.finish(op, after=self.timings.operation)
            return op
        vm.waiting_ops.append(op.key)
        self._stopping(vm, "DELETED")
        return op

    def stop_instance(self, zone: str, name: str, request_id: str | None) -> Operation:
        vm = self.get_instance(zone, name)
        if vm.status == "PENDING":
            raise err.invalid(
                f"The instance '{err.named(vm.path)}' is waiting for capacity "
                "(PENDING); delete it instead."
            )
        op = self.new_op(f"zones/{zone}", "stop", vm.path, vm.id, request_id)
        if vm.status == "TERMINATED":
            self.finish(op, after=self.timings.operation)
            return op
        vm.waiting_ops.append(op.key)
        if vm.status in UP:
            self._stopping(vm, "TERMINATED")
        return op

    def start_instance(self, zone: str, name: str, request_id: str | None) -> Operation:
        vm = self.get_instance(zone, name)
        op = self.new_op(f"zones/{zone}", "start", vm.path, vm.id, request_id)
        if vm.status != "TERMINATED":
            if vm.status == "STOPPING":
                raise err.invalid(f"The instance '{err.named(vm.path)}' is stopping.")
            self.finish(op, after=self.timings.operation)
            return op
        refusal = self.admit(vm)
        if refusal is None and vm.model == "FLEX_START" and self.free(*vm.capacity_key) < 1:
            refusal = err.stockout(vm.zone)
        if refusal is not None:
            self.finish(op, refusal, after=self.timings.operation)
            return op
        vm.waiting_ops.append(op.key)
        self._provision(vm)
        return op

    def set_guest_attribute(
        self, zone: str, name: str, namespace: str, key: str, value: str
    ) -> None:
        """What the VM's guest writes to ``instance/guest-attributes/NAMESPACE/KEY``: refused
        unless its metadata says ``enable-guest-attributes: TRUE`` (the metadata server's rule).
        """
        vm = self.get_instance(zone, name)
        enabled = any(
            i.get("key") == "enable-guest-attributes" and str(i.get("value")).upper() == "TRUE"
            for i in vm.metadata
        )
        if not enabled:
            raise err.invalid(f"guest attributes are not enabled on {vm.path}")
        vm.guest[(namespace, key)] = value

    def guest_attributes(self, zone: str, name: str, query_path: str) -> dict[str, Any]:
        """``instances.getGuestAttributes`` with ``queryPath`` (``NAMESPACE/`` or
        ``NAMESPACE/KEY``): not found when nothing is under it."""
        vm = self.get_instance(zone, name)
        items = [
            {"namespace": ns, "key": k, "value": v}
            for (ns, k), v in sorted(vm.guest.items())
            if f"{ns}/{k}".startswith(query_path)
        ]
        if not items:
            raise err.not_found(f"{vm.path}/guestAttributes/{query_path}")
        return {
            "kind": "compute#guestAttributes",
            "queryPath": query_path,
            "queryValue": {"items": items},
        }

    def set_metadata(
        self, zone: str, name: str, body: dict[str, Any], request_id: str | None
    ) -> Operation:
        vm = self.get_instance(zone, name)
        if body.get("fingerprint") != vm.meta_fingerprint:
            raise err.fingerprint_mismatch()
        items = body.get("items") or []
        keys = [i.get("key") for i in items]
        if len(set(keys)) != len(keys) or not all(isinstance(k, str) and k for k in keys):
            raise err.bad_field("resource.items", keys, "Metadata keys must be unique and set.")
        vm.metadata = [dict(i) for i in items]
        vm.meta_fingerprint = fingerprint([vm.id, vm.metadata, self.next_seq()])
        op = self.new_op(f"zones/{zone}", "setMetadata", vm.path, vm.id, request_id)
        self.finish(op, after=self.timings.operation)
        return op

    # --- controls ----------------------------------------------------------------------------

    def place_instance(self, zone: str, body: dict[str, Any], status: str) -> Instance:
        """Put an instance in place without the API (an unmanaged one, a leftover): RUNNING
        (holding capacity even beyond the limit), TERMINATED, PENDING or PROVISIONING (which
        then walks on as a created one)."""
        name = str(body.get("name") or "")
        if not valid_name(name) or (zone, name) in self.instances:
            raise err.invalid(f"instance name {name!r} is invalid or taken in {zone}")
        machine = machine_type(zone, str(body.get("machineType") or ""))
        model, action = scheduling(body)
        vm = self.make_instance(zone, name, machine, body, model, action)
        vm.pool, _ = self.quotas.admit([], machine, zone, model, 1)
        self.instances[(zone, name)] = vm
        if status == "PENDING":
            vm.status = "PENDING"
            return vm
        self._provision(vm)
        if status in ("RUNNING", "TERMINATED"):
            vm.next_at = None
            self._advance(vm)  # STAGING: its natIP
            self._advance(vm)  # RUNNING
            if status == "TERMINATED":
                self._stopping(vm, "TERMINATED")
                vm.next_at = None
                self._advance(vm)
        elif status != "PROVISIONING":
            raise err.invalid(
                f"status must be RUNNING, TERMINATED, PENDING or PROVISIONING, not {status}"
            )
        return vm

    def preempt(self, zone: str, name: str) -> Operation:
        """A spot VM is preempted: a ``compute.instances.preempted`` operation (user
        ``system``, DONE) [3P], then its termination action."""
        vm = self.get_instance(zone, name)
        if not vm.spot:
            raise err.invalid(
                f"instance {name} is {vm.model}, not SPOT: only spot VMs are preempted"
            )
        if vm.status not in UP:
            raise err.invalid(f"instance {name} is {vm.status}, not running")
        op = self.new_op(
            f"zones/{zone}", "compute.instances.preempted", vm.path, vm.id, user="system"
        )
        op.close(self.t)
        self.terminate(vm)
        return op

    def grant_flex(self, zone: str, name: str) -> None:
        """A PENDING flex-start VM gets its capacity now (beyond the zone's limit if need be)."""
        vm = self.get_instance(zone, name)
        if vm.status != "PENDING":
            raise err.invalid(f"instance {name} is {vm.status}, not PENDING")
        self._provision(vm)

    def lapse_flex(self, zone: str, name: str) -> None:
        """A PENDING flex-start VM's request runs out now: it is gone, its insert failed."""
        vm = self.get_instance(zone, name)
        if vm.status != "PENDING":
            raise err.invalid(f"instance {name} is {vm.status}, not PENDING")
        self._remove(vm, err.stockout(zone))

    def end_run(self, zone: str, name: str) -> None:
        """A running VM's run ends now (``maxRunDuration`` over): its termination action."""
        vm = self.get_instance(zone, name)
        if vm.status != "RUNNING":
            raise err.invalid(f"instance {name} is {vm.status}, not RUNNING")
        self.terminate(vm)


__all__ = ["UP", "ComputeError", "FailureRule", "InstanceWorld"]
