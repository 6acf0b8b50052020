"""A managed instance group's resize requests (Dynamic Workload Scheduler on a MIG), the last
layer of the emulated Compute Engine world: ``ComputeWorld``.

Pure: no I/O, no threads, no wall clock. A resize request asks for ``resizeBy`` hosts, or for
the hosts named in ``instances``, all at once [V: the fields and states, SDK]::

    CREATING --operation--> ACCEPTED --capacity (and quota) for every host--> SUCCEEDED
    ACCEPTED --cancel--> CANCELLED            ACCEPTED --fail_resize_request--> FAILED

While ACCEPTED without capacity, ``status.lastAttempt.error`` says why; it is cleared in a
final state, and FAILED keeps its reason in ``status.error`` [V]. At SUCCEEDED the hosts join
the group (its ``targetSize`` grows by as many) and each is deleted ``requestedRunDuration``
after it starts running [V: "At the end of the run duration instance will be deleted"; I:
from RUNNING]. ``requestedRunDuration`` is 10 minutes to 7 days, and required unless the
group's template is FLEX_START or RESERVATION_BOUND [V: gcloud's help]. Only a request in a
final state can be deleted [I].
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from reconciler.emulator import _compute_errors as err
from reconciler.emulator._addresses import AddressPool
from reconciler.emulator._compute_catalog import link, resource_id, valid_name
from reconciler.emulator._compute_groups import Group, GroupWorld, generated_name
from reconciler.emulator._compute_intake import duration, scheduling
from reconciler.emulator._compute_records import JSON, Operation, Stamp
from reconciler.emulator._compute_templates import resource_name
from reconciler.emulator._records import Clock
from reconciler.emulator._scenario import ComputeTimings

FINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})


@dataclass(slots=True)
class ResizeRequest:
    group: Group
    name: str
    id: str
    seq: int
    created: float
    body: JSON
    names: list[str]  # the hosts it makes, in order
    run: float | None  # requestedRunDuration, seconds
    accept_at: float
    state: str = "CREATING"
    error: JSON | None = None  # status.error: why it FAILED
    last_error: JSON | None = None  # status.lastAttempt.error: why it still waits

    @property
    def path(self) -> str:
        return f"{self.group.path}/resizeRequests/{self.name}"


class ComputeWorld(GroupWorld):
    """Everything the emulated Compute Engine holds: instances and operations, policies and
    templates, managed instance groups and their resize requests."""

    def __init__(
        self, clock: Clock, timings: ComputeTimings, addresses: AddressPool, user: str
    ) -> None:
        super().__init__(clock, timings, addresses, user)
        self.resize_requests: dict[str, ResizeRequest] = {}  # by relative path

    def next_time(self) -> float | None:
        times = [super().next_time()]
        times += [r.accept_at for r in self.resize_requests.values() if r.state == "CREATING"]
        return min((t for t in times if t is not None), default=None)

    def grant(self) -> None:
        super().grant()
        for rr in sorted(self.resize_requests.values(), key=lambda r: r.seq):
            if rr.state == "CREATING" and rr.accept_at <= self.t:
                rr.state = "ACCEPTED"
            if rr.state == "ACCEPTED":
                self._fulfil(rr)

    def tend(self) -> None:
        super().tend()
        for path, rr in list(self.resize_requests.items()):
            if rr.group.path not in self.groups:  # its group was deleted
                del self.resize_requests[path]

    # --- requests ----------------------------------------------------------------------------

    def insert_resize_request(
        self, scope: str, group: str, body: JSON, request_id: str | None
    ) -> Operation:
        g = self.live_group(scope, group)
        name = resource_name(body)
        path = f"{g.path}/resizeRequests/{name}"
        if path in self.resize_requests:
            raise err.already_exists(path)
        by, listed = body.get("resizeBy"), body.get("instances")
        if (by is None) == (not listed):
            raise err.bad_field(
                "resource.resizeBy", by or "", "Set resizeBy or instances, not both."
            )
        names = [str(i.get("name")) for i in listed or [] if isinstance(i, dict)]
        for n in names:
            if not valid_name(n) or n in g.members or names.count(n) > 1:
                raise err.bad_field("resource.instances.name", n, "Invalid or already used.")
        count = len(names) if listed else int(str(by))
        if count < 1:
            raise err.bad_field("resource.resizeBy", by, "It must be at least 1.")
        run = None
        if body.get("requestedRunDuration") is not None:
            run = duration(body["requestedRunDuration"], "resource.requestedRunDuration")
            if not 600 <= run <= 7 * 86400:
                raise err.bad_field(
                    "resource.requestedRunDuration", run, "It must be between 10m and 7d."
                )
        model, _ = scheduling(g.template.properties, "properties.scheduling")
        if run is None and model not in ("FLEX_START", "RESERVATION_BOUND"):
            raise err.bad_field(
                "resource.requestedRunDuration",
                "",
                "It is required unless the group is FLEX_START or reserved.",
            )
        self.check_size(g, g.target_size + count)
        seq = self.next_seq()
        if not names:
            base = g.body.get("baseInstanceName") or g.name
            names = [generated_name(base, g.seq, self.next_seq()) for _ in range(count)]
        rr = ResizeRequest(
            g,
            name,
            resource_id(seq, 7),
            seq,
            self.t,
            copy.deepcopy(body),
            names,
            run,
            self.t + self.timings.operation,
        )
        self.resize_requests[path] = rr
        op_type = "compute.instanceGroupManagers.createResizeRequest"  # [V, autoscaler fixture]
        op = self.new_op(scope, op_type, g.path, g.id, request_id)
        self.finish(op, after=self.timings.operation)
        return op

    def get_resize_request(self, scope: str, group: str, name: str) -> ResizeRequest:
        path = f"{scope}/instanceGroupManagers/{group}/resizeRequests/{name}"
        rr = self.resize_requests.get(path)
        if rr is None:
            raise err.not_found(path)
        return rr

    def cancel_resize_request(
        self, scope: str, group: str, name: str, request_id: str | None
    ) -> Operation:
        rr = self.get_resize_request(scope, group, name)
        if rr.state not in ("CREATING", "ACCEPTED"):
            raise err.invalid(
                f"The resize request '{err.named(rr.path)}' is {rr.state}; only "
                "a CREATING or ACCEPTED one can be cancelled."
            )
        rr.state, rr.last_error = "CANCELLED", None
        op_type = "compute.instanceGroupManagerResizeRequests.cancel"  # [I]
        op = self.new_op(scope, op_type, rr.path, rr.id, request_id)
        self.finish(op, after=self.timings.operation)
        return op

    def delete_resize_request(
        self, scope: str, group: str, name: str, request_id: str | None
    ) -> Operation:
        rr = self.get_resize_request(scope, group, name)
        if rr.state not in FINAL:
            raise err.invalid(
                f"The resize request '{err.named(rr.path)}' is {rr.state}; cancel "
                "it before deleting it."
            )
        del self.resize_requests[rr.path]
        op_type = "compute.instanceGroupManagerResizeRequests.delete"  # [I]
        op = self.new_op(scope, op_type, rr.path, rr.id, request_id)
        self.finish(op, after=self.timings.operation)
        return op

    def fail_resize_request(
        self, scope: str, group: str, name: str, code: str, message: str
    ) -> None:
        """An accepted request fails (its VMs, had it made any, rolled back) [V: the state's
        meaning]."""
        rr = self.get_resize_request(scope, group, name)
        if rr.state not in ("CREATING", "ACCEPTED"):
            raise err.invalid(f"resize request {name} is {rr.state}, not waiting")
        rr.state, rr.last_error = "FAILED", None
        rr.error = {"errors": [{"code": code, "message": message}]}

    def _fulfil(self, rr: ResizeRequest) -> None:
        g = rr.group
        zone, refusal = self.place(g, len(rr.names))
        if zone is None:
            error = (refusal or err.stockout(g.zones[0])).errors[0]
            rr.last_error = {"errors": [dict(error)]}
            return
        for n in rr.names:
            member = self.add_member(g, n, zone)
            member.run = rr.run
            self.create_member(g, member)
        g.target_size += len(rr.names)
        rr.state, rr.last_error = "SUCCEEDED", None


def render_resize_request(rr: ResizeRequest, project: str, when: Stamp) -> JSON:
    g = rr.group
    body: JSON = {
        "kind": "compute#instanceGroupManagerResizeRequest",
        "id": rr.id,
        "creationTimestamp": when(rr.created),
        "name": rr.name,
        "state": rr.state,
        "selfLink": link(project, rr.path),
        "selfLinkWithId": link(project, f"{g.path}/resizeRequests/{rr.id}"),
        "region" if g.regional else "zone": link(project, g.scope),
    }
    for key in ("description", "resizeBy", "instances", "requestedRunDuration"):
        if rr.body.get(key) is not None:
            body[key] = copy.deepcopy(rr.body[key])
    status: JSON = {}
    if rr.error is not None:
        status["error"] = copy.deepcopy(rr.error)
    if rr.last_error is not None:
        status["lastAttempt"] = {"error": copy.deepcopy(rr.last_error)}
    if status:
        body["status"] = status
    return body
