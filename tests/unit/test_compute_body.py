"""Compute Engine bodies from a neutral ``CreateRequest`` (``adapters/compute_body.py``):
the scheduling per mode, the names a create makes, the marker every resource carries, and
each body decoded with the google-cloud-compute SDK's message classes (unknown fields
refused), so nothing is sent that the real API would not read."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from google.cloud.compute_v1 import types as sdk

from reconciler.adapters import compute_body as cb
from reconciler.errors import UnsafeName
from reconciler.model.requests import CreateRequest
from tests.fixtures.compute import TPU7X_IMAGE, compute_request

PROJECT = "test-project"
ZONE = "us-central1-c"
IMAGE = TPU7X_IMAGE


def request(name: str = "a", **over: Any) -> CreateRequest:
    return compute_request(name, **over)


def big(**over: Any) -> CreateRequest:
    shape = {"name": "big", "accelerator": "tpu7x-128", "topology": "4x4x4", "hosts": 16}
    return request(**{**shape, **over})


def decoded(message: Any, body: dict[str, Any]) -> Any:
    """``body`` read by the SDK's message class, refusing any field it does not know."""
    return message.from_json(json.dumps(body), ignore_unknown_fields=False)


@pytest.mark.parametrize(
    ("mode", "extra", "scheduling"),
    [
        (
            "spot",
            {},
            {
                "provisioningModel": "SPOT",
                "instanceTerminationAction": "DELETE",
                "onHostMaintenance": "TERMINATE",
                "automaticRestart": False,
            },
        ),
        (
            "on-demand",
            {},
            {"provisioningModel": "STANDARD", "onHostMaintenance": "TERMINATE",
             "automaticRestart": True},
        ),
        (
            "reserved",
            {},
            {
                "provisioningModel": "RESERVATION_BOUND",
                "instanceTerminationAction": "DELETE",
                "onHostMaintenance": "TERMINATE",
                "automaticRestart": True,
            },
        ),
        (
            "flex-start",
            {"max_run_seconds": 14400},
            {
                "provisioningModel": "FLEX_START",
                "instanceTerminationAction": "STOP",
                "onHostMaintenance": "TERMINATE",
                "automaticRestart": False,
                "maxRunDuration": {"seconds": "14400"},
            },
        ),
    ],
)  # fmt: skip
def test_scheduling_per_mode(mode: str, extra: dict[str, Any], scheduling: dict[str, Any]) -> None:
    req = request(mode=mode, **extra)
    assert cb.scheduling(req) == scheduling
    body = cb.instance_body(PROJECT, req, 0, reservation="res-1")
    assert body["scheduling"] == scheduling
    vm = decoded(sdk.Instance, body)
    assert vm.scheduling.provisioning_model == scheduling["provisioningModel"]


