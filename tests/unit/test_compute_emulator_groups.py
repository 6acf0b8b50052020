"""The emulated Compute Engine's workload policies, instance templates and managed instance
groups: a TPU7x slice as a BULK MIG with a workload policy, all hosts or none, its topology's
states, member preemption with DO_NOTHING and REPAIR, and the refusals Google gives. Every
exchange is decoded by the SDK's message classes when each test ends (the ``ce`` fixture)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.compute import REGION, ZONE, ComputeApi

MIGS = f"regions/{REGION}/instanceGroupManagers"
POLICIES = f"regions/{REGION}/resourcePolicies"
TEMPLATES = "global/instanceTemplates"


def workload(name: str, topology: str | None = "4x4x4", **extra: Any) -> dict[str, Any]:
    policy: dict[str, Any] = {"type": "HIGH_THROUGHPUT", **extra}
    if topology:
        policy["acceleratorTopology"] = topology
    return {"name": name, "region": REGION, "workloadPolicy": policy}


def template(name: str, machine: str = "tpu7x-standard-4t", **props: Any) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "machineType": machine,
        "disks": [{"boot": True, "autoDelete": True,
                   "initializeParams": {"diskSizeGb": "200", "diskType": "hyperdisk-balanced"}}],
        "networkInterfaces": [{"network": "global/networks/default"}],
        "scheduling": {"provisioningModel": "SPOT", "instanceTerminationAction": "DELETE",
                       "onHostMaintenance": "TERMINATE"},
        "labels": {"tpu-reconciler": "owned"},
        **props,
    }  # fmt: skip
    return {"name": name, "properties": properties}


def slice_mig(
    name: str, policy: str | None = "wp", tpl: str = "tpl", **extra: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "versions": [{"instanceTemplate": f"{TEMPLATES}/{tpl}"}],
        "targetSize": 0,
        "targetSizePolicy": {"mode": "BULK"},
        "instanceLifecyclePolicy": {"defaultActionOnFailure": "DO_NOTHING"},
        "distributionPolicy": {
            "zones": [{"zone": f"zones/{ZONE}"}],
            "targetShape": "ANY_SINGLE_ZONE",
        },
        "updatePolicy": {"instanceRedistributionType": "NONE"},
        **extra,
    }
    if policy:
        body["resourcePolicies"] = {"workloadPolicy": f"projects/test-project/{POLICIES}/{policy}"}
    return body


def hosts(n: int = 16) -> dict[str, Any]:
    return {"instances": [{"name": f"s-{i}"} for i in range(n)]}


def make_slice(ce: ComputeApi, *, action: str = "DO_NOTHING", topology: str = "4x4x4") -> None:
    ce.ok(ce.post(POLICIES, workload("wp", topology)))
    ce.ok(ce.post(TEMPLATES, template("tpl")))
    lifecycle = {"defaultActionOnFailure": action}
    ce.ok(ce.post(MIGS, slice_mig("slice", instanceLifecyclePolicy=lifecycle)))


def state(ce: ComputeApi) -> str:
    status = ce.ok(ce.get(f"{MIGS}/slice"))["status"]
    return str(status["appliedAcceleratorTopologies"][0]["state"])


def members(ce: ComputeApi) -> list[dict[str, Any]]:
    listed = ce.ok(ce.post(f"{MIGS}/slice/listManagedInstances"))
    return list(listed.get("managedInstances", []))


def test_a_workload_policy_is_creating_then_ready_and_refuses_its_bad_shapes(
    ce: ComputeApi,
) -> None:
    op = ce.ok(ce.post(POLICIES, workload("wp")))
    assert op["region"].endswith(f"/regions/{REGION}")
    assert ce.ok(ce.get(f"{POLICIES}/wp"))["status"] == "CREATING"
    ce.emu.advance(1)
    got = ce.ok(ce.get(f"{POLICIES}/wp"))
    assert got["status"] == "READY" and ce.op(op)["status"] == "DONE"
    assert got["workloadPolicy"] == {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "4x4x4"}
    both = ce.post(POLICIES, workload("x", maxTopologyDistance="BLOCK"))
    assert both.status_code == 400 and "cannot both be set" in both.json()["error"]["message"]
    available = ce.post(POLICIES, workload("y", type="HIGH_AVAILABILITY"))
    assert available.status_code == 400
    assert ce.post(POLICIES, workload("wp")).status_code == 409
    listed = ce.ok(ce.get(POLICIES))
    assert [p["name"] for p in listed["items"]] == ["wp"]


def test_templates_global_and_regional(ce: ComputeApi) -> None:
    ce.ok(ce.post(TEMPLATES, template("g")))
    ce.ok(ce.post(f"regions/{REGION}/instanceTemplates", template("r")))
    assert ce.ok(ce.get(f"{TEMPLATES}/g"))["properties"]["machineType"] == "tpu7x-standard-4t"
    regional = ce.ok(ce.get(f"regions/{REGION}/instanceTemplates/r"))
    assert regional["region"].endswith(f"/regions/{REGION}")
    assert [t["name"] for t in ce.ok(ce.get(TEMPLATES))["items"]] == ["g"]
    ce.ok(ce.delete(f"regions/{REGION}/instanceTemplates/r"))
    assert ce.get(f"regions/{REGION}/instanceTemplates/r").status_code == 404


def test_a_tpu7x_slice_is_created_whole_only_when_its_capacity_is_free(ce: ComputeApi) -> None:
    ce.emu.compute.set_capacity(ZONE, "tpu7x-standard-4t", 15)
    make_slice(ce)
    ce.emu.advance(1)
    ce.ok(ce.post(f"{MIGS}/slice/createInstances", hosts()))
    ce.emu.advance(30)
    mig = ce.ok(ce.get(f"{MIGS}/slice"))
    assert mig["targetSize"] == 16 and mig["currentActions"]["creating"] == 16
    assert mig["status"]["isStable"] is False
    bulk = mig["status"]["bulkInstanceOperation"]
    assert bulk["inProgress"] is True
    assert bulk["lastProgressCheck"]["error"]["errors"][0]["code"] == "ZONE_RESOURCE_POOL_EXHAUSTED"
    assert state(ce) == "INCOMPLETE"
    assert ce.emu.compute.instances() == []  # not one host while the slice cannot be whole
    assert [m["currentAction"] for m in members(ce)] == ["CREATING"] * 16

    ce.emu.compute.set_capacity(ZONE, "tpu7x-standard-4t", 16)
    assert {i["status"] for i in ce.emu.compute.instances()} == {"PROVISIONING"}
    assert state(ce) == "ACTIVATING"
    ce.emu.advance(2)
    assert state(ce) == "ACTIVATING"  # every host runs; the topology is being activated
    ce.emu.advance(2)
    mig = ce.ok(ce.get(f"{MIGS}/slice"))
    assert mig["status"]["appliedAcceleratorTopologies"] == [
        {"acceleratorTopology": "4x4x4", "state": "ACTIVE"}
    ]
    assert mig["status"]["isStable"] is True
    assert mig["status"]["currentInstanceStatuses"]["running"] == 16
    listed = members(ce)
    assert [m["name"] for m in listed] == [f"s-{i}" for i in range(16)]
    assert {(m["instanceStatus"], m["currentAction"]) for m in listed} == {("RUNNING", "NONE")}
    ips = [ce.instance(f"s-{i}")["networkInterfaces"][0]["networkIP"] for i in range(16)]
    assert len(set(ips)) == 16 and all(ip.startswith("127.0.0.") for ip in ips)


@pytest.mark.parametrize(("action", "repaired"), [("DO_NOTHING", False), ("REPAIR", True)])
def test_a_preempted_host_leaves_the_slice_incomplete_or_is_repaired(
    ce: ComputeApi, action: str, repaired: bool
) -> None:
    make_slice(ce, action=action, topology="2x2x2")  # 8 chips: 2 hosts
    ce.ok(ce.post(f"{MIGS}/slice/createInstances", hosts(2)))
    ce.emu.advance(5)
    assert state(ce) == "ACTIVE"
    op = ce.emu.compute.preempt_member(REGION, "slice", 1)
    assert op["targetLink"].endswith(f"/zones/{ZONE}/instances/s-1")
    ce.emu.advance(1)  # DELETE: the host is gone
    if not repaired:
        assert state(ce) == "INCOMPLETE"
        assert [m.get("instanceStatus") for m in members(ce)] == ["RUNNING", None]
        status = ce.ok(ce.get(f"{MIGS}/slice"))["status"]
        assert status["currentInstanceStatuses"]["nonExistent"] == 1
        assert ce.ok(ce.get(f"{MIGS}/slice"))["targetSize"] == 2
        return
    assert state(ce) == "REACTIVATING"
    assert [m["currentAction"] for m in members(ce)] == ["NONE", "RECREATING"]
    ce.emu.advance(2)
    assert state(ce) == "REACTIVATING"
    ce.emu.advance(2)
    assert state(ce) == "ACTIVE"
    assert ce.instance("s-1")["status"] == "RUNNING"


def test_a_failed_bulk_creation_fails_the_topology_and_rolls_back(ce: ComputeApi) -> None:
    make_slice(ce, topology="2x2x2")
    ce.ok(ce.post(f"{MIGS}/slice/createInstances", hosts(2)))
    ce.emu.advance(1)
    ce.emu.compute.fail_bulk(
        REGION, "slice", "s-1", code="INTERNAL_ERROR", message="host s-1 broke"
    )
    ce.emu.advance(1)
    mig = ce.ok(ce.get(f"{MIGS}/slice"))
    [applied] = mig["status"]["appliedAcceleratorTopologies"]
    assert applied["state"] == "FAILED"
    assert applied["stateDetails"]["error"]["errors"] == [
        {"code": "INTERNAL_ERROR", "message": "host s-1 broke"}
    ]
    listed = members(ce)
    assert listed[1]["lastAttempt"]["errors"]["errors"][0]["message"] == "host s-1 broke"
    assert "lastAttempt" not in listed[0]
    assert ce.emu.compute.instances() == []  # all or nothing


@pytest.mark.parametrize(
    ("policy_body", "template_props", "words"),
    [
        (None, {}, "Creation of a managed instance group with tpu7x-standard-4t machine type "
         "with placement policy is not supported. Use workload policy instead."),
        (workload("wp", None), {}, "does not support TPU topology with group placement policy "
         "and workload policy at the same time"),
        ("placement", {"resourcePolicies": ["compact"]}, "Creation of a managed instance group "
         "with tpu7x-standard-4t machine type with placement policy is not supported."),
    ],
)  # fmt: skip
def test_tpu7x_groups_google_refuses(
    ce: ComputeApi, policy_body: Any, template_props: dict[str, Any], words: str
) -> None:
    if policy_body == "placement":
        ce.ok(ce.post(POLICIES, workload("wp")))
        compact = {"name": "compact", "groupPlacementPolicy": {"collocation": "COLLOCATED"}}
        ce.ok(ce.post(POLICIES, compact))
    elif policy_body is not None:
        ce.ok(ce.post(POLICIES, policy_body))
    ce.ok(ce.post(TEMPLATES, template("tpl", **template_props)))
    body = slice_mig("slice", None if policy_body is None else "wp", targetSize=16)
    refused = ce.post(MIGS, body)
    assert refused.status_code == 400, refused.text
    assert words in refused.json()["error"]["message"]
    assert ce.get(f"{MIGS}/slice").status_code == 404


def test_sizes_past_the_topology_are_refused_and_single_host_groups_need_no_policy(
    ce: ComputeApi,
) -> None:
    make_slice(ce, topology="2x2x2")
    too_many = ce.post(f"{MIGS}/slice/createInstances", hosts(3))
    assert too_many.status_code == 400 and "2 hosts" in too_many.json()["error"]["message"]
    ce.ok(ce.post(TEMPLATES, template("one", "tpu7x-standard-1t")))
    single = slice_mig("single", None, tpl="one", targetSize=1)
    del single["distributionPolicy"]  # a zonal group has its zone
    ce.ok(ce.post(f"zones/{ZONE}/instanceGroupManagers", single))
    ce.emu.advance(3)
    zonal = ce.ok(ce.post(f"zones/{ZONE}/instanceGroupManagers/single/listManagedInstances"))
    [member] = zonal["managedInstances"]
    assert member["instanceStatus"] == "RUNNING" and member["name"].startswith("single-")


def test_delete_instances_resize_and_delete_tear_a_group_down(ce: ComputeApi) -> None:
    make_slice(ce)
    ce.ok(ce.post(f"{MIGS}/slice/createInstances", hosts(4)))
    ce.emu.advance(3)
    urls = [f"zones/{ZONE}/instances/s-3"]
    ce.ok(ce.post(f"{MIGS}/slice/deleteInstances", {"instances": urls}))
    assert [m["currentAction"] for m in members(ce)][-1] == "DELETING"
    ce.emu.advance(1)
    assert [m["name"] for m in members(ce)] == ["s-0", "s-1", "s-2"]
    ce.ok(ce.post(f"{MIGS}/slice/resize", size=1))
    ce.emu.advance(1)
    assert [m["name"] for m in members(ce)] == ["s-0"]
    assert ce.ok(ce.get(f"{MIGS}/slice"))["targetSize"] == 1
    in_use = ce.delete(f"{POLICIES}/wp")
    assert in_use.status_code == 400
    assert in_use.json()["error"]["errors"][0]["reason"] == "resourceInUseByAnotherResource"
    assert ce.delete(f"{TEMPLATES}/tpl").status_code == 400
    op = ce.ok(ce.delete(f"{MIGS}/slice"))
    assert ce.ok(ce.get(f"{MIGS}/slice"))["currentActions"]["deleting"] == 1
    ce.emu.advance(1)
    assert ce.get(f"{MIGS}/slice").status_code == 404
    assert ce.op(op)["status"] == "DONE"
    assert ce.emu.compute.instances() == []
    ce.ok(ce.delete(f"{TEMPLATES}/tpl"))
    ce.ok(ce.delete(f"{POLICIES}/wp"))
    assert (
        ce.ok(ce.get("aggregated/instanceGroupManagers"))["items"][f"regions/{REGION}"]["warning"][
            "code"
        ]
        == "NO_RESULTS_ON_PAGE"
    )


def test_quota_holds_a_bulk_slice_back_until_it_fits(ce: ComputeApi) -> None:
    ce.emu.compute.set_quota("tpu7x", "preemptible", REGION, 4)
    make_slice(ce, topology="2x2x2")
    ce.ok(ce.post(f"{MIGS}/slice/createInstances", hosts(2)))
    ce.emu.advance(5)
    error = ce.ok(ce.get(f"{MIGS}/slice"))["status"]["bulkInstanceOperation"]["lastProgressCheck"]
    assert error["error"]["errors"][0]["code"] == "QUOTA_EXCEEDED"
    assert ce.emu.compute.instances() == []
    ce.emu.compute.set_quota("tpu7x", "preemptible", REGION, 8)
    ce.emu.advance(5)
    assert state(ce) == "ACTIVE"


def test_a_resize_request_is_accepted_then_succeeds_when_every_host_fits(ce: ComputeApi) -> None:
    ce.ok(ce.post(TEMPLATES, template("gpu-like", "ct6e-standard-4t")))
    mig = {"name": "dws", "instanceTemplate": f"{TEMPLATES}/gpu-like", "targetSize": 0,
           "instanceLifecyclePolicy": {"defaultActionOnFailure": "DO_NOTHING"}}  # fmt: skip
    zonal = f"zones/{ZONE}/instanceGroupManagers/dws"
    ce.ok(ce.post(f"zones/{ZONE}/instanceGroupManagers", mig))
    ce.emu.compute.set_capacity(ZONE, "ct6e-standard-4t", 1)
    body = {"name": "r1", "instances": [{"name": "w-0"}, {"name": "w-1"}],
            "requestedRunDuration": {"seconds": "3600"}}  # fmt: skip
    op = ce.ok(ce.post(f"{zonal}/resizeRequests", body))
    assert op["operationType"] == "compute.instanceGroupManagers.createResizeRequest"
    assert ce.ok(ce.get(f"{zonal}/resizeRequests/r1"))["state"] == "CREATING"
    ce.emu.advance(1)
    waiting = ce.ok(ce.get(f"{zonal}/resizeRequests/r1"))
    assert waiting["state"] == "ACCEPTED"
    assert waiting["status"]["lastAttempt"]["error"]["errors"][0]["code"] == (
        "ZONE_RESOURCE_POOL_EXHAUSTED"
    )
    assert ce.emu.compute.instances() == []
    ce.emu.compute.set_capacity(ZONE, "ct6e-standard-4t", 2)
    done = ce.ok(ce.get(f"{zonal}/resizeRequests/r1"))
    assert done["state"] == "SUCCEEDED" and "status" not in done
    assert ce.ok(ce.get(zonal))["targetSize"] == 2
    ce.emu.advance(2 + 3600)  # running, then deleted at the end of the requested run
    assert ce.instance("w-0")["status"] == "STOPPING"
    ce.emu.advance(1)
    assert ce.get(f"zones/{ZONE}/instances/w-0").status_code == 404

    for name in ("r2", "r3"):
        queued = {"name": name, "resizeBy": 4, "requestedRunDuration": {"seconds": "600"}}
        ce.ok(ce.post(f"{zonal}/resizeRequests", queued))
    ce.emu.compute.set_capacity(ZONE, "ct6e-standard-4t", 0)
    ce.emu.advance(1)
    assert ce.delete(f"{zonal}/resizeRequests/r2").status_code == 400  # not final yet
    ce.ok(ce.post(f"{zonal}/resizeRequests/r2/cancel"))
    ce.emu.compute.fail_resize_request(ZONE, "dws", "r3", message="no luck")
    listed = ce.ok(ce.get(f"{zonal}/resizeRequests"))["items"]
    assert [(r["name"], r["state"]) for r in listed] == [
        ("r1", "SUCCEEDED"), ("r2", "CANCELLED"), ("r3", "FAILED")
    ]  # fmt: skip
    assert listed[2]["status"] == {
        "error": {"errors": [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": "no luck"}]}
    }
    ce.ok(ce.delete(f"{zonal}/resizeRequests/r2"))
    both = {"name": "bad", "resizeBy": 1, "instances": [{"name": "x"}],
            "requestedRunDuration": {"seconds": "600"}}  # fmt: skip
    assert ce.post(f"{zonal}/resizeRequests", both).status_code == 400
    short = {"name": "bad", "resizeBy": 1, "requestedRunDuration": {"seconds": "60"}}
    assert ce.post(f"{zonal}/resizeRequests", short).status_code == 400
    assert ce.post(f"{zonal}/resizeRequests", {"name": "bad", "resizeBy": 1}).status_code == 400
