"""The capacity port: the TPU API's states mapped onto neutral ones, the capability objects, and
the router that sends each request to the cloud serving its API."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters import compute_states, gcloud, rest, tpu_api_parse
from reconciler.adapters.cloud import Capability, CreateRequest, zones_to_observe
from reconciler.adapters.cloud_router import CloudRouter, merge, merged
from reconciler.adapters.statedir import StateDir
from reconciler.core import plan as planner
from reconciler.core.memory import Memory
from reconciler.core.status import build_status
from reconciler.errors import PermanentCloudError, TransientCloudError
from reconciler.model.capacity import (
    DEAD_STATES,
    MOVING_STATES,
    WAITING_STATES,
    WON_STATES,
    CapacityRequest,
    Initiator,
    RequestState,
)
from reconciler.model.observed import Observation
from reconciler.runtime.backends import APIS, STATE_WORDS, make_cloud
from reconciler.runtime.controller import Controller
from reconciler.runtime.desired_loader import DesiredLoader
from reconciler.runtime.events import EventLog, read_events
from reconciler.runtime.transitions import Transitions
from tests.support.fakecloud import FakeCloud
from tests.support.worlds import desired, qr, slot, world

ZONE = "us-central2-b"

# --- the TPU API's mapping ------------------------------------------------------------------

MAPPING = {
    "CREATING": RequestState.WAITING,
    "ACCEPTED": RequestState.WAITING,
    "WAITING_FOR_RESOURCES": RequestState.WAITING,
    "PROVISIONING": RequestState.PROVISIONING,
    "ACTIVE": RequestState.ACTIVE,
    "SUSPENDING": RequestState.SUSPENDING,
    "SUSPENDED": RequestState.SUSPENDED,
    "FAILED": RequestState.FAILED,
    "DELETING": RequestState.DELETING,
}


def queued(state: str | None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": f"projects/p/locations/{ZONE}/queuedResources/a", **extra}
    if state is not None:
        body["state"] = {"state": state, **extra.pop("state_extra", {})}
    return body


@pytest.mark.parametrize(("word", "neutral"), sorted(MAPPING.items()))
def test_each_queued_resource_state_maps_onto_a_neutral_one(
    word: str, neutral: RequestState
) -> None:
    found = tpu_api_parse.request_from_api(queued(word))
    assert (found.state, found.api_state, found.raw_state) == (neutral, word, word)
    assert (found.api, found.api_kind) == ("tpu", "queued resource")
    assert tpu_api_parse.request_state(word) is neutral


@pytest.mark.parametrize("word", [None, "STATE_UNSPECIFIED", "HIBERNATING"])
def test_a_word_this_version_does_not_know_is_unknown_and_kept(word: str | None) -> None:
    found = tpu_api_parse.request_from_api(queued(word))
    assert (found.state, found.api_state, found.raw_state) == (
        RequestState.UNKNOWN,
        "UNKNOWN",
        word or "",
    )


def test_who_ended_it_and_why_it_failed_are_neutral_facts() -> None:
    body = queued("SUSPENDED")
    body["state"]["stateInitiator"] = "SERVICE"
    preempted = tpu_api_parse.request_from_api(body)
    assert preempted.ended_by is Initiator.SERVICE and preempted.preempted
    body["state"] = {"state": "SUSPENDED", "stateInitiator": "USER"}
    assert not tpu_api_parse.request_from_api(body).preempted
    body["state"] = {"state": "FAILED", "failedData": {"error": {"code": 8, "message": "full"}}}
    failed = tpu_api_parse.request_from_api(body)
    assert failed.error is not None and (failed.error.code, failed.error.message) == (8, "full")


def test_the_neutral_sets_split_the_states() -> None:
    assert WAITING_STATES <= MOVING_STATES and not WON_STATES & DEAD_STATES
    assert RequestState.ENDED in DEAD_STATES  # over, yet there: deleted before asking again
    assert set(MAPPING.values()) | {RequestState.UNKNOWN} == set(RequestState) - {
        RequestState.ENDED  # the TPU API ends a run by suspending it (core/flex.py)
    }
    assert set(tpu_api_parse.STATE_WORDS) == {*MAPPING, "UNKNOWN"}
    assert set(STATE_WORDS) == {*tpu_api_parse.STATE_WORDS, *compute_states.STATE_WORDS}


def test_a_hand_made_request_shows_its_neutral_state_by_name() -> None:
    made = CapacityRequest("a", ZONE, RequestState.ENDED, api="compute")
    assert (made.api_state, made.node_key, made.managed) == ("ENDED", (ZONE, "a"), False)


def test_status_keeps_the_apis_word_and_says_the_neutral_state_beside_it() -> None:
    want = desired(slot("a"))
    seen = world(qr("a", state=tpu_api_parse.QRState.WAITING_FOR_RESOURCES))
    snapshot = build_status(
        desired=want,
        desired_file="desired.yaml",
        errors=(),
        observation=seen,
        observed_at=0.0,
        memory=Memory(),
        plan=planner.plan(want, seen),
        now=0.0,
        backend="rest",
    )
    (row,) = snapshot.slots
    assert (row.state, row.request) == ("WAITING_FOR_RESOURCES", "waiting")
    assert not row.active and dataclasses.replace(row, request="active").active


# --- capabilities ------------------------------------------------------------------------------


def test_each_transport_says_what_it_can_do() -> None:
    assert (rest.CAPABILITY.api, rest.CAPABILITY.transport) == ("tpu", "rest")
    assert (gcloud.CAPABILITY.api, gcloud.CAPABILITY.transport) == ("tpu", "gcloud")
    assert rest.CAPABILITY.observes_all_zones and not gcloud.CAPABILITY.observes_all_zones
    op = f"projects/p/locations/{ZONE}/operations/operation-1"
    assert rest.CAPABILITY.reads(op) == op and gcloud.CAPABILITY.reads(op) == op
    assert rest.CAPABILITY.reads("projects/p/zones/z/operations/1") is None  # not its kind
    assert zones_to_observe(rest.RestCloud("my-project-123"), [ZONE]) is None
    assert zones_to_observe(gcloud.GcloudCloud("my-project-123"), [ZONE]) == [ZONE]


def test_a_tpu_cloud_refuses_a_request_of_another_api() -> None:
    request = CreateRequest("a", ZONE, "v4-8", "img", "spot", api="compute")
    with pytest.raises(PermanentCloudError, match="'compute' API"):
        asyncio.run(rest.RestCloud("my-project-123").create_request(request))


@pytest.mark.parametrize("backend", ["rest", "gcloud"])
def test_the_backend_setting_still_names_the_tpu_apis_transport(backend: str) -> None:
    cloud = make_cloud(desired(backend=backend))  # no slot on Compute Engine: not built
    assert isinstance(cloud, CloudRouter) and list(cloud.clouds) == ["tpu"]
    assert list(APIS) == ["tpu", "compute"]
    assert cloud.capability.transport == backend
    asyncio.run(cloud.aclose())


# --- the router --------------------------------------------------------------------------------


class ApiCloud(FakeCloud):
    """A fake cloud of API ``api``, each observe seeing ``zones`` as asked."""

    def __init__(self, api: str, *, all_zones: bool = False, ops: str = r"op/.+") -> None:
        super().__init__()
        self.capability = Capability(
            api=api,
            transport=f"{api}-t",
            observes_all_zones=all_zones,
            operation_names=re.compile(ops),
        )
        self.asked: list[Any] = []
        self.fail: Exception | None = None

    async def observe(self, zones: Any) -> Observation:
        self.asked.append(zones)
        if self.fail is not None:
            raise self.fail
        seen = await super().observe(zones)
        if self.capability.observes_all_zones:
            return dataclasses.replace(seen, zones=None)
        return seen


def test_the_router_sends_each_request_to_the_cloud_of_its_api() -> None:
    tpu, other = ApiCloud("tpu", all_zones=True), ApiCloud("compute", ops=r"zones/.+")
    router = CloudRouter({"tpu": tpu, "compute": other})

    async def go() -> None:
        await router.create_request(CreateRequest("a", ZONE, "v4-8", "img", "spot"))
        await router.create_request(
            CreateRequest("b", ZONE, "tpu7x-8", "img", "spot", api="compute")
        )
        await router.delete_request("compute", ZONE, "b", force=True)
        assert await router.describe_request("tpu", ZONE, "a") is not None
        assert await router.get_operation("zones/z/operations/1") is None
        assert await router.get_operation("not an operation name") is None

    asyncio.run(go())
    assert tpu.calls == [("create", "a")]
    assert other.calls == [
        ("create", "b"),
        ("delete", "b"),
        ("get_operation", "zones/z/operations/1"),
    ]
    cap = router.capability
    assert (cap.api, cap.transport, cap.observes_all_zones) == (
        "tpu+compute",
        "tpu-t+compute-t",
        False,
    )
    assert cap.reads("op/1") and cap.reads("zones/x") and not cap.reads("other")


def test_a_request_for_an_api_no_cloud_serves_is_a_permanent_error() -> None:
    router = CloudRouter({"tpu": ApiCloud("tpu")})
    request = CreateRequest("a", ZONE, "tpu7x-8", "img", "spot", api="compute")
    with pytest.raises(PermanentCloudError, match="no configured cloud serves the 'compute' API"):
        asyncio.run(router.create_request(request))
    with pytest.raises(PermanentCloudError, match="serves tpu"):
        asyncio.run(router.delete_request("compute", ZONE, "a", force=False))
    with pytest.raises(ValueError, match="serves 'tpu'"):
        CloudRouter({"compute": ApiCloud("tpu")})


def test_a_flex_start_request_needs_a_cloud_that_can_make_one() -> None:
    other = ApiCloud("compute")
    router = CloudRouter({"tpu": ApiCloud("tpu"), "compute": other})
    flex = CreateRequest("f", ZONE, "tpu7x-8", "img", "flex-start", api="compute")
    with pytest.raises(PermanentCloudError, match="cannot create flex-start requests"):
        asyncio.run(router.create_request(flex))
    other.capability = dataclasses.replace(other.capability, flex_start=True)
    asyncio.run(router.create_request(flex))
    assert other.calls == [("create", "f")]


def test_one_look_is_every_clouds_and_fails_with_any_of_them() -> None:
    tpu, other = ApiCloud("tpu", all_zones=True), ApiCloud("compute")
    asyncio.run(tpu.create_request(CreateRequest("a", ZONE, "v4-8", "img", "spot")))
    router = CloudRouter({"tpu": tpu, "compute": other})
    seen = asyncio.run(router.observe([ZONE]))
    assert tpu.asked == [None] and other.asked == [[ZONE]]  # each as it observes best
    assert [r.name for r in seen.requests] == ["a"] and seen.zones == {ZONE}
    other.fail = TransientCloudError("compute API down")
    with pytest.raises(TransientCloudError, match="compute API down"):
        asyncio.run(router.observe([ZONE]))


def test_merged_looks_know_a_zone_only_where_every_cloud_saw_it() -> None:
    a = Observation(zones=None, unreachable=frozenset({"z3"}))
    b = Observation(zones=frozenset({"z1", "z2"}), unreachable=frozenset({"z2"}))
    both = merge([a, b])
    assert [both.knows(z) for z in ("z1", "z2", "z3", "z4")] == [True, False, False, False]
    assert merge([a, a]).zones is None
    single = ApiCloud("tpu").capability
    assert merged([single]) is single


def test_a_create_for_an_api_nobody_serves_is_blocked_not_a_crash(tmp_path: Path) -> None:
    """A slot names its API (``api: compute``) and its create carries it, with the shape the
    file resolved; a controller serving only the TPU API refuses it, and that refusal blocks
    the action with its reason, pass after pass."""
    path = tmp_path / "desired.yaml"
    path.write_text(
        "project: test-project\n"
        "slots:\n  - {name: a, zone: us-east5-b, accelerator: v6e-8, api: compute, want: held}\n"
        "defaults:\n  setup: {tmux: false}\n"
    )
    state = StateDir(tmp_path / "state").ensure()
    tpu = ApiCloud("tpu")
    controller = Controller(
        store=DesiredLoader(path, {}),
        state=state,
        cloud_factory=lambda d: CloudRouter({"tpu": tpu}),
        events=EventLog(state),
    )

    async def passes() -> Any:
        await controller.reconcile()
        while controller.in_flight:
            await asyncio.wait(list(controller.in_flight.values()))
        return await controller.reconcile()

    second = asyncio.run(passes())
    assert second.observe_error is None, second.observe_error
    assert tpu.calls == []
    (blocked,) = second.plan.blocked
    create = blocked.action.create
    assert create is not None and (create.api, create.machine_type, create.hosts) == (
        "compute",
        "ct6e-standard-8t",
        1,
    )
    assert create.image.endswith("ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e")
    assert "no configured cloud serves the 'compute' API" in blocked.why
    failed = [e for e in read_events(state.events) if e["kind"] == "action.failed"]
    assert failed and failed[0]["retry"] == "permanent"


def test_a_state_event_says_the_neutral_state_beside_the_apis_word(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state").ensure()
    events = EventLog(state)
    moves = Transitions(events)
    moves.observed(world(qr("a", state=tpu_api_parse.QRState.WAITING_FOR_RESOURCES)))
    moves.observed(world(zones=[ZONE]))
    first, gone = [e for e in read_events(state.events) if e["kind"] == "qr.state"]
    assert (first["before"], first["after"], first["api"], first["request"]) == (
        None,
        "WAITING_FOR_RESOURCES",
        "tpu",
        "waiting",
    )
    assert (gone["before"], gone["after"]) == ("WAITING_FOR_RESOURCES", None)
