"""What a slot's Compute Engine resources mean (``adapters/compute_states.py``): the state
tables of an instance and of a MIG slice, the request several slices make, and the look at a
project's instances and MIGs. Pure: JSON in, values out."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.adapters import compute_body as cb
from reconciler.adapters import compute_states as cs
from reconciler.adapters import tpu_api_parse
from reconciler.adapters.compute_parse import group_from_api, host_from_api
from reconciler.model.capacity import Initiator, RequestState
from reconciler.model.observed import NodeState, Observation
from reconciler.runtime.backends import word_state

ZONE = "us-central1-c"
LINK = "https://www.googleapis.com/compute/v1/projects/p/"


def vm(
    name: str,
    status: str = "RUNNING",
    model: str = "SPOT",
    *,
    slot: str | None = None,
    ip: str = "10.0.0.2",
    slice_: int = 0,
    slices: int = 1,
    accelerator: str = "tpu7x-8",
    **extra: Any,
) -> dict[str, Any]:
    """An ``Instance`` as ``aggregated/instances`` lists it."""
    body: dict[str, Any] = {
        "name": name,
        "id": str(abs(hash(name)) % 10**12),
        "zone": f"{LINK}zones/{ZONE}",
        "status": status,
        "creationTimestamp": "2026-12-01T10:00:00.000-08:00",
        "labels": {
            "managed-by": "tpu-reconciler",
            cb.LABEL_SLOT: slot or name,
            cb.LABEL_SLICE: str(slice_),
            cb.LABEL_SLICES: str(slices),
            cb.LABEL_ACCELERATOR: accelerator,
        },
        "networkInterfaces": [{"networkIP": ip, "accessConfigs": [{"natIP": "34.1.2.3"}]}],
        "scheduling": {"provisioningModel": model},
    }
    body.update(extra)
    return body


def mig(
    name: str = "big",
    *,
    target: int = 4,
    creating: int = 0,
    deleting: int = 0,
    topology: str | None = "ACTIVE",
    mode: str = "spot",
    hosts: int = 4,
    slice_: str = "0/1",
    **extra: Any,
) -> dict[str, Any]:
    """One of our ``InstanceGroupManager``s as ``aggregated/instanceGroupManagers`` lists it."""
    status: dict[str, Any] = {"isStable": not creating}
    if topology is not None:
        status["appliedAcceleratorTopologies"] = [
            {"acceleratorTopology": "2x4x4", "state": topology}
        ]
    body: dict[str, Any] = {
        "name": name,
        "id": "77",
        "zone": f"{LINK}zones/{ZONE}",
        "creationTimestamp": "2026-12-01T10:00:00.000-08:00",
        "description": cb.describe(
            slot=name.rsplit("-", 1)[0] if slice_ != "0/1" else name,
            slice=slice_,
            accelerator="tpu7x-32",
            topology="2x4x4",
            hosts=hosts,
            mode=mode,
            template=f"{name}-tpl-abc123",
        ),
        "instanceTemplate": f"{LINK}global/instanceTemplates/{name}-tpl-abc123",
        "targetSize": target,
        "currentActions": {"creating": creating, "deleting": deleting, "none": target - creating},
        "status": status,
    }
    body.update(extra)
    return body


def members(group: str = "big", n: int = 4, status: str = "RUNNING", **extra: Any) -> list[Any]:
    return [
        vm(f"{group}-{i}", status, slot=group, ip=f"10.0.0.{10 + i}", accelerator="tpu7x-32",
           **extra)
        for i in range(n)
    ]  # fmt: skip


# --- an instance ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "model", "state", "node", "ended_by"),
    [
        ("PENDING", "FLEX_START", RequestState.WAITING, None, None),
        ("PROVISIONING", "SPOT", RequestState.PROVISIONING, NodeState.CREATING, None),
        ("STAGING", "SPOT", RequestState.PROVISIONING, NodeState.CREATING, None),
        ("RUNNING", "SPOT", RequestState.ACTIVE, NodeState.READY, None),
        ("REPAIRING", "STANDARD", RequestState.PROVISIONING, NodeState.REPAIRING, None),
        ("STOPPING", "SPOT", RequestState.SUSPENDING, NodeState.STOPPING, None),
        ("TERMINATED", "SPOT", RequestState.SUSPENDED, NodeState.PREEMPTED, Initiator.SERVICE),
        ("TERMINATED", "FLEX_START", RequestState.ENDED, NodeState.TERMINATED, Initiator.SERVICE),
        ("TERMINATED", "STANDARD", RequestState.SUSPENDED, NodeState.TERMINATED, None),
        ("SUSPENDED", "RESERVATION_BOUND", RequestState.SUSPENDED, NodeState.TERMINATED, None),
        ("HIBERNATING", "SPOT", RequestState.UNKNOWN, NodeState.UNKNOWN, None),
    ],
)
def test_an_instance_state(
    status: str,
    model: str,
    state: RequestState,
    node: NodeState | None,
    ended_by: Initiator | None,
) -> None:
    part = cs.instance_part(host_from_api(vm("a", status, model)), 0)
    assert (part.state, part.word, part.ended_by) == (state, status, ended_by)
    assert (part.node.state if part.node else None) == node
    [request] = cs.look([vm("a", status, model)], []).requests
    assert request.state == state
    assert request.api_state == (status if state != RequestState.UNKNOWN else "UNKNOWN")
    assert request.raw_state == status
    assert cs.request_state(status) == (
        RequestState.SUSPENDED if status == "TERMINATED" else state
    )  # a bare word is read as a spot VM's


def test_an_instance_we_deleted_reads_deleting_while_it_stops() -> None:
    part = cs.instance_part(host_from_api(vm("a", "STOPPING")), 0, deleting=True)
    assert (part.state, part.word) == (RequestState.DELETING, "STOPPING")
    assert part.node is not None and part.node.state == NodeState.DELETING


def test_an_instance_node_is_its_addresses_and_marker() -> None:
    seen = cs.look([vm("a", ip="10.1.2.3")], [])
    [request] = seen.requests
    assert (request.name, request.zone, request.api, request.api_kind) == (
        "a", ZONE, "compute", "instance"
    )  # fmt: skip
    assert (request.accelerator, request.mode, request.managed) == ("tpu7x-8", "spot", True)
    assert request.create_time == "2026-12-01T18:00:00Z"
    [node] = seen.nodes
    assert node.ips(internal=True) == ("10.1.2.3",) and node.ips() == ("34.1.2.3",)
    assert seen.up == {(ZONE, "a"): request}
    assert seen.parts == {(ZONE, "a"): (("instances", "a"),)}


def test_a_flex_start_run_says_when_it_ends() -> None:
    ends = {"scheduling": {"terminationTimestamp": "2026-12-01T14:00:00.000-08:00"}}
    [request] = cs.look([vm("f", model="FLEX_START", resourceStatus=ends)], []).requests
    assert (request.mode, request.termination_time) == ("flex-start", "2026-12-01T22:00:00Z")


def test_a_vm_gone_without_our_delete_is_a_preemption_told_once() -> None:
    [before] = cs.look([vm("a")], []).requests
    lost = cs.gone(before)
    assert (lost.state, lost.api_state, lost.ended_by, lost.preempted) == (
        RequestState.SUSPENDED, "DELETED", Initiator.SERVICE, True
    )  # fmt: skip


# --- a MIG slice ----------------------------------------------------------------------------


def slice_of(group: dict[str, Any], hosts: list[Any], **flags: bool) -> cs.Part:
    parsed = group_from_api(group)
    assert parsed is not None
    return cs.group_part(parsed, {h["name"]: host_from_api(h) for h in hosts}, **flags)


@pytest.mark.parametrize(
    ("group", "hosts", "flags", "state", "word", "node"),
    [
        (mig(deleting=4), members(), {}, RequestState.DELETING, "DELETING", NodeState.DELETING),
        (mig(), members(), {"deleting": True}, RequestState.DELETING, "DELETING",
         NodeState.DELETING),
        (mig(topology="FAILED", target=4), [], {}, RequestState.FAILED, "FAILED", None),
        (mig(target=0, topology="INCOMPLETE"), [], {}, RequestState.FAILED, "INCOMPLETE", None),
        (mig(target=0, topology="INCOMPLETE"), [], {"creating": True}, RequestState.WAITING,
         "CREATING", None),
        (mig(creating=4, topology="INCOMPLETE"), [], {}, RequestState.WAITING, "CREATING", None),
        (mig(creating=0, topology="INCOMPLETE"), members(n=3), {}, RequestState.SUSPENDED,
         "INCOMPLETE", NodeState.PREEMPTED),
        (mig(topology="INCOMPLETE"), [*members(n=3), vm("big-3", "TERMINATED", slot="big")], {},
         RequestState.SUSPENDED, "INCOMPLETE", NodeState.PREEMPTED),
        (mig(topology="ACTIVE"), [*members(n=3), vm("big-3", "STOPPING", slot="big")], {},
         RequestState.SUSPENDING, "STOPPING", NodeState.STOPPING),
        (mig(creating=2, topology="ACTIVATING"), members(n=2, status="STAGING"), {},
         RequestState.PROVISIONING, "ACTIVATING", NodeState.CREATING),
        (mig(topology="ACTIVATING"), members(), {}, RequestState.PROVISIONING, "ACTIVATING",
         NodeState.CREATING),
        (mig(topology="ACTIVE"), members(), {}, RequestState.ACTIVE, "ACTIVE", NodeState.READY),
        (mig(topology=None), members(), {}, RequestState.ACTIVE, "ACTIVE", NodeState.READY),
    ],
    ids=[
        "deleting", "deleted-by-us", "bulk-failed", "no-host-asked", "no-host-yet-creating",
        "bulk-waiting", "host-missing", "host-terminated", "host-stopping", "hosts-staging",
        "topology-activating", "active", "active-without-topology",
    ],
)  # fmt: skip
def test_a_mig_slice_state(
    group: dict[str, Any],
    hosts: list[Any],
    flags: dict[str, bool],
    state: RequestState,
    word: str,
    node: NodeState | None,
) -> None:
    part = slice_of(group, hosts, **flags)
    assert (part.state, part.word) == (state, word)
    assert (part.node.state if part.node else None) == node
    if state == RequestState.SUSPENDED:
        assert part.ended_by == Initiator.SERVICE


def test_a_lost_host_of_a_flex_start_slice_is_its_runs_end() -> None:
    hosts = members(status="TERMINATED", model="FLEX_START")
    part = slice_of(mig(mode="flex-start", topology="INCOMPLETE"), hosts)
    assert (part.state, part.ended_by) == (RequestState.ENDED, Initiator.SERVICE)
    assert part.node is not None and part.node.state == NodeState.TERMINATED


def test_a_waiting_bulk_slice_says_why() -> None:
    stockout = {
        "inProgress": True,
        "lastProgressCheck": {
            "error": {"errors": [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": "no room"}]}
        },
    }
    group = mig(creating=4, topology="INCOMPLETE")
    group["status"]["bulkInstanceOperation"] = stockout
    part = slice_of(group, [])
    assert part.error is not None and part.error.message == "ZONE_RESOURCE_POOL_EXHAUSTED: no room"


def test_a_slice_node_is_its_hosts_in_worker_order() -> None:
    hosts = members(n=12)[::-1]  # listed in any order; ten sorts after nine
    seen = cs.look(hosts, [mig(target=12, hosts=12)])
    [request] = seen.requests
    assert (request.name, request.api_kind, request.accelerator) == ("big", "MIG slice", "tpu7x-32")
    [node] = seen.nodes
    assert node.ips(internal=True) == tuple(f"10.0.0.{10 + i}" for i in range(12))
    assert seen.parts == {(ZONE, "big"): (("instanceGroupManagers", "big"),)}
    assert seen.templates == {"big-tpl-abc123"} and seen.up == {}


def test_mig_of_someone_else_is_not_read() -> None:
    theirs = mig()
    theirs["description"] = "a web tier"
    assert group_from_api(theirs) is None
    assert cs.look([], [theirs]).requests == ()


# --- several slices, and what belongs to which slot -------------------------------------------


def test_several_slices_make_one_request_whose_worst_part_decides() -> None:
    parts = [
        vm("m-0", slot="m", slice_=0, slices=3, ip="10.0.0.5"),
        vm("m-1", "STAGING", slot="m", slice_=1, slices=3, ip="10.0.0.6"),
        vm("m-2", slot="m", slice_=2, slices=3, ip="10.0.0.7"),
    ]
    seen = cs.look(parts, [])
    [request] = seen.requests
    assert (request.state, request.api_state, request.slices, request.slice_prefix) == (
        RequestState.PROVISIONING, "STAGING", 3, "m"
    )  # fmt: skip
    observed = Observation(requests=seen.requests, nodes=seen.nodes)
    slot = observed.node_of(request)
    assert slot is not None and [n.name for n in slot.slices] == ["m-0", "m-1", "m-2"]
    assert slot.ips(internal=True) == ("10.0.0.5", "10.0.0.6", "10.0.0.7")
    [lost] = cs.look([parts[0], parts[2]], []).requests  # m-1's VM is gone
    assert (lost.state, lost.api_state, lost.ended_by) == (
        RequestState.SUSPENDED, "DELETED", Initiator.SERVICE
    )  # fmt: skip
    [making] = cs.look([parts[0]], [], creating=frozenset({(ZONE, "m")})).requests
    assert making.state == RequestState.WAITING


def test_two_mig_slices_of_one_slot() -> None:
    groups = [mig("big-0", slice_="0/2"), mig("big-1", slice_="1/2", creating=4,
                                                   topology="INCOMPLETE")]  # fmt: skip
    seen = cs.look(members("big-0"), groups)
    [request] = seen.requests
    assert (request.name, request.slices, request.state) == ("big", 2, RequestState.WAITING)
    assert seen.parts[(ZONE, "big")] == (
        ("instanceGroupManagers", "big-0"), ("instanceGroupManagers", "big-1")
    )  # fmt: skip


def test_a_stray_host_is_its_own_request() -> None:
    stray = vm("old-7", slot="old", slice_=0)  # a host its MIG no longer lists
    [request] = cs.look([stray], []).requests
    assert (request.name, request.slices) == ("old-7", 1)


def test_every_word_maps_onto_a_state() -> None:
    for word in cs.STATE_WORDS:
        assert isinstance(cs.request_state(word), RequestState)
    assert cs.request_state("ACTIVE") == RequestState.ACTIVE
    assert cs.request_state("INCOMPLETE") == RequestState.SUSPENDED
    assert cs.request_state(None) == cs.request_state("NEW") == RequestState.UNKNOWN


def test_a_word_without_its_api_reads_the_same_on_both() -> None:
    """Records that keep only a word (old events, history rows) read through the TPU API's
    mapping, then Compute Engine's: the words both use mean the same state in each."""
    for word in set(tpu_api_parse.STATE_WORDS) & set(cs.STATE_WORDS):
        assert tpu_api_parse.request_state(word) == cs.request_state(word), word
    assert word_state("RUNNING") == RequestState.ACTIVE
    assert word_state("WAITING_FOR_RESOURCES") == RequestState.WAITING
    assert word_state("PENDING") == RequestState.WAITING


