"""The REST backend against the emulator: a real HTTP server speaking the TPU v2 API.

No gcloud needed: the token comes from CLOUDSDK_AUTH_ACCESS_TOKEN_FILE and the endpoint from
CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU, exactly as the ``gcloud_env`` fixture sets them.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from reconciler.adapters.auth import AccessTokenFile
from reconciler.adapters.cloud import Outcome
from reconciler.adapters.cloud_errors import QUOTA_DELAY
from reconciler.adapters.rest import RestCloud
from reconciler.adapters.tpu_api_body import create_body
from reconciler.adapters.tpu_api_parse import QRState
from reconciler.emulator import Emulator, Fault, Scenario
from reconciler.errors import PermanentCloudError, TransientCloudError
from reconciler.model.observed import NodeState
from reconciler.model.requests import CreateRequest

pytestmark = pytest.mark.integration

PROJECT = "test-project"
ZONE = "us-central2-b"
ZONES = ("us-central2-b", "europe-west4-a", "us-east1-d", "us-east5-a")
LISTS = ("GET queuedResources.list", "GET nodes.list")
FAST = Scenario.from_yaml("timings: {accept: 1, provision: 2, activate: 5, delete: 3}")


def request(name: str = "spot-v48-usc2b-1", **over: object) -> CreateRequest:
    fields: dict[str, object] = {
        "name": name,
        "zone": ZONE,
        "accelerator": "v4-8",
        "image": "tpu-ubuntu2204-base",
        "mode": "spot",
        "labels": {"managed-by": "tpu-reconciler"},
    }
    fields.update(over)
    return CreateRequest(**fields)  # type: ignore[arg-type]


@pytest.fixture
def emu(make_emulator: Callable[..., Emulator]) -> Emulator:
    return make_emulator(FAST, speed=0, page_size=25)


@pytest.fixture
def env(emu: Emulator, tmp_path: Path) -> dict[str, str]:
    token = tmp_path / "token"
    token.write_text("emulator-token\n", encoding="utf-8")
    return {
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU": emu.url,
        "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": str(token),
        "PATH": "",  # no gcloud: the REST backend must not need it
    }


@pytest.fixture
async def cloud(env: dict[str, str]) -> AsyncIterator[RestCloud]:
    async with RestCloud(PROJECT, env=env, timeout=5.0) as rest:
        yield rest


def lists(emu: Emulator) -> dict[str, int]:
    counts = emu.request_counts()
    return {key: counts[key] for key in counts}


# --- observe ---------------------------------------------------------------------------------


async def test_observe_sees_queued_resources_and_nodes(emu: Emulator, cloud: RestCloud) -> None:
    emu.add_queued_resource(
        ZONE, "a", "v4-32", state="ACTIVE", labels={"managed-by": "tpu-reconciler"}
    )
    emu.add_queued_resource("europe-west4-a", "b", "v4-8")
    seen = await cloud.observe(None)
    a, b = seen.request(ZONE, "a"), seen.request("europe-west4-a", "b")
    assert a is not None and a.api_state == QRState.ACTIVE and a.managed
    assert b is not None and b.api_state == QRState.CREATING and not b.managed
    node = seen.node(ZONE, "a")
    assert node is not None and node.state is NodeState.READY
    assert len(node.ips()) == 4  # v4-32: four workers, worker 0 first
    assert seen.unreachable == frozenset() and seen.zones is None


@pytest.mark.parametrize("slots", [1, 20])
async def test_one_qr_list_and_one_node_list_per_observe(
    emu: Emulator, cloud: RestCloud, slots: int
) -> None:
    for i in range(slots):
        emu.add_queued_resource(ZONES[i % 4], f"q{i}", state="ACTIVE")
    emu.clear_requests()
    seen = await cloud.observe(ZONES[:2])
    assert lists(emu) == {LISTS[0]: 1, LISTS[1]: 1}
    assert all(r.path.endswith(("/locations/-/queuedResources", "/locations/-/nodes"))
               for r in emu.requests())  # fmt: skip
    assert {q.zone for q in seen.requests} <= set(ZONES[:2])


async def test_multislice_slots_cost_the_same_two_lists(emu: Emulator, cloud: RestCloud) -> None:
    for i in range(20):
        emu.add_queued_resource(ZONES[i % 4], f"m{i}", "v4-32", state="ACTIVE", slices=3)
    emu.clear_requests()
    seen = await cloud.observe(None)
    assert lists(emu) == {LISTS[0]: 1, LISTS[1]: 1}
    assert len(seen.nodes) == 60
    for i in range(20):
        node = seen.node(ZONES[i % 4], f"m{i}")  # the slot node: its three slices as one
        assert node is not None and node.state is NodeState.READY
        assert [s.name for s in node.slices] == [f"m{i}-0", f"m{i}-1", f"m{i}-2"]
        assert len(node.ips()) == 12 and all(s.multislice_node for s in node.slices)


async def test_pagination_over_more_than_a_hundred(emu: Emulator, env: dict[str, str]) -> None:
    for i in range(130):
        emu.add_queued_resource(ZONES[i % 4], f"q{i:03d}", state="ACTIVE" if i < 60 else None)
    emu.clear_requests()
    async with RestCloud(PROJECT, env=env, timeout=5.0, page_size=25) as small_pages:
        seen = await small_pages.observe(None)
    assert len(seen.requests) == 130 and len(seen.nodes) == 60
    assert lists(emu) == {LISTS[0]: 6, LISTS[1]: 3}  # 25 a page
    assert all(r.query.get("pageSize") == "25" for r in emu.requests())


async def test_a_poll_is_one_request_per_collection_up_to_a_thousand(
    emu: Emulator, cloud: RestCloud
) -> None:
    for i in range(130):
        emu.add_queued_resource(ZONES[i % 4], f"q{i:03d}", state="ACTIVE" if i < 60 else None)
    emu.clear_requests()
    seen = await cloud.observe(None)
    assert len(seen.requests) == 130 and len(seen.nodes) == 60
    assert lists(emu) == {LISTS[0]: 1, LISTS[1]: 1}


async def test_unreachable_zones_are_unknown_never_empty(emu: Emulator, cloud: RestCloud) -> None:
    emu.add_queued_resource(ZONE, "a", state="ACTIVE")
    emu.add_queued_resource("europe-west4-a", "b", state="ACTIVE")
    emu.set_unreachable("europe-west4-a")
    seen = await cloud.observe(None)
    assert seen.unreachable == frozenset({"europe-west4-a"})
    assert not seen.knows("europe-west4-a") and seen.knows(ZONE)
    assert seen.request("europe-west4-a", "b") is None and seen.request(ZONE, "a") is not None
    asked = await cloud.observe([ZONE, "europe-west4-a"])
    assert asked.unreachable == frozenset({"europe-west4-a"})
    assert not asked.knows("europe-west4-a")
    elsewhere = await cloud.observe([ZONE])
    assert elsewhere.unreachable == frozenset() and elsewhere.knows(ZONE)


# --- create / delete / describe --------------------------------------------------------------


async def test_create_is_done_with_gclouds_body_and_walks_to_active(
    emu: Emulator, cloud: RestCloud
) -> None:
    wanted = request(network="default", valid_until_seconds=3600)
    assert (await cloud.create_request(wanted)).outcome is Outcome.DONE
    (sent,) = [r for r in emu.requests() if r.key == "POST queuedResources.create"]
    assert sent.query["queuedResourceId"] == wanted.name
    assert sent.body == create_body(PROJECT, wanted)
    emu.advance(10)
    found = await cloud.describe_request("tpu", ZONE, wanted.name)
    assert found is not None and found.api_state == QRState.ACTIVE and found.mode == "spot"
    assert found.managed and found.node_name == wanted.name


@pytest.mark.parametrize("mode", ["on-demand", "reserved"])
async def test_create_modes_round_trip(emu: Emulator, cloud: RestCloud, mode: str) -> None:
    assert (await cloud.create_request(request(mode=mode))).outcome is Outcome.DONE
    found = await cloud.describe_request("tpu", ZONE, request().name)
    assert found is not None and found.mode == mode


async def test_creating_what_exists_is_already(emu: Emulator, cloud: RestCloud) -> None:
    assert (await cloud.create_request(request())).outcome is Outcome.DONE
    assert (await cloud.create_request(request())).outcome is Outcome.ALREADY


async def test_deleting_what_is_gone_is_already(cloud: RestCloud) -> None:
    assert (
        await cloud.delete_request("tpu", ZONE, "nothing-here", force=True)
    ).outcome is Outcome.ALREADY
    assert await cloud.describe_request("tpu", ZONE, "nothing-here") is None


async def test_delete_with_a_node_needs_force(emu: Emulator, cloud: RestCloud) -> None:
    emu.add_queued_resource(ZONE, "a", state="ACTIVE")
    with pytest.raises(TransientCloudError) as caught:
        await cloud.delete_request("tpu", ZONE, "a", force=False)
    assert caught.value.status == "FAILED_PRECONDITION"
    assert (await cloud.delete_request("tpu", ZONE, "a", force=True)).outcome is Outcome.DONE
    gone = await cloud.describe_request("tpu", ZONE, "a")
    assert gone is not None and gone.api_state == QRState.DELETING
    emu.advance(10)
    assert await cloud.describe_request("tpu", ZONE, "a") is None


async def test_guest_attributes_one_row_set_per_worker(emu: Emulator, cloud: RestCloud) -> None:
    emu.add_queued_resource(ZONE, "a", "v4-32", state="ACTIVE")
    rows = await cloud.guest_attributes(ZONE, "a", "guest-agent/worker-id")
    assert [(r["worker_id"], r["value"]) for r in rows] == [(i, str(i)) for i in range(4)]


# --- failures --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind", "name"),
    [
        (429, TransientCloudError, "RESOURCE_EXHAUSTED"),
        (503, TransientCloudError, "UNAVAILABLE"),
        ("PERMISSION_DENIED", PermanentCloudError, "PERMISSION_DENIED"),
        ("INVALID_ARGUMENT", PermanentCloudError, "INVALID_ARGUMENT"),
    ],
)
async def test_statuses_are_classified(
    emu: Emulator, cloud: RestCloud, status: int | str, kind: type[Exception], name: str
) -> None:
    emu.inject_fault(Fault(status=status, method="GET", path="/nodes$"))
    with pytest.raises(kind) as caught:
        await cloud.observe(None)
    assert getattr(caught.value, "status", None) == name
    if status == 429:
        assert isinstance(caught.value, TransientCloudError)
        assert caught.value.delay == QUOTA_DELAY
    await cloud.observe(None)  # the fault was for one request only


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (200, '{"queuedResources": [{"name": '),
        (200, "<html><body><h1>Temporarily unavailable</h1></body></html>"),
        (502, "<html><body><h1>502 Bad Gateway</h1></body></html>"),
        (200, '{"queuedResources": "everything"}'),
    ],
)
async def test_garbage_is_transient(
    emu: Emulator, cloud: RestCloud, status: int, body: str
) -> None:
    emu.add_queued_resource(ZONE, "a", state="ACTIVE")
    emu.inject_fault(Fault(status=status, method="GET", path="/queuedResources$", body=body))
    with pytest.raises(TransientCloudError):
        await cloud.observe(None)


async def test_an_operation_that_already_failed_is_classified(
    emu: Emulator, cloud: RestCloud
) -> None:
    emu.inject_fault(
        Fault(
            status=200,
            method="POST",
            body='{"name": "projects/test-project/locations/us-central2-b/operations/x",'
            ' "done": true, "error": {"code": 8, "message": "no capacity"}}',
        )
    )
    with pytest.raises(TransientCloudError) as caught:
        await cloud.create_request(request())
    assert caught.value.status == "RESOURCE_EXHAUSTED"


async def test_a_timeout_is_transient(emu: Emulator, env: dict[str, str]) -> None:
    emu.inject_fault(Fault(status=None, method="GET", path="/nodes$", latency=1.0))
    async with RestCloud(PROJECT, env=env, timeout=0.2) as impatient:
        started = time.monotonic()
        with pytest.raises(TransientCloudError) as caught:
            await impatient.observe(None)
        assert time.monotonic() - started < 0.9
    assert caught.value.status == "DEADLINE_EXCEEDED"


async def test_a_dead_endpoint_is_transient(env: dict[str, str], emu: Emulator) -> None:
    emu.stop()
    async with RestCloud(PROJECT, env=env, timeout=2.0) as orphan:
        with pytest.raises(TransientCloudError):
            await orphan.observe(None)


async def test_401_refreshes_the_token_once_and_retries(emu: Emulator, env: dict[str, str]) -> None:
    emu.add_queued_resource(ZONE, "a", state="ACTIVE")
    tokens = AccessTokenFile(env["CLOUDSDK_AUTH_ACCESS_TOKEN_FILE"])
    async with RestCloud(PROJECT, env=env, token_provider=tokens) as rest:
        await rest.describe_request("tpu", ZONE, "a")
        assert tokens.reads == 1
        emu.clear_requests()
        emu.inject_fault(Fault(status=401, method="GET", path="/queuedResources/a$"))
        found = await rest.describe_request("tpu", ZONE, "a")
    assert found is not None and found.api_state == QRState.ACTIVE
    assert tokens.reads == 2  # exactly one refresh
    assert [r.status for r in emu.requests()] == [401, 200]


async def test_a_second_401_is_reported_not_retried_forever(
    emu: Emulator, cloud: RestCloud
) -> None:
    emu.inject_fault(Fault(status=401, method="GET", path="/queuedResources/a$", count=None))
    with pytest.raises(TransientCloudError) as caught:
        await cloud.describe_request("tpu", ZONE, "a")
    assert caught.value.status == "UNAUTHENTICATED"
    assert emu.request_counts()["GET queuedResources.get"] == 2


# --- cost ------------------------------------------------------------------------------------


async def test_observe_cost_at_forty_slots_over_four_zones(emu: Emulator, cloud: RestCloud) -> None:
    """Measured here: ~7 ms wall and ~4 ms of this thread's CPU per observe (the emulator's
    own CPU, in other threads of this process, excluded); gcloud costs ~0.7 s CPU per call."""
    for i in range(40):
        emu.add_queued_resource(ZONES[i % 4], f"q{i:02d}", state="ACTIVE")
    await cloud.observe(ZONES)  # connect, read the token
    walls, cpus = [], []
    for _ in range(30):
        wall, cpu = time.perf_counter(), time.thread_time()
        seen = await cloud.observe(ZONES)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.thread_time() - cpu)
    assert len(seen.requests) == 40 and len(seen.nodes) == 40
    assert sorted(cpus)[15] < 0.025 and sorted(walls)[15] < 0.1
