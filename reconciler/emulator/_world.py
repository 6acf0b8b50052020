"""The emulated Cloud TPU as a discrete-event state machine on an explicit clock.

Pure: no I/O, no threads, no wall clock. The server calls ``settle(now)`` with the emulated
time before every read or write, and the world replays every timer and scenario event due
by then *in time order*, so capacity freed at t=40 goes to the oldest waiter at t=40 however
late the next request arrives. Callers serialize access (the server holds one lock).

Lifecycle of a queued resource (timings from ``Timings``):

    CREATING --accept--> ACCEPTED --provision--> PROVISIONING --activate--> ACTIVE
                                  \\-> WAITING_FOR_RESOURCES (no capacity) -> PROVISIONING
    queued past validUntil, or no capacity with shortage=fail -> FAILED (code 8)
    preempted -> SUSPENDING --suspend--> SUSPENDED (stateInitiator SERVICE)
    flex-start run over (ACTIVE + maxRunDuration) -> node deleted, SUSPENDING -> SUSPENDED
    deleted   -> DELETING --delete--> gone (its capacity unit returns)

A QR holds one unit of (zone, accelerator) capacity from PROVISIONING until its deletion
finishes (a preempted QR keeps it until deleted, as it keeps its quota).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Any

from reconciler.emulator import _intake as intake
from reconciler.emulator import _records as rec
from reconciler.emulator._addresses import AddressPool
from reconciler.emulator._compute_resize import ComputeWorld
from reconciler.emulator._faults import FaultBook
from reconciler.emulator._quota import QuotaBook
from reconciler.emulator._records import ApiError, NodeRecord, OpRecord, QRRecord
from reconciler.emulator._scenario import (
    OperationFailure,
    Scenario,
    ScenarioQueuedResource,
    Timings,
)
from reconciler.model.names import worker_count

QUEUED = frozenset({"CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES"})
#: States in which deleting needs ``force`` because a node exists and is in use.
NEEDS_FORCE = frozenset({"PROVISIONING", "ACTIVE", "SUSPENDING"})
DEFAULT_IP_POOL = tuple(f"203.0.113.{i}" for i in range(1, 255))  # TEST-NET-3: never routed


@dataclass(order=True, slots=True)
class _Event:
    at: float
    seq: int
    kind: str = field(compare=False)
    payload: Any = field(compare=False)


class World:
    def __init__(
        self,
        scenario: Scenario,
        *,
        epoch: float,
        ip_pool: tuple[str, ...],
        user: str = "demo-user@example.com",
    ) -> None:
        self.clock = rec.Clock(epoch)
        self.timings: Timings = scenario.timings
        self.t = 0.0
        self.qrs: dict[tuple[str, str], QRRecord] = {}
        self.nodes: dict[tuple[str, str], NodeRecord] = {}
        self.ops: dict[tuple[str, str], OpRecord] = {}
        self.capacity: dict[tuple[str, str], int | None] = {}
        self.shortage: dict[tuple[str, str], str] = {}
        self.default_capacity = scenario.default_capacity
        self.unreachable: set[str] = set()
        self.faults = FaultBook()
        self.quotas = QuotaBook()
        self.latency = 0.0
        self.fail_provisioning_deletes = scenario.fail_deletes_while_provisioning
        #: Armed operation failures and how many requests each may still fail (None: all).
        self.op_failures: list[tuple[OperationFailure, int | None]] = [
            (f, f.count) for f in scenario.operation_failures
        ]
        self.addresses = AddressPool(ip_pool)
        #: The Compute Engine side, on the same clock and address pool.
        self.compute = ComputeWorld(self.clock, scenario.compute_timings, self.addresses, user)
        self.os_login_user: str = scenario.os_login_user
        #: (zone, accelerator or None for every type) refusing flex-start creates
        self.flex_rejections: set[tuple[str, str | None]] = set()
        self._seq = 0
        self._events: list[_Event] = []
        for c in scenario.capacity:
            self._schedule(c.at, "capacity", c)
        for p in scenario.preemptions:
            self._schedule(p.at, "preempt", p)
        for f in scenario.faults:
            self._schedule(f.at, "fault", f.fault())
        for lat in scenario.latency:
            self._schedule(lat.at, "latency", lat.seconds)
        for q in scenario.queued_resources:
            self._schedule(q.at, "qr", q)
        for cc in scenario.compute_capacity:
            self._schedule(cc.at, "compute-capacity", cc)
        for u in scenario.unreachable:
            self._schedule(u.at, "unreachable", (u.zone, True))
            if u.until is not None:
                self._schedule(u.until, "unreachable", (u.zone, False))

    # --- the clock ---------------------------------------------------------------------------

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _schedule(self, at: float, kind: str, payload: Any) -> None:
        bisect.insort(self._events, _Event(at, self._next_seq(), kind, payload))

    def _next_time(self) -> float | None:
        times = [self._events[0].at] if self._events else []
        for q in self.qrs.values():
            if q.next_at is not None:
                times.append(q.next_at)
            if q.deadline is not None and q.state in QUEUED:
                times.append(q.deadline)
            if q.ends is not None and q.state == "ACTIVE":
                times.append(q.ends)
        times.extend(o.due_at for o in self.ops.values() if o.due_at is not None and not o.done)
        if (compute := self.compute.next_time()) is not None:
            times.append(compute)
        return min(times, default=None)

    def settle(self, now: float) -> None:
        """Replay everything due up to emulated time ``now`` (both APIs' worlds)."""
        while (t := self._next_time()) is not None and t <= now:
            self.t = self.compute.t = max(self.t, t)
            self._fire(self.t)
            self._grant()
            self.compute.fire(self.t)
        self.t = self.compute.t = max(self.t, now)

    def _fire(self, t: float) -> None:
        while self._events and self._events[0].at <= t:
            event = self._events.pop(0)
            self._apply_event(event.kind, event.payload)
        for q in sorted(self.qrs.values(), key=lambda r: r.seq):
            if q.deadline is not None and q.deadline <= t and q.state in QUEUED:
                self._fail(q, "RESOURCE_EXHAUSTED", rec.expired(q.name, q.zone))
            elif q.ends is not None and q.ends <= t and q.state == "ACTIVE":
                self.end_run(q)
            elif q.next_at is not None and q.next_at <= t:
                q.next_at = None
                self._advance(q)
        for op in self.ops.values():
            if op.due_at is not None and op.due_at <= t and not op.done:
                self._close_op(op)

    def _apply_event(self, kind: str, payload: Any) -> None:
        if kind == "capacity":
            self.set_capacity(payload.zone, payload.accelerator, payload.count, payload.shortage)
        elif kind == "compute-capacity":
            self.compute.set_capacity(payload.zone, payload.machine_type, payload.count)
        elif kind == "preempt":
            if (payload.zone, payload.node) in self.nodes:
                self.preempt(payload.zone, payload.node)
        elif kind == "fault":
            self.faults.add(payload)
        elif kind == "latency":
            self.latency = float(payload)
        elif kind == "qr":
            if (payload.zone, payload.name) not in self.qrs:
                self.place(payload)
        elif kind == "unreachable":
            zone, down = payload
            (self.unreachable.add if down else self.unreachable.discard)(zone)

    # --- transitions -------------------------------------------------------------------------

    def _advance(self, q: QRRecord) -> None:
        if q.state == "CREATING":
            if self._shortage_fails(q) and self._free(q.capacity_key) < q.node_count:
                self._fail(q, "RESOURCE_EXHAUSTED", rec.no_capacity(q.zone))
                return
            q.state = "ACCEPTED"
            q.next_at = max(self.t + self.timings.provision, q.valid_after)
            self._resolve_create(q)
        elif q.state == "ACCEPTED":
            q.state = "WAITING_FOR_RESOURCES"
            self._grant()
            if q.state == "WAITING_FOR_RESOURCES" and self._shortage_fails(q):
                self._fail(q, "RESOURCE_EXHAUSTED", rec.no_capacity(q.zone))
        elif q.state == "PROVISIONING":
            q.state = "ACTIVE"
            if q.max_run is not None:  # flex-start: the run's clock starts now
                q.ends = self.t + q.max_run
            for node in q.all_nodes:
                node.state = "READY"
            self._assign_endpoints(q)
        elif q.state == "SUSPENDING":
            q.state = "SUSPENDED"
        elif q.state == "DELETING":
            self._remove(q)

    def _grant(self) -> None:
        waiting = sorted(
            (q for q in self.qrs.values() if q.state == "WAITING_FOR_RESOURCES"),
            key=lambda r: r.seq,
        )
        for q in waiting:
            if q.valid_after <= self.t and self._free(q.capacity_key) >= q.node_count:
                self._provision(q)

    def _provision(self, q: QRRecord) -> None:
        q.state = "PROVISIONING"
        q.holds = True
        q.deadline = None
        q.next_at = self.t + self.timings.activate
        uid = 7_000_000_000_000_000_000 + q.seq  # slice i: + i * 10^12
        made = [
            NodeRecord(q.zone, n, uid + i * 10**12, q.name, self.t)
            for i, n in enumerate(q.node_ids())
        ]
        q.node, q.slices = made[0], made[1:]
        self.nodes.update(((q.zone, n.name), n) for n in made)

    def _assign_endpoints(self, q: QRRecord) -> None:
        external = (q.node_spec.get("networkConfig") or {}).get("enableExternalIps", True)
        for node in q.all_nodes:  # every slice of a multislice QR: its own workers and IPs
            workers = worker_count(q.accelerator)
            node.endpoints = [(self.addresses.internal(), None) for _ in range(workers)]
            if external is not False:
                node.endpoints = [(ip, self.addresses.take()) for ip, _ in node.endpoints]

    def _fail(self, q: QRRecord, status: str, message: str) -> None:
        q.state = "FAILED"
        q.initiator = "SERVICE"
        q.error = rec.rpc_status(status, message)
        q.next_at = None
        q.deadline = None
        self._resolve_create(q)

    def _resolve_create(self, q: QRRecord) -> None:
        op = self.ops.get((q.zone, q.create_op or ""))
        if op is None or op.done:
            return
        if q.state == "FAILED":
            op.error = dict(q.error or {})
        else:
            snap = q.snapshot()
            clock = self.clock

            def response(project: str) -> rec.JSON:
                body = rec.render_qr(snap, project, clock)
                return {"@type": "type.googleapis.com/google.cloud.tpu.v2.QueuedResource", **body}

            op.response = response
        self._close_op(op)

    def _close_op(self, op: OpRecord) -> None:
        op.done = True
        op.ended = self.t
        op.due_at = None

    def _remove(self, q: QRRecord) -> None:
        del self.qrs[(q.zone, q.name)]
        for node in q.all_nodes:
            self.nodes.pop((q.zone, node.name), None)
            self.addresses.release(ext for _, ext in node.endpoints)
        q.holds = False
        for op_id in q.delete_ops:
            op = self.ops[(q.zone, op_id)]
            op.response = _empty
            self._close_op(op)
        create = self.ops.get((q.zone, q.create_op or ""))
        if create is not None and not create.done:
            create.error = rec.rpc_status("CANCELLED", "the queued resource was deleted")
            self._close_op(create)

    # --- capacity ----------------------------------------------------------------------------

    def _free(self, key: tuple[str, str]) -> float:
        limit = self.capacity.get(key, self.default_capacity)
        if limit is None:
            return float("inf")
        return limit - self.used(*key)

    def _shortage_fails(self, q: QRRecord) -> bool:
        return self.shortage.get(q.capacity_key) == "fail"

    def set_capacity(
        self, zone: str, accelerator: str, count: int | None, shortage: str | None = None
    ) -> None:
        self.capacity[(zone, accelerator)] = count
        if shortage is not None:
            self.shortage[(zone, accelerator)] = shortage
        self._grant()

    def used(self, zone: str, accelerator: str) -> int:
        key = (zone, accelerator)
        return sum(q.node_count for q in self.qrs.values() if q.holds and q.capacity_key == key)

    # --- requests ----------------------------------------------------------------------------

    def _new_op(self, zone: str, verb: str, target: str) -> OpRecord:
        seq = self._next_seq()
        millis = int(self.clock.wall(self.t) * 1000)
        op = OpRecord(zone, f"operation-{millis}-{seq:012x}", verb, target, self.t)
        self.ops[(zone, op.op_id)] = op
        return op

    def create(self, project: str, zone: str, qr_id: str | None, body: Any) -> OpRecord:
        q = intake.from_request(zone, qr_id, body, seq=self._next_seq(), now=self.t)
        if (zone, q.name) in self.qrs:
            name = f"{rec.location(project, zone)}/queuedResources/{q.name}"
            raise ApiError("ALREADY_EXISTS", f"Resource '{name}' already exists")
        rejected = {(zone, None), (zone, q.accelerator)} & self.flex_rejections
        if q.max_run is not None and rejected:
            raise ApiError("INVALID_ARGUMENT", rec.flex_rejected(q.accelerator, zone))
        for node_id in q.node_ids():
            if (zone, node_id) in self.nodes:
                raise ApiError("ALREADY_EXISTS", f"Node '{node_id}' already exists in {zone}")
        failing = self._take_op_failure("create", zone, q.name)
        if failing is not None:
            return self._failing_op(zone, "create", q.name, failing)
        self.quotas.check(self.qrs.values(), q)  # every QR counts until deleted
        intake.apply_policy(q, self.clock)
        q.next_at = self.t + self.timings.accept
        op = self._new_op(zone, "create", q.name)
        q.create_op = op.op_id
        self.qrs[(zone, q.name)] = q
        return op

    def place(self, spec: ScenarioQueuedResource) -> QRRecord:
        """Put a QR straight into the world (a scenario's or a test's), skipping the API."""
        q = intake.from_scenario(spec, seq=self._next_seq(), now=self.t)
        intake.apply_policy(q, self.clock)
        self.qrs[(q.zone, q.name)] = q
        state = spec.state or "CREATING"
        if state == "CREATING":
            q.next_at = self.t + self.timings.accept
        elif state == "ACCEPTED":
            q.state, q.next_at = state, self.t + self.timings.provision
        elif state == "WAITING_FOR_RESOURCES":
            q.state = state
        elif state == "FAILED":
            self._fail(q, "RESOURCE_EXHAUSTED", rec.no_capacity(q.zone))
        else:  # PROVISIONING, ACTIVE, SUSPENDED: it has a node and holds capacity
            self._provision(q)
            if state != "PROVISIONING":
                q.next_at = None
                self._advance(q)
            if state == "SUSPENDED":
                self.preempt(q.zone, q.node_ids()[0])
                q.state, q.next_at = "SUSPENDED", None
        return q

    def get(self, zone: str, name: str) -> QRRecord:
        self._check_reachable(zone)
        q = self.qrs.get((zone, name))
        if q is None:
            raise ApiError("NOT_FOUND", f"Resource 'queuedResources/{name}' was not found")
        return q

    def get_node(self, zone: str, name: str) -> NodeRecord:
        self._check_reachable(zone)
        node = self.nodes.get((zone, name))
        if node is None:
            raise ApiError("NOT_FOUND", f"Resource 'nodes/{name}' was not found")
        return node

    def get_op(self, zone: str, op_id: str) -> OpRecord:
        op = self.ops.get((zone, op_id))
        if op is None:
            raise ApiError("NOT_FOUND", f"Resource 'operations/{op_id}' was not found")
        return op

    def _check_reachable(self, zone: str) -> None:
        intake.check_zone(zone)
        if zone in self.unreachable:
            raise ApiError("UNAVAILABLE", f"The zone {zone} is temporarily unavailable")

    def zones_for(self, zone: str) -> tuple[set[str] | None, list[str]]:
        """(zones to list, None for all; unreachable zones) for a list in ``zone``."""
        if zone == "-":
            return None, sorted(self.unreachable)
        self._check_reachable(zone)
        return {zone}, []

    def delete(self, zone: str, name: str, *, force: bool) -> OpRecord:
        q = self.get(zone, name)
        if q.state in NEEDS_FORCE and q.node is not None and not force:
            raise ApiError(
                "FAILED_PRECONDITION",
                f"Queued resource {name} in state {q.state} has node {q.node.name}; "
                "delete it with force=true",
            )
        failing = self._take_op_failure("delete", zone, name)
        if failing is not None:
            return self._failing_op(zone, "delete", name, failing)
        op = self._new_op(zone, "delete", name)
        if q.state == "PROVISIONING" and self.fail_provisioning_deletes:
            op.due_at = self.t + self.timings.delete
            op.error = rec.rpc_status(
                "FAILED_PRECONDITION",
                f"Queued resource {name} cannot be deleted while PROVISIONING",
            )
            return op
        q.delete_ops.append(op.op_id)
        if q.state != "DELETING":
            q.state, q.initiator = "DELETING", "USER"
            q.deadline = None
            q.next_at = self.t + self.timings.delete
            for node in q.all_nodes:
                node.state = "DELETING"
        return op

    def add_op_failure(self, failure: OperationFailure) -> None:
        self.op_failures.append((failure, failure.count))

    def _take_op_failure(self, verb: str, zone: str, name: str) -> OperationFailure | None:
        for index, (f, left) in enumerate(self.op_failures):
            if f.verb != verb or (f.zone is not None and f.zone != zone):
                continue
            if f.name is not None and not re.fullmatch(f.name, name):
                continue
            if left is not None:
                if left <= 1:
                    del self.op_failures[index]
                else:
                    self.op_failures[index] = (f, left - 1)
            return f
        return None

    def _failing_op(self, zone: str, verb: str, name: str, f: OperationFailure) -> OpRecord:
        """An operation that ends ``f.after`` from now with ``f``'s error; nothing else moves."""
        op = self._new_op(zone, verb, name)
        op.due_at = self.t + f.after
        op.error = rec.rpc_status(f.status.upper(), f.message)
        return op

    def preempt(self, zone: str, node_name: str) -> None:
        node = self.nodes.get((zone, node_name))
        if node is None:
            raise ApiError("NOT_FOUND", f"Resource 'nodes/{node_name}' was not found")
        q = self.qrs[(zone, node.qr_name)]
        if q.state not in ("PROVISIONING", "ACTIVE"):
            raise ApiError("FAILED_PRECONDITION", f"node {node_name} is {node.state}, not running")
        node.state = "PREEMPTED"
        q.state, q.initiator = "SUSPENDING", "SERVICE"
        q.next_at = self.t + self.timings.suspend

    def end_run(self, q: QRRecord) -> None:
        """A flex-start run is over: its VMs are deleted and the QR goes SUSPENDING, then
        SUSPENDED (stateInitiator SERVICE); the QR keeps its capacity unit until deleted."""
        if q.state not in ("PROVISIONING", "ACTIVE"):
            raise ApiError("FAILED_PRECONDITION", f"queued resource {q.name} is not running")
        q.ends = min(q.ends if q.ends is not None else self.t, self.t)
        for node in q.all_nodes:  # every slice of a multislice QR
            self.nodes.pop((q.zone, node.name), None)
            self.addresses.release(ext for _, ext in node.endpoints)
        q.node, q.slices = None, []
        q.state, q.initiator = "SUSPENDING", "SERVICE"
        q.next_at = self.t + self.timings.suspend

    def set_node_health(self, zone: str, node_name: str, fields: dict[str, Any]) -> None:
        """Set a node's ``health``, ``symptoms`` and ``upcomingMaintenance`` (each key given;
        null clears it)."""
        node = self.nodes.get((zone, node_name))
        if node is None:
            raise ApiError("NOT_FOUND", f"Resource 'nodes/{node_name}' was not found")
        if "health" in fields:
            node.health = fields["health"]
        if "symptoms" in fields:
            node.symptoms = [dict(s) for s in fields["symptoms"] or []]
        if "maintenance" in fields:
            node.maintenance = dict(fields["maintenance"]) if fields["maintenance"] else None

    def set_guest_attribute(
        self, zone: str, node_name: str, worker: int | None, namespace: str, key: str, value: str
    ) -> None:
        """What a worker's VM writes to ``instance/guest-attributes/NAMESPACE/KEY`` (every
        worker's with ``worker`` None); an empty value removes it."""
        node = self.get_node(zone, node_name)
        if not node.endpoints:
            raise ApiError("FAILED_PRECONDITION", f"node {node_name} has no workers yet")
        workers = range(len(node.endpoints)) if worker is None else [worker]
        for index in workers:
            if not 0 <= index < len(node.endpoints):
                raise ApiError("INVALID_ARGUMENT", f"node {node_name} has no worker {index}")
            attrs = node.guest.setdefault(index, {})
            if value:
                attrs[(namespace, key)] = value
            else:
                attrs.pop((namespace, key), None)

    def update_node(self, zone: str, node_name: str, body: Any, mask: str) -> OpRecord:
        """``nodes.patch``: only ``metadata`` (what gcloud's ``tpu-vm update`` changes with
        ``--metadata-from-file``), replaced as a whole; the operation is done at once."""
        node = self.get_node(zone, node_name)
        fields = {f.strip() for f in mask.split(",") if f.strip()}
        if fields != {"metadata"}:
            raise ApiError("INVALID_ARGUMENT", f"unsupported updateMask {mask!r} (metadata only)")
        metadata = body.get("metadata") if isinstance(body, dict) else None
        if metadata is not None and not (
            isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())
        ):
            raise ApiError("INVALID_ARGUMENT", "metadata must be a map of strings")
        node.metadata = dict(metadata or {})
        op = self._new_op(zone, "update", node_name)
        op.collection, op.done, op.ended = "nodes", True, self.t
        return op

    def fail(self, zone: str, name: str, status: str, message: str) -> None:
        self._fail(self.get(zone, name), status, message)


def _empty(project: str) -> rec.JSON:
    return {"@type": "type.googleapis.com/google.protobuf.Empty"}
