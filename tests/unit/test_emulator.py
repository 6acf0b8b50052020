"""The emulator's state machine, driven over HTTP the way gcloud and the REST adapter drive it.

Every test freezes the clock (speed 0) and moves it with ``advance``: no sleeps, no races.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from reconciler.adapters.tpu_api_parse import QRState, node_from_api, request_from_api
from reconciler.emulator import Emulator, Scenario

ZONE = "us-central2-b"
BASE = "v2/projects/test-project/locations"
FAST = Scenario.from_yaml("timings: {accept: 1, provision: 2, activate: 5, delete: 3}")


def create_body(name: str, accelerator: str = "v4-8", **extra: Any) -> dict[str, Any]:
    """The body gcloud sends for ``queued-resources create NAME --node-id=NAME --spot``."""
    node = {
        "acceleratorType": accelerator,
        "labels": {"managed-by": "tpu-reconciler"},
        "metadata": {},
        "networkConfig": {"enableExternalIps": True, "network": "n", "subnetwork": "s"},
        "runtimeVersion": "tpu-ubuntu2204-base",
        "serviceAccount": {},
    }
    spec = {"node": node, "nodeId": name, "parent": f"projects/test-project/locations/{ZONE}"}
    return {"spot": {}, "tpu": {"nodeSpec": [spec]}, **extra}


class Api:
    def __init__(self, emu: Emulator) -> None:
        self.emu = emu
        self.http = httpx.Client(base_url=emu.url, timeout=10)

    def create(self, name: str, zone: str = ZONE, **kw: Any) -> httpx.Response:
        return self.http.post(
            f"{BASE}/{zone}/queuedResources",
            params={"alt": "json", "queuedResourceId": name},
            json=create_body(name, **kw),
        )

    def delete(self, name: str, zone: str = ZONE, force: bool = False) -> httpx.Response:
        params = {"force": "True"} if force else {}
        return self.http.delete(f"{BASE}/{zone}/queuedResources/{name}", params=params)

    def get(self, path: str, **params: str) -> httpx.Response:
        return self.http.get(f"{BASE}/{path}", params=params)

    def state(self, name: str, zone: str = ZONE) -> QRState:
        found = request_from_api(self.get(f"{zone}/queuedResources/{name}").json())
        return QRState(found.api_state)

    def op(self, response: httpx.Response) -> dict[str, Any]:
        name = response.json()["name"].split("/locations/", 1)[1]
        result: dict[str, Any] = self.get(name).json()
        return result


@pytest.fixture
def api(make_emulator: Callable[..., Emulator]) -> Iterator[Api]:
    client = Api(make_emulator(FAST, speed=0, ip_pool=[f"127.0.0.{i}" for i in range(2, 40)]))
    yield client
    client.http.close()


def test_a_created_queued_resource_walks_to_active_with_one_endpoint_per_worker(api: Api) -> None:
    created = api.create("a", accelerator="v4-32")
    assert created.status_code == 200
    assert created.json()["done"] is False
    assert api.state("a") is QRState.CREATING

    api.emu.advance(1)
    assert api.state("a") is QRState.ACCEPTED
    op = api.op(created)
    assert op["done"] is True
    assert op["response"]["name"].endswith("/queuedResources/a")

    api.emu.advance(2)
    assert api.state("a") is QRState.PROVISIONING
    assert api.get(f"{ZONE}/nodes/a").json()["state"] == "CREATING"

    api.emu.advance(5)
    assert api.state("a") is QRState.ACTIVE
    node = node_from_api(api.get(f"{ZONE}/nodes/a").json())
    assert node.state.value == "READY"
    assert node.ips() == ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
    assert len(set(node.ips(internal=True))) == 4


@pytest.mark.parametrize(
    ("accelerator", "workers"),
    [("v4-8", 1), ("v4-32", 4), ("v5litepod-16", 4), ("v6e-8", 1), ("v6e-64", 16)],
)
def test_worker_count_per_accelerator(api: Api, accelerator: str, workers: int) -> None:
    api.emu.add_queued_resource(ZONE, "w", accelerator, state="ACTIVE")
    assert len(api.get(f"{ZONE}/nodes/w").json()["networkEndpoints"]) == workers


def test_capacity_held_by_a_queued_resource_returns_when_it_is_deleted(api: Api) -> None:
    api.emu.set_capacity(ZONE, "v4-8", 1)
    api.create("first")
    api.emu.advance(1)
    api.create("second")
    api.emu.advance(10)
    assert api.state("first") is QRState.ACTIVE
    assert api.state("second") is QRState.WAITING_FOR_RESOURCES

    assert api.delete("first", force=True).status_code == 200
    assert api.state("first") is QRState.DELETING
    api.emu.advance(2.9)
    assert api.state("second") is QRState.WAITING_FOR_RESOURCES
    api.emu.advance(0.1)
    assert api.get(f"{ZONE}/queuedResources/first").status_code == 404
    assert api.state("second") is QRState.PROVISIONING


def test_deleting_a_queued_resource_with_a_node_needs_force(api: Api) -> None:
    api.create("a")
    api.emu.advance(10)
    refused = api.delete("a")
    assert refused.status_code == 400
    assert refused.json()["error"]["status"] == "FAILED_PRECONDITION"
    assert api.state("a") is QRState.ACTIVE

    api.create("queued")
    api.emu.advance(1)
    assert api.state("queued") is QRState.ACCEPTED
    assert api.delete("queued").status_code == 200  # no node yet: no force needed
    api.emu.advance(3)
    assert api.get(f"{ZONE}/queuedResources/queued").status_code == 404


def test_deletes_while_provisioning_can_be_made_to_fail(api: Api) -> None:
    api.emu.fail_deletes_while_provisioning()
    api.create("a")
    api.emu.advance(3)
    assert api.state("a") is QRState.PROVISIONING
    deleting = api.delete("a", force=True)
    assert deleting.status_code == 200  # the call succeeds (gcloud --async exits 0) ...
    api.emu.advance(3)
    op = api.op(deleting)
    assert op["done"] is True
    assert op["error"]["code"] == 9  # ... the operation fails
    assert api.state("a") is QRState.PROVISIONING  # and the QR carries on
    api.emu.advance(2)
    assert api.state("a") is QRState.ACTIVE


def test_preemption_suspends_the_queued_resource_which_keeps_its_capacity(api: Api) -> None:
    api.emu.set_capacity(ZONE, "v4-8", 1)
    api.create("a")
    api.emu.advance(10)
    api.emu.preempt(ZONE, "a")
    qr = api.get(f"{ZONE}/queuedResources/a").json()
    assert qr["state"]["state"] == "SUSPENDED"
    assert qr["state"]["stateInitiator"] == "SERVICE"
    assert api.get(f"{ZONE}/nodes/a").json()["state"] == "PREEMPTED"

    api.create("b")
    api.emu.advance(10)
    assert api.state("b") is QRState.WAITING_FOR_RESOURCES  # a suspended QR still holds it
    assert api.delete("a").status_code == 200  # SUSPENDED: deletable without force
    api.emu.advance(3)
    assert api.state("b") is QRState.PROVISIONING


def test_a_shortage_that_fails_ends_failed_with_code_8_on_the_operation(api: Api) -> None:
    api.emu.set_capacity(ZONE, "v6e-64", 0, shortage="fail")
    created = api.create("big", accelerator="v6e-64")
    api.emu.advance(1)
    qr = request_from_api(api.get(f"{ZONE}/queuedResources/big").json())
    assert qr.api_state == QRState.FAILED
    assert qr.error is not None and qr.error.code == 8
    assert api.op(created)["error"]["code"] == 8


def test_valid_until_expiry_while_waiting_fails_the_queued_resource(api: Api) -> None:
    api.emu.set_capacity(ZONE, "v4-8", 0)
    api.create("a", queueingPolicy={"validUntilDuration": "60s"})
    api.emu.advance(59)
    assert api.state("a") is QRState.WAITING_FOR_RESOURCES
    api.emu.advance(1)
    assert api.state("a") is QRState.FAILED


def test_create_twice_is_already_exists_and_unknown_is_not_found(api: Api) -> None:
    assert api.create("a").status_code == 200
    again = api.create("a")
    assert again.status_code == 409
    assert again.json()["error"]["status"] == "ALREADY_EXISTS"
    missing = api.get(f"{ZONE}/queuedResources/nope")
    assert missing.status_code == 404
    assert missing.json()["error"] == {
        "code": 404,
        "message": "Resource 'queuedResources/nope' was not found",
        "status": "NOT_FOUND",
    }
    assert api.delete("nope", force=True).status_code == 404


def test_listing_pages_through_more_than_100_queued_resources(api: Api) -> None:
    zones = ["us-central2-b", "europe-west4-a", "us-east5-a"]
    expected = set()
    for i in range(120):
        zone = zones[i % 3]
        api.emu.add_queued_resource(zone, f"qr-{i:03d}")
        expected.add((zone, f"qr-{i:03d}"))
    seen: list[tuple[str, str]] = []
    params: dict[str, str] = {}
    while True:
        page = api.get("-/queuedResources", **params).json()
        assert len(page["queuedResources"]) <= 25
        seen += [(q.zone, q.name) for q in map(request_from_api, page["queuedResources"])]
        if "nextPageToken" not in page:
            break
        params = {"pageToken": page["nextPageToken"]}
    assert len(seen) == len(expected) == 120
    assert set(seen) == expected
    assert api.emu.request_counts()["GET queuedResources.list"] == 5


def test_locations_dash_lists_every_zone_and_names_unreachable_ones(api: Api) -> None:
    api.emu.add_queued_resource("us-central2-b", "a", state="ACTIVE")
    api.emu.add_queued_resource("europe-west4-a", "b", "v6e-8", state="ACTIVE")
    api.emu.add_queued_resource("asia-east1-c", "c")
    everything = api.get("-/queuedResources").json()
    assert {q["name"].split("/")[-1] for q in everything["queuedResources"]} == {"a", "b", "c"}
    nodes = api.get("-/nodes").json()["nodes"]
    assert sorted(n["name"].split("/")[-1] for n in nodes) == ["a", "b"]
    one = api.get("europe-west4-a/queuedResources").json()["queuedResources"]
    assert [q["name"].split("/")[-1] for q in one] == ["b"]

    api.emu.set_unreachable("asia-east1-c")
    partial = api.get("-/queuedResources").json()
    assert {q["name"].split("/")[-1] for q in partial["queuedResources"]} == {"a", "b"}
    assert partial["unreachable"] == ["projects/test-project/locations/asia-east1-c"]
    assert api.get("asia-east1-c/queuedResources").status_code == 503


def test_request_log_records_method_path_query_body_and_status(api: Api) -> None:
    api.create("a")
    api.get("-/queuedResources")
    api.delete("a")
    records = api.emu.requests()
    assert [(r.method, r.status) for r in records] == [
        ("POST", 200),
        ("GET", 200),
        ("DELETE", 200),
    ]
    assert records[0].query["queuedResourceId"] == "a"
    assert records[0].body["tpu"]["nodeSpec"][0]["nodeId"] == "a"
    assert records[0].path == f"/{BASE}/{ZONE}/queuedResources"
    assert api.emu.request_counts() == {
        "POST queuedResources.create": 1,
        "GET queuedResources.list": 1,
        "DELETE queuedResources.delete": 1,
    }
