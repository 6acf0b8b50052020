"""The Compute Engine cloud (``adapters/compute.py``) against the emulator with its clock in
hand: a look costs two list calls whatever the number of slots, a create's steps and their
undo, a name another slot holds, the sweep of templates and policies no MIG uses, deletes,
operations read back, and how each refusal is classified. Every exchange is decoded with the
SDK's message classes when a test ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

import pytest

from reconciler.adapters import compute as compute_mod
from reconciler.adapters.auth import EnvAccessToken
from reconciler.adapters.cloud import Outcome
from reconciler.adapters.cloud_errors import Operation
from reconciler.adapters.cloud_router import CloudRouter
from reconciler.adapters.compute import ComputeCloud, check_operation_name, compute_endpoint
from reconciler.adapters.compute_errors import classify_compute
from reconciler.emulator import Emulator, Scenario
from reconciler.errors import (
    PermanentCloudError,
    QuotaExceeded,
    TransientCloudError,
    UnsafeName,
)
from reconciler.model.boot_script import boot_generation, startup_script
from reconciler.model.capacity import RequestState
from reconciler.model.desired import SlotSpec
from reconciler.model.requests import CreateRequest
from reconciler.runtime.backends import cloud_key, make_cloud
from tests.fixtures.compute import TPU7X_IMAGE, compute_request
from tests.support.compute_sdk import decode_all
from tests.support.worlds import desired, slot

T = TypeVar("T")
ZONE = "us-central1-c"
REGION = "us-central1"
IMAGE = TPU7X_IMAGE
FAST = Scenario.from_yaml(
    "compute_timings: {operation: 1, provision: 1, stage: 1, stop: 1, delete: 1, policy: 1,"
    " activate: 1}"
)


def request(name: str = "a", **over: Any) -> CreateRequest:
    return compute_request(name, **over)


def slice_request(name: str = "s", **over: Any) -> CreateRequest:
    return request(name, accelerator="tpu7x-16", topology="2x2x2", hosts=2, **over)


@pytest.fixture
async def emu(make_emulator: Callable[..., Emulator]) -> AsyncIterator[Emulator]:
    emulator = make_emulator(FAST, speed=0, record_responses=True)
    yield emulator
    decode_all(emulator.requests())


@pytest.fixture
async def cloud(emu: Emulator) -> AsyncIterator[ComputeCloud]:
    c = ComputeCloud(
        "test-project",
        endpoint=emu.url,
        token_provider=EnvAccessToken("t"),
        quota_project="billing-project",
        page_size=3,
        reservations={ZONE: "tpu-res"},
    )
    yield c
    await c.aclose()


async def driven(emu: Emulator, work: Awaitable[T], step: float = 1.0) -> T:
    """``work`` while the emulator's clock moves ``step`` seconds every few milliseconds."""
    task = asyncio.ensure_future(work)
    for _ in range(2000):
        if task.done():
            break
        await asyncio.sleep(0.005)
        emu.advance(step)
    return await task


def calls(emu: Emulator, since: int = 0) -> list[str]:
    return [r.key for r in emu.requests()[since:]]


async def settle_sweep(cloud: ComputeCloud, emu: Emulator) -> None:
    sweep = cloud._sweep  # the background sweep a look started
    if sweep is not None:
        await driven(emu, sweep)


# --- the look ---------------------------------------------------------------------------------


async def test_a_look_is_two_lists_whatever_the_number_of_slots(
    cloud: ComputeCloud, emu: Emulator
) -> None:
    for i in range(7):  # seven VMs over three pages each way
        await cloud.create_request(request(f"v{i}"))
    await driven(emu, cloud.create_request(slice_request()))
    await settle_sweep(cloud, emu)
    before = len(emu.requests())
    look = await cloud.observe(None)
    assert sorted(r.name for r in look.requests) == ["s", *[f"v{i}" for i in range(7)]]
    keys = calls(emu, before)
    assert set(keys) == {
        "GET compute.instances.aggregatedList",
        "GET compute.instanceGroupManagers.aggregatedList",
    }
    assert keys.count("GET compute.instances.aggregatedList") == 3  # 9 VMs, 3 a page
    listed = [r for r in emu.requests()[before:] if "instances.aggregated" in r.key]
    assert listed[0].query["filter"] == "labels.managed-by = tpu-reconciler"
    assert {r.user_project for r in emu.requests()} == {"billing-project"}