def test_a_single_host_is_one_instance_with_the_machine_type_disk_and_marker() -> None:
    body = cb.instance_body(PROJECT, request(), 0)
    vm = decoded(sdk.Instance, body)
    assert vm.name == "a"
    assert vm.machine_type == f"zones/{ZONE}/machineTypes/tpu7x-standard-4t"
    [disk] = body["disks"]
    assert disk["boot"] and disk["autoDelete"]
    assert disk["initializeParams"] == {
        "sourceImage": IMAGE,
        "diskSizeGb": "200",
        "diskType": f"zones/{ZONE}/diskTypes/hyperdisk-balanced",
    }
    assert body["serviceAccounts"] == [
        {"email": "default", "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}
    ]
    assert body["labels"] == {
        "managed-by": "tpu-reconciler",
        "tpu-accelerator": "tpu7x-8",
        "tpu-reconciler-slice": "0",
        "tpu-reconciler-slices": "1",
        "tpu-reconciler-slot": "a",
        "tpu-topology": "2x2x1",
    }
    meta = {i["key"]: i["value"] for i in body["metadata"]["items"]}
    assert meta["tpu-worker-id"] == "0" and meta["tpu-worker-hostnames"] == "a"
    assert body["networkInterfaces"] == [
        {"accessConfigs": [{"name": "External NAT", "type": "ONE_TO_ONE_NAT"}]}
    ]
    assert "params" not in body and "reservationAffinity" not in body


def test_network_subnetwork_and_internal_ips() -> None:
    body = cb.instance_body(PROJECT, request(network="vpc", subnetwork="sub", internal_ips=True), 0)
    assert body["networkInterfaces"] == [
        {"network": "global/networks/vpc", "subnetwork": "regions/us-central1/subnetworks/sub"}
    ]
    full = "projects/host/regions/us-central1/subnetworks/shared"
    body = cb.instance_body(PROJECT, request(subnetwork=full), 0)
    assert body["networkInterfaces"][0]["subnetwork"] == full


def test_v5p_boots_from_pd_balanced_and_v6e_from_hyperdisk() -> None:
    v5p = request(accelerator="v5p-8", machine_type="ct5p-hightpu-4t", topology="2x2x1")
    v6e = request(accelerator="v6e-4", machine_type="ct6e-standard-4t", topology="2x2")
    kinds = [
        cb.instance_body(PROJECT, r, 0)["disks"][0]["initializeParams"]["diskType"]
        for r in (v5p, v6e)
    ]
    assert kinds == [f"zones/{ZONE}/diskTypes/pd-balanced",
                     f"zones/{ZONE}/diskTypes/hyperdisk-balanced"]  # fmt: skip


def test_flex_start_waits_for_its_window_or_seven_days() -> None:
    flex = request(mode="flex-start", max_run_seconds=3600)
    assert cb.instance_body(PROJECT, flex, 0)["params"] == {
        "requestValidForDuration": {"seconds": str(7 * 86400)}
    }
    windowed = dataclasses.replace(flex, valid_until_seconds=7200)
    body = cb.instance_body(PROJECT, windowed, 0)
    assert body["params"] == {"requestValidForDuration": {"seconds": "7200"}}
    decoded(sdk.Instance, body)


def test_reserved_consumes_the_zones_named_reservation_or_is_refused() -> None:
    body = cb.instance_body(PROJECT, request(mode="reserved"), 0, reservation="tpu-res")
    assert body["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["tpu-res"],
    }
    decoded(sdk.Instance, body)
    with pytest.raises(UnsafeName, match=r"settings\.reservations"):
        cb.instance_body(PROJECT, request(mode="reserved"), 0)


def test_a_later_start_cannot_be_queued_on_compute_engine() -> None:
    with pytest.raises(UnsafeName, match="start_after needs api: tpu"):
        cb.instance_body(PROJECT, request(valid_after_seconds=60), 0)
    with pytest.raises(UnsafeName, match="waits for start_at"):
        cb.template_body(big(valid_after_time=2e9), cb.layout(big(), "abc123"))


def test_a_multi_host_slice_is_a_template_a_workload_policy_and_a_bulk_mig() -> None:
    req = big()
    plan = cb.layout(req, "abc123")
    assert (plan.parts, plan.template, plan.policy) == (("big",), "big-tpl-abc123", "big-wp-abc123")
    assert plan.members("big")[:2] == ("big-0", "big-1") and len(plan.members("big")) == 16

    template = cb.template_body(req, plan)
    decoded(sdk.InstanceTemplate, template)
    props = template["properties"]
    assert props["machineType"] == "tpu7x-standard-4t"
    assert props["disks"][0]["initializeParams"]["diskType"] == "hyperdisk-balanced"
    assert "resourcePolicies" not in props  # never a placement policy
    assert cb.described(template["description"]) == {
        "slot": "big",
        "zone": ZONE,
        "policy": "regions/us-central1/resourcePolicies/big-wp-abc123",
    }

    policy = cb.policy_body(req, plan)
    decoded(sdk.ResourcePolicy, policy)
    assert policy["workloadPolicy"] == {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "4x4x4"}

    group = cb.group_body(PROJECT, req, plan, 0)
    decoded(sdk.InstanceGroupManager, group)
    assert group["targetSize"] == 0
    assert group["targetSizePolicy"] == {"mode": "BULK"}
    assert group["instanceLifecyclePolicy"] == {"defaultActionOnFailure": "DO_NOTHING"}
    assert group["resourcePolicies"] == {
        "workloadPolicy": f"projects/{PROJECT}/regions/us-central1/resourcePolicies/big-wp-abc123"
    }
    assert (
        group["instanceTemplate"] == f"projects/{PROJECT}/global/instanceTemplates/big-tpl-abc123"
    )
    facts = cb.described(group["description"])
    assert facts is not None
    assert (facts["slot"], facts["slice"], facts["hosts"], facts["topology"]) == (
        "big", "0/1", "16", "4x4x4"
    )  # fmt: skip

    hosts = cb.create_instances_body(plan, 0)
    decoded(sdk.InstanceGroupManagersCreateInstancesRequest, hosts)
    names = [i["name"] for i in hosts["instances"]]
    assert names == [f"big-{i}" for i in range(16)]
    assert hosts["instances"][7]["preservedState"]["metadata"] == {
        "tpu-worker-id": "7",
        "tpu-worker-hostnames": ",".join(names),
    }


def test_several_slices_name_their_parts_and_hosts() -> None:
    plan = cb.layout(big(slices=2), "abc123")
    assert plan.parts == ("big-0", "big-1")
    assert plan.members("big-1")[-1] == "big-1-15"
    single = cb.layout(request(slices=3), "abc123")
    assert single.parts == ("a-0", "a-1", "a-2") and single.template is None
    body = cb.instance_body(PROJECT, request(slices=3), 2)
    assert body["name"] == "a-2"
    assert (body["labels"]["tpu-reconciler-slice"], body["labels"]["tpu-reconciler-slices"]) == (
        "2", "3"
    )  # fmt: skip


def test_names_that_would_be_refused_are_refused_first() -> None:
    long = "s" + "x" * 60  # 61 characters: fine for a slot, too long for its host "…-15"
    with pytest.raises(UnsafeName, match="too long for its hosts"):
        cb.layout(big(name=long), "abc123")
    with pytest.raises(UnsafeName, match="create token"):
        cb.layout(request(), "ABC")
    with pytest.raises(UnsafeName, match="machine type"):
        cb.instance_body(PROJECT, request(machine_type="ct5lp-hightpu-4t"), 0)
    with pytest.raises(UnsafeName, match="mode"):
        cb.scheduling(request(mode="cheap"))


def test_descriptions_round_trip_and_others_are_not_ours() -> None:
    text = cb.describe(slot="a", slice="0/2", policy=None, hosts=4)
    assert text == "tpu-reconciler: slot=a slice=0/2 hosts=4"
    assert cb.described(text) == {"slot": "a", "slice": "0/2", "hosts": "4"}
    assert cb.described("made by hand") is None and cb.described(None) is None


def test_setup_at_boot_rides_in_the_instance_and_the_templates_metadata() -> None:
    """``setup.at_boot``: the startup script and guest attributes in the single host's and the
    template's ``metadata.items`` (every MIG host gets them), read back by the SDK."""
    script = "#!/bin/bash\n# tpu-reconciler boot setup: slot=a generation=3\necho hi\n"
    single = cb.instance_body(PROJECT, request(startup_script=script), 0)
    items = {i.key: i.value for i in decoded(sdk.Instance, single).metadata.items}
    assert items["startup-script"] == script and items["enable-guest-attributes"] == "TRUE"
    assert items["tpu-worker-id"] == "0"  # the script's worker index

    req = big(startup_script=script)
    template = decoded(sdk.InstanceTemplate, cb.template_body(req, cb.layout(req, "abc123")))
    items = {i.key: i.value for i in template.properties.metadata.items}
    assert items["startup-script"] == script and items["enable-guest-attributes"] == "TRUE"

    for body in (
        cb.instance_body(PROJECT, request(), 0),
        cb.template_body(big(), cb.layout(big(), "abc123"))["properties"],
    ):
        assert not {"startup-script", "enable-guest-attributes"} & {
            i["key"] for i in body["metadata"]["items"]
        }  # without at_boot: none