def test_a_slice_boots_with_its_templates_setup_and_shows_its_soonest_hosts_window() -> None:
    """``setup.at_boot``: the generation of the startup-script item every host carries; the
    maintenance window a host announces (``resourceStatus.upcomingMaintenance``), the soonest
    one for a slice (it goes down with that host)."""
    script = "#!/bin/bash\n# tpu-reconciler boot setup: slot=big generation=4\n"
    soon = {"windowStartTime": "2026-12-02T10:00:00Z", "maintenanceStatus": "PENDING",
            "type": "SCHEDULED", "canReschedule": True}  # fmt: skip
    late = {**soon, "windowStartTime": "2026-12-03T10:00:00Z"}
    hosts = members(n=4, metadata={"items": [{"key": "startup-script", "value": script}]})
    hosts[1]["resourceStatus"] = {"upcomingMaintenance": late}
    hosts[3]["resourceStatus"] = {"upcomingMaintenance": soon}
    [node] = cs.look(hosts, [mig()]).nodes
    assert node.boot_generation == 4
    assert node.maintenance is not None
    assert (node.maintenance.window_start, node.maintenance.can_reschedule) == (
        "2026-12-02T10:00:00Z",
        True,
    )
    [plain] = cs.look(members(n=4), [mig()]).nodes
    assert (plain.boot_generation, plain.maintenance) == (None, None)
    hosts[2]["metadata"] = {"items": []}  # one host made otherwise: no generation for the slice
    assert cs.look(hosts, [mig()]).nodes[0].boot_generation is None