async def test_observe_keeps_to_the_zones_asked_and_reports_unreachable_ones(
    cloud: ComputeCloud, emu: Emulator
) -> None:
    await cloud.create_request(request("a"))
    look = await cloud.observe(["us-east5-a"])
    assert look.requests == () and look.zones == frozenset({"us-east5-a"})
    assert look.knows("us-east5-a") and not look.knows(ZONE)


# --- creates ----------------------------------------------------------------------------------


async def test_a_single_host_create_returns_its_operation_and_is_idempotent(
    cloud: ComputeCloud, emu: Emulator
) -> None:
    done = await cloud.create_request(request("a"))
    assert done.outcome == Outcome.DONE and done.operation is not None
    assert check_operation_name(done.operation) == done.operation
    status = await cloud.get_operation(done.operation)
    assert status is not None and not status.done
    again = await cloud.create_request(request("a"))  # 409: already this slot's
    assert again.outcome == Outcome.ALREADY
    inserts = [r for r in emu.requests() if r.key == "POST compute.instances.insert"]
    assert len({r.query["requestId"] for r in inserts}) == 2  # one id per request sent


async def test_a_name_another_slot_holds_is_a_permanent_error(
    cloud: ComputeCloud, emu: Emulator
) -> None:
    await driven(emu, cloud.create_request(slice_request("x")))  # hosts x-0, x-1
    emu.advance(5)
    with pytest.raises(PermanentCloudError, match=r"the name x-0 is taken.*slot x's"):
        await cloud.create_request(request("x-0"))
    emu.compute.add_instance(ZONE, "hand", "tpu7x-standard-4t")
    with pytest.raises(PermanentCloudError, match="not made by tpu-reconciler"):
        await cloud.create_request(request("hand"))


async def test_a_stockout_and_a_quota_refusal_are_read_back_from_their_operations(
    cloud: ComputeCloud, emu: Emulator
) -> None:
    emu.compute.set_capacity(ZONE, "tpu7x-standard-4t", 0)
    stocked = await cloud.create_request(request("a"))
    emu.compute.set_quota("tpu7x", "preemptible", REGION, 0)
    quota = await cloud.create_request(request("b", zone="us-central1-a"))
    emu.advance(2)
    assert stocked.operation is not None and quota.operation is not None
    out = await cloud.get_operation(stocked.operation)
    assert out is not None and out.failed and out.error_code == 503
    assert out.error_message.startswith("ZONE_RESOURCE_POOL_EXHAUSTED: The zone")
    refused = await cloud.get_operation(quota.operation)
    assert refused is not None and refused.error_code == 429
    assert "QUOTA_EXCEEDED: Quota 'PREEMPTIBLE_TPU_TPU7X' exceeded" in refused.error_message


async def test_a_multi_host_create_makes_its_steps_in_order(
    cloud: ComputeCloud, emu: Emulator
) -> None:
    before = len(emu.requests())
    done = await driven(emu, cloud.create_request(slice_request()))
    assert done.outcome == Outcome.DONE
    mutations = [k for k in calls(emu, before) if not k.endswith(".wait")]
    assert mutations == [
        "POST compute.instanceTemplates.insert",
        "POST compute.resourcePolicies.insert",
        "POST compute.instanceGroupManagers.insert",
        "POST compute.instanceGroupManagers.createInstances",
    ]
    emu.advance(10)
    [slot] = (await cloud.observe(None)).requests
    assert (slot.name, slot.state, slot.api_state) == ("s", RequestState.ACTIVE, "ACTIVE")


async def test_a_failed_step_undoes_what_the_create_made(
    cloud: ComputeCloud, emu: Emulator
) -> None:
    emu.compute.fail_operations(
        op_type="compute.instanceGroupManagers.insert",
        code="INVALID_ARGUMENT",
        message="no such thing",
        http_status=400,
    )
    with pytest.raises(PermanentCloudError, match="no such thing"):
        await driven(emu, cloud.create_request(slice_request()))
    assert emu.compute.templates() == [] and emu.compute.policies() == []
    assert emu.compute.groups() == []


