"""Contract: GcloudCloud driving the real gcloud against the emulator.

Every Cloud call and every failure class, with as few gcloud runs as that takes (each costs
about 0.7 s of CPU). Fault injections target one path with ``count=None`` so that gcloud's own
retries cannot slip past them; 5xx are avoided because gcloud retries those for ~30 s.
"""

from __future__ import annotations

import pytest

from reconciler.adapters.cloud import Outcome
from reconciler.adapters.gcloud import GcloudCloud
from reconciler.adapters.tpu_api_parse import QRState
from reconciler.emulator import Emulator, Fault
from reconciler.errors import PermanentCloudError, TransientCloudError
from reconciler.model.observed import NodeState
from reconciler.model.requests import CreateRequest
from tests.support.tools import require_tool

pytestmark = pytest.mark.integration

ZONE_A, ZONE_B, ZONE_C = "us-central2-b", "europe-west4-a", "us-east1-d"
LISTS = ("GET queuedResources.list", "GET nodes.list")


@pytest.fixture
def cloud(gcloud_env: dict[str, str]) -> GcloudCloud:
    return GcloudCloud("test-project", gcloud=require_tool("gcloud"), env=gcloud_env)


def list_paths(emulator: Emulator) -> list[str]:
    return sorted(r.path for r in emulator.requests() if r.key in LISTS)


async def test_observe_costs_two_lists_per_zone_whatever_the_slot_count(
    emulator: Emulator, cloud: GcloudCloud
) -> None:
    emulator.set_speed(0)  # freeze the world: gcloud's ~1 s per call must not move QRs along
    emulator.add_queued_resource(ZONE_A, "solo", state="ACTIVE")
    for i in range(6):
        emulator.add_queued_resource(ZONE_B, f"many-{i}", state="ACTIVE" if i < 3 else None)

    seen = await cloud.observe([ZONE_A, ZONE_B])
    assert seen.zones == frozenset({ZONE_A, ZONE_B}) and not seen.unreachable
    assert len(seen.requests) == 7 and len(seen.nodes) == 4
    solo = seen.node(ZONE_A, "solo")
    assert solo is not None and solo.state is NodeState.READY and solo.ips()
    counts = emulator.request_counts()
    assert [counts[key] for key in LISTS] == [2, 2]  # 1 slot and 6 slots: one list each
    prefix = "/v2/projects/test-project/locations"
    assert list_paths(emulator) == sorted(
        f"{prefix}/{zone}/{kind}"
        for zone in (ZONE_A, ZONE_B)
        for kind in ("nodes", "queuedResources")
    )

    emulator.clear_requests()
    everything = await cloud.observe(None)
    assert everything.zones is None and everything.knows(ZONE_C)
    assert {q.key for q in everything.requests} == {q.key for q in seen.requests}
    assert list_paths(emulator) == [f"{prefix}/-/nodes", f"{prefix}/-/queuedResources"]


async def test_a_failing_zone_lands_in_unreachable(emulator: Emulator, cloud: GcloudCloud) -> None:
    emulator.add_queued_resource(ZONE_A, "a", state="ACTIVE")
    emulator.add_queued_resource(ZONE_B, "b", state="ACTIVE")
    emulator.inject_fault(Fault(status=429, path=f"/locations/{ZONE_B}/nodes", count=None))
    seen = await cloud.observe([ZONE_A, ZONE_B])
    assert seen.unreachable == {ZONE_B}
    assert seen.knows(ZONE_A) and not seen.knows(ZONE_B)
    assert seen.request(ZONE_A, "a") is not None and seen.request(ZONE_B, "b") is None


