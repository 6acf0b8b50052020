"""The emulated Compute Engine's regional resource policies (workload policies among them)
and its instance templates (global and regional), on top of its instances.

Pure: no I/O, no threads, no wall clock. A resource policy is CREATING for ``policy``
seconds, then READY (its insert's operation is DONE then); a template exists at once. Either
is refused deletion while a managed instance group uses it (``resourceInUseByAnotherResource``).
"""

from __future__ import annotations

import copy

from reconciler.emulator import _compute_errors as err
from reconciler.emulator._addresses import AddressPool
from reconciler.emulator._compute_catalog import resource_id, topology_chips, valid_name
from reconciler.emulator._compute_instances import InstanceWorld
from reconciler.emulator._compute_intake import scheduling
from reconciler.emulator._compute_records import JSON, Operation, Policy, Template
from reconciler.emulator._records import Clock
from reconciler.emulator._scenario import ComputeTimings


class TemplateWorld(InstanceWorld):
    def __init__(
        self, clock: Clock, timings: ComputeTimings, addresses: AddressPool, user: str
    ) -> None:
        super().__init__(clock, timings, addresses, user)
        self.policies: dict[tuple[str, str], Policy] = {}
        self.templates: dict[str, Template] = {}  # by relative path

    def next_time(self) -> float | None:
        times = [super().next_time()]
        times += [p.ready_at for p in self.policies.values() if p.ready_at > self.t]
        return min((t for t in times if t is not None), default=None)

    def users_of(self, resource: object) -> list[str]:
        """The paths of the resources that use a policy or template (none here; groups do)."""
        return []

    # --- resource policies -------------------------------------------------------------------

    def insert_policy(self, region: str, body: JSON, request_id: str | None) -> Operation:
        name = resource_name(body)
        path = f"regions/{region}/resourcePolicies/{name}"
        if (region, name) in self.policies:
            raise err.already_exists(path)
        workload = body.get("workloadPolicy")
        if isinstance(workload, dict):
            _check_workload(workload)
        rule = self.take_failure("compute.resourcePolicies.insert", region, name)
        if rule is not None:
            return self.failing_op(f"regions/{region}", "insert", path, rule, request_id)
        seq = self.next_seq()
        ready = self.t + self.timings.policy
        policy = Policy(region, name, resource_id(seq, 3), self.t, copy.deepcopy(body), ready)
        self.policies[(region, name)] = policy
        op = self.new_op(f"regions/{region}", "insert", path, policy.id, request_id)
        self.finish(op, after=self.timings.policy)
        return op

    def get_policy(self, region: str, name: str) -> Policy:
        policy = self.policies.get((region, name))
        if policy is None:
            raise err.not_found(f"regions/{region}/resourcePolicies/{name}")
        return policy

    def delete_policy(self, region: str, name: str, request_id: str | None) -> Operation:
        policy = self.get_policy(region, name)
        for user in self.users_of(policy):
            raise err.in_use("resource_policy", policy.path, user)
        del self.policies[(region, name)]
        op = self.new_op(f"regions/{region}", "delete", policy.path, policy.id, request_id)
        self.finish(op, after=self.timings.operation)
        return op

    # --- instance templates ------------------------------------------------------------------

    def insert_template(self, region: str | None, body: JSON, request_id: str | None) -> Operation:
        name = resource_name(body)
        scope = "global" if region is None else f"regions/{region}"
        path = f"{scope}/instanceTemplates/{name}"
        if path in self.templates:
            raise err.already_exists(path)
        props = body.get("properties")
        if not isinstance(props, dict) or not props.get("machineType"):
            raise err.bad_field("resource.properties.machineType", "", "It is required.")
        scheduling(props, "resource.properties.scheduling")
        op_type = "compute.instanceTemplates.insert"
        rule = self.take_failure(op_type, region, name)
        if rule is not None:
            return self.failing_op(scope, op_type, path, rule, request_id)
        seq = self.next_seq()
        tpl = Template(region, name, resource_id(seq, 4), self.t, copy.deepcopy(body))
        self.templates[path] = tpl
        op = self.new_op(scope, op_type, path, tpl.id, request_id)
        self.finish(op, after=self.timings.operation)
        return op

    def get_template(self, region: str | None, name: str) -> Template:
        scope = "global" if region is None else f"regions/{region}"
        tpl = self.templates.get(f"{scope}/instanceTemplates/{name}")
        if tpl is None:
            raise err.not_found(f"{scope}/instanceTemplates/{name}")
        return tpl

    def delete_template(self, region: str | None, name: str, request_id: str | None) -> Operation:
        tpl = self.get_template(region, name)
        for user in self.users_of(tpl):
            raise err.in_use("instance_template", tpl.path, user)
        del self.templates[tpl.path]
        op_type = "compute.instanceTemplates.delete"
        op = self.new_op(
            tpl.path.split("/instanceTemplates/")[0], op_type, tpl.path, tpl.id, request_id
        )
        self.finish(op, after=self.timings.operation)
        return op


def resource_name(body: JSON) -> str:
    name = body.get("name")
    if not valid_name(name):
        raise err.bad_field(
            "resource.name", name, "Must be a match of regex '[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?'"
        )
    return str(name)


def _check_workload(workload: JSON) -> None:
    """[3P: a topology only with HIGH_THROUGHPUT, never with maxTopologyDistance; I: words]"""
    topology = workload.get("acceleratorTopology")
    if topology and workload.get("maxTopologyDistance"):
        raise err.bad_field(
            "resource.workloadPolicy",
            "acceleratorTopology",
            "acceleratorTopology and maxTopologyDistance cannot both be set.",
        )
    if topology and workload.get("type") != "HIGH_THROUGHPUT":
        raise err.bad_field(
            "resource.workloadPolicy.type",
            workload.get("type", ""),
            "acceleratorTopology needs type HIGH_THROUGHPUT.",
        )
    if topology and topology_chips(str(topology)) is None:
        raise err.bad_field("resource.workloadPolicy.acceleratorTopology", topology)