async def test_a_reserved_slot_needs_its_zones_reservation(
    cloud: ComputeCloud, emu: Emulator
) -> None:
    with pytest.raises(UnsafeName, match="reservations"):
        await cloud.create_request(request("r", zone="us-central1-a", mode="reserved"))
    await cloud.create_request(request("r", mode="reserved"))
    [insert] = [r for r in emu.requests() if r.key == "POST compute.instances.insert"]
    assert insert.body["reservationAffinity"]["values"] == ["tpu-res"]


# --- deletes and the sweep --------------------------------------------------------------------


async def test_a_delete_takes_every_resource_of_the_request(
    cloud: ComputeCloud, emu: Emulator
) -> None:
    await driven(emu, cloud.create_request(slice_request()))
    emu.advance(10)
    # not looked at yet: the delete finds what the slot has
    gone = await cloud.delete_request("compute", ZONE, "s", force=True)
    assert gone.outcome == Outcome.DONE and gone.operation is not None
    emu.advance(10)
    assert emu.compute.groups() == [] and emu.compute.instances() == []
    await cloud.observe(None)  # the MIG is gone: its template and policy follow
    await settle_sweep(cloud, emu)
    assert emu.compute.templates() == [] and emu.compute.policies() == []
    nothing = await cloud.delete_request("compute", ZONE, "s", force=True)
    assert nothing.outcome == Outcome.ALREADY


async def test_the_sweep_removes_only_what_no_mig_uses_and_no_create_is_making(
    cloud: ComputeCloud, emu: Emulator
) -> None:
    other = ComputeCloud("test-project", endpoint=emu.url, token_provider=EnvAccessToken("t"))
    try:  # a controller that died after its template and policy: orphans
        emu.compute.fail_operations(op_type="compute.instanceGroupManagers.insert", count=1)
        other._undo = _keep  # type: ignore[method-assign]  # as if killed mid-create
        with pytest.raises(PermanentCloudError):
            await driven(emu, other.create_request(slice_request("dead")))
    finally:
        await other.aclose()
    await driven(emu, cloud.create_request(slice_request("live")))
    assert len(emu.compute.templates()) == 2
    await cloud.observe(None)  # the first look sweeps
    await settle_sweep(cloud, emu)
    assert [t["name"].split("-tpl-")[0] for t in emu.compute.templates()] == ["live"]
    assert [p["name"].split("-wp-")[0] for p in emu.compute.policies()] == ["live"]
    before = len(emu.requests())
    await cloud.observe(None)  # not due again: no template list
    assert "GET compute.instanceTemplates.list" not in calls(emu, before)
    assert compute_mod.SWEEP_EVERY >= 60


async def _keep(made: list[str]) -> None:
    return None


async def test_a_vm_gone_without_our_delete_is_reported_once(
    cloud: ComputeCloud, emu: Emulator
) -> None:
    await cloud.create_request(request("a"))
    emu.advance(5)
    assert [r.state for r in (await cloud.observe(None)).requests] == [RequestState.ACTIVE]
    emu.compute.preempt(ZONE, "a")
    emu.advance(5)
    [lost] = (await cloud.observe(None)).requests
    assert (lost.api_state, lost.preempted) == ("DELETED", True)
    assert (await cloud.delete_request("compute", ZONE, "a", force=True)).outcome == Outcome.ALREADY
    assert (await cloud.observe(None)).requests == ()


async def test_a_vm_we_deleted_is_not_a_preemption(cloud: ComputeCloud, emu: Emulator) -> None:
    await cloud.create_request(request("a"))
    emu.advance(5)
    await cloud.observe(None)
    await cloud.delete_request("compute", ZONE, "a", force=True)
    [going] = (await cloud.observe(None)).requests
    assert going.state == RequestState.DELETING
    emu.advance(5)
    assert (await cloud.observe(None)).requests == ()


# --- pure pieces ------------------------------------------------------------------------------