async def test_create_carries_the_request_and_is_idempotent(
    emulator: Emulator, cloud: GcloudCloud
) -> None:
    request = CreateRequest(
        name="spot-v48-usc2b-1",
        zone=ZONE_A,
        accelerator="v4-8",
        image="tpu-ubuntu2204-base",
        mode="spot",
        network="net-a",
        subnetwork="sub-a",
        internal_ips=True,
        valid_until_seconds=600,
        labels={"managed-by": "tpu-reconciler", "slot": "spot-v48-usc2b-1"},
    )
    assert (await cloud.create_request(request)).outcome is Outcome.DONE
    (post,) = [r for r in emulator.requests() if r.key == "POST queuedResources.create"]
    assert post.query["queuedResourceId"] == "spot-v48-usc2b-1"
    assert "spot" in post.body and post.body["queueingPolicy"] == {"validUntilDuration": "600s"}
    (spec,) = post.body["tpu"]["nodeSpec"]
    assert spec["nodeId"] == "spot-v48-usc2b-1"
    node = spec["node"]
    assert node["acceleratorType"] == "v4-8"
    assert node["runtimeVersion"] == "tpu-ubuntu2204-base"
    assert node["labels"] == {"managed-by": "tpu-reconciler", "slot": "spot-v48-usc2b-1"}
    assert node["networkConfig"] == {
        "network": "net-a",
        "subnetwork": "sub-a",
        "enableExternalIps": False,
    }
    created = emulator.queued_resource(ZONE_A, "spot-v48-usc2b-1")
    assert created is not None

    assert (await cloud.create_request(request)).outcome is Outcome.ALREADY


async def test_describe_reserved_and_missing(emulator: Emulator, cloud: GcloudCloud) -> None:
    reserved = CreateRequest(
        name="res-a", zone=ZONE_A, accelerator="v4-8", image="rt-1", mode="reserved"
    )
    assert (await cloud.create_request(reserved)).outcome is Outcome.DONE
    described = await cloud.describe_request("tpu", ZONE_A, "res-a")
    assert described is not None
    assert (described.mode, described.image) == ("reserved", "rt-1")
    assert described.api_state in {QRState.CREATING, QRState.ACCEPTED, QRState.PROVISIONING}
    assert await cloud.describe_request("tpu", ZONE_A, "missing") is None


async def test_delete_needs_force_while_a_node_exists(
    emulator: Emulator, cloud: GcloudCloud
) -> None:
    emulator.add_queued_resource(ZONE_A, "busy", state="ACTIVE")
    with pytest.raises(TransientCloudError, match="FAILED_PRECONDITION") as refused:
        await cloud.delete_request("tpu", ZONE_A, "busy", force=False)
    assert refused.value.status == "FAILED_PRECONDITION"
    assert (await cloud.delete_request("tpu", ZONE_A, "busy", force=True)).outcome is Outcome.DONE
    deleting = emulator.queued_resource(ZONE_A, "busy")
    assert deleting is None or deleting["state"]["state"] == "DELETING"
    assert (
        await cloud.delete_request("tpu", ZONE_A, "never-was", force=True)
    ).outcome is Outcome.ALREADY


async def test_guest_attributes(emulator: Emulator, cloud: GcloudCloud) -> None:
    emulator.add_queued_resource(ZONE_A, "ga", state="ACTIVE")
    rows = await cloud.guest_attributes(ZONE_A, "ga")
    assert rows and all({"namespace", "key", "value", "worker_id"} <= row.keys() for row in rows)


@pytest.mark.parametrize(
    ("fault", "error", "status"),
    [
        (Fault(status=429, count=None), TransientCloudError, "RESOURCE_EXHAUSTED"),
        (Fault(status="PERMISSION_DENIED", count=None), PermanentCloudError, "PERMISSION_DENIED"),
        (Fault(status=200, body="garbage {", count=None), TransientCloudError, None),
    ],
    ids=["429", "permission-denied", "garbage"],
)
async def test_failure_classes(
    emulator: Emulator, cloud: GcloudCloud, fault: Fault, error: type[Exception], status: str | None
) -> None:
    emulator.inject_fault(fault)
    with pytest.raises(error) as caught:
        await cloud.describe_request("tpu", ZONE_A, "anything")
    assert type(caught.value) is error
    assert getattr(caught.value, "status", None) == status


async def test_a_slow_api_times_out_transiently(
    emulator: Emulator, gcloud_env: dict[str, str]
) -> None:
    emulator.set_latency(20)
    cloud = GcloudCloud("test-project", gcloud=require_tool("gcloud"), env=gcloud_env, timeout=3)
    with pytest.raises(TransientCloudError, match="timed out after 3s"):
        await cloud.describe_request("tpu", ZONE_A, "slow")
    emulator.set_latency(0)