def test_endpoints() -> None:
    assert compute_endpoint("http://127.0.0.1:9/") == "http://127.0.0.1:9/compute/v1/"
    assert compute_mod.DEFAULT_ENDPOINT == "https://compute.googleapis.com/compute/v1/"
    assert compute_endpoint(compute_mod.DEFAULT_ENDPOINT) == compute_mod.DEFAULT_ENDPOINT
    with pytest.raises(PermanentCloudError, match="plain http"):
        ComputeCloud(
            "test-project",
            endpoint="http://compute.example.com/",
            token_provider=EnvAccessToken("t"),
        )
    env = {compute_mod.ENDPOINT_ENV: "http://localhost:8080/"}
    cloud = ComputeCloud("test-project", env=env, token_provider=EnvAccessToken("t"))
    assert cloud.endpoint == "http://localhost:8080/compute/v1/"


def test_operation_names() -> None:
    for scope in ("zones/us-central1-c", "regions/us-central1", "global"):
        name = f"projects/p/{scope}/operations/operation-1-2"
        assert check_operation_name(name) == name
    for bad in ("projects/p/locations/us-central1-c/operations/x", "projects/p/zones/../x"):
        with pytest.raises(UnsafeName):
            check_operation_name(bad)


def envelope(code: int, reason: str, message: str) -> bytes:
    import json

    return json.dumps(
        {"error": {"code": code, "message": message,
                   "errors": [{"domain": "global", "reason": reason, "message": message}]}}
    ).encode()  # fmt: skip


@pytest.mark.parametrize(
    ("operation", "code", "reason", "message", "verdict"),
    [
        (Operation.CREATE, 409, "alreadyExists", "The resource 'x' already exists",
         Outcome.ALREADY),
        (Operation.DELETE, 404, "notFound", "The resource 'x' was not found", Outcome.ALREADY),
        (Operation.CREATE, 403, "quotaExceeded",
         "Quota 'TPUS_PER_TPU_FAMILY' exceeded. Limit: 64.0 in region us-central1.",
         QuotaExceeded),
        (Operation.CREATE, 400, "badRequest", "ZONE_RESOURCE_POOL_EXHAUSTED: no room",
         TransientCloudError),
        (Operation.CREATE, 403, "forbidden",
         "This user agent is not allowed to use the machine type [ct5lp-hightpu-4t].",
         PermanentCloudError),
        (Operation.CREATE, 400, "invalid", "Invalid value for field", PermanentCloudError),
        (Operation.LIST, 429, "rateLimitExceeded", "slow down", TransientCloudError),
        (Operation.LIST, 503, "backendError", "try later", TransientCloudError),
    ],
)  # fmt: skip
def test_refusals_are_classified(
    operation: Operation, code: int, reason: str, message: str, verdict: Any
) -> None:
    got = classify_compute(operation, code, envelope(code, reason, message), None)
    if isinstance(verdict, Outcome):
        assert got == verdict
    else:
        assert type(got) is verdict, got
        assert message in str(got)
    if verdict is QuotaExceeded:
        assert isinstance(got, QuotaExceeded)
        assert (got.quota_id, got.limit, got.scope, got.place) == (
            "TPUS_PER_TPU_FAMILY", 64, "region", "us-central1"
        )  # fmt: skip


# --- one API among two ------------------------------------------------------------------------


def on_compute(name: str) -> SlotSpec:
    return replace(
        slot(name, ZONE, runtime_version="-"),
        accelerator="tpu7x-8",
        api="compute",
        machine_type="tpu7x-standard-4t",
        topology="2x2x1",
        hosts=1,
        chips=4,
        image=IMAGE,
    )


def test_the_compute_cloud_is_built_only_for_a_file_that_uses_it() -> None:
    tpu_only = desired(slot("a"))
    both_apis = desired(slot("a"), on_compute("b"))
    assert list(make_cloud(tpu_only, {}).clouds) == ["tpu"]  # type: ignore[attr-defined]
    router = make_cloud(both_apis, {})
    assert isinstance(router, CloudRouter) and list(router.clouds) == ["tpu", "compute"]
    assert router.capability.api == "tpu+compute" and router.capability.transport == "rest"
    assert cloud_key(tpu_only) != cloud_key(both_apis)
    compute = router.clouds["compute"]
    assert compute.capability.reads("projects/p/zones/z-a/operations/o") is not None
    assert router.clouds["tpu"].capability.reads("projects/p/zones/z-a/operations/o") is None
    asyncio.run(router.aclose())


async def test_the_router_sends_compute_requests_and_operations_to_compute_engine(
    emu: Emulator,
) -> None:
    env = {"CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE": emu.url, "CLOUDSDK_AUTH_ACCESS_TOKEN": "t"}
    env["CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU"] = emu.url
    router = make_cloud(desired(on_compute("a")), env)
    try:
        done = await router.create_request(request("a"))
        assert done.operation is not None
        status = await router.get_operation(done.operation)
        assert status is not None and status.name == done.operation
        look = await router.observe(None)
        assert [(r.name, r.api) for r in look.requests] == [("a", "compute")]
    finally:
        await router.aclose()


# --- several slices ---------------------------------------------------------------------------


async def test_several_mig_slices_share_one_template_and_policy(
    cloud: ComputeCloud, emu: Emulator
) -> None:
    await driven(emu, cloud.create_request(slice_request("m", slices=2)))
    emu.advance(10)
    assert [g["name"] for g in emu.compute.groups()] == ["m-0", "m-1"]
    assert len(emu.compute.templates()) == len(emu.compute.policies()) == 1
    look = await cloud.observe(None)
    [request] = look.requests
    assert (request.name, request.slices, request.state) == ("m", 2, RequestState.ACTIVE)
    node = look.node_of(request)
    assert node is not None and [s.name for s in node.slices] == ["m-0", "m-1"]
    assert len(node.endpoints) == 4
    emu.compute.preempt_member(ZONE, "m-1", 0)
    emu.advance(5)
    [lost] = (await cloud.observe(None)).requests
    assert (lost.state, lost.preempted) == (RequestState.SUSPENDED, True)
    await cloud.delete_request("compute", ZONE, "m", force=True)
    emu.advance(10)
    assert emu.compute.groups() == [] and emu.compute.instances() == []


async def test_several_single_host_slices_are_one_request(
    cloud: ComputeCloud, emu: Emulator
) -> None:
    await cloud.create_request(request("v", slices=3))
    emu.advance(10)
    [request_] = (await cloud.observe(None)).requests
    assert (request_.slices, request_.slice_prefix, request_.state) == (3, "v", RequestState.ACTIVE)
    assert sorted(i["name"] for i in emu.compute.instances()) == ["v-0", "v-1", "v-2"]


async def test_a_slices_boot_reports_and_script_go_host_by_host(
    cloud: ComputeCloud, emu: Emulator
) -> None:
    """``setup.at_boot`` on a MIG slice: each host's guest attributes read as its worker's
    report; a new setup written into every host's metadata (the template stays), keys others
    set kept; a host that is gone is skipped."""
    first = startup_script("s", 0, [("01-a.sh", b"echo a\n")])
    await driven(emu, cloud.create_request(slice_request(startup_script=first)))
    emu.advance(10)
    assert await cloud.boot_reports("compute", ZONE, "s", 2) == []  # nothing written yet
    emu.compute.set_guest_attribute(ZONE, "s-1", "setup", "g0 done")
    assert await cloud.boot_reports("compute", ZONE, "s", 2) == [
        {"worker_id": "1", "namespace": "tpu-reconciler", "key": "setup", "value": "g0 done"}
    ]

    second = startup_script("s", 1, [("01-a.sh", b"echo b\n")])
    await cloud.set_boot_script("compute", ZONE, "s", second, 2)
    emu.advance(5)
    for i in range(2):
        vm = emu.compute.instance(ZONE, f"s-{i}")
        assert vm is not None
        items = {item["key"]: item["value"] for item in vm["metadata"]["items"]}
        assert boot_generation(items["startup-script"]) == 1
        assert (items["enable-guest-attributes"], items["tpu-worker-id"]) == ("TRUE", str(i))
    [template] = emu.compute.templates()
    kept = {i["key"]: i["value"] for i in template["properties"]["metadata"]["items"]}
    assert boot_generation(kept["startup-script"]) == 0  # immutable: a re-made host boots it
    [node] = (await cloud.observe(None)).nodes
    assert node.boot_generation == 1
    await cloud.set_boot_script("compute", ZONE, "s", second, 3)  # s-2 does not exist
    assert await cloud.boot_reports("compute", ZONE, "s", 3) == [
        {"worker_id": "1", "namespace": "tpu-reconciler", "key": "setup", "value": "g0 done"}
    ]
