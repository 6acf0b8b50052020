"""Fault injection, latency, the HTTP control API, concurrency and the ``emulator serve`` CLI."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

import reconciler
from reconciler.emulator import Emulator, EmulatorClient, Fault
from reconciler.surfaces.cli import build_parser
from reconciler.surfaces.cli._emulator import serve
from tests.unit.test_emulator import ZONE, create_body

QRS = f"v2/projects/test-project/locations/{ZONE}/queuedResources"


@pytest.fixture
def emu(make_emulator: Callable[..., Emulator]) -> Emulator:
    return make_emulator(speed=0)


@pytest.fixture
def http(emu: Emulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=emu.url, timeout=10) as client:
        yield client


def create(http: httpx.Client, name: str) -> httpx.Response:
    return http.post(QRS, params={"queuedResourceId": name}, json=create_body(name))


def test_an_injected_status_answers_in_googles_shape_and_changes_nothing(
    emu: Emulator, http: httpx.Client
) -> None:
    emu.inject_fault(Fault(status="ALREADY_EXISTS", method="POST"))
    refused = create(http, "a")
    assert refused.status_code == 409
    assert refused.json()["error"]["status"] == "ALREADY_EXISTS"
    assert emu.queued_resource(ZONE, "a") is None
    assert create(http, "a").status_code == 200  # count=1: the next one goes through
    assert [r.status for r in emu.requests()] == [409, 200]


def test_faults_filter_by_path_and_count_down(emu: Emulator, http: httpx.Client) -> None:
    emu.inject_fault(Fault(status=429, path=r"/nodes$", count=2))
    nodes = f"v2/projects/p/locations/{ZONE}/nodes"
    assert http.get(QRS).status_code == 200
    assert [http.get(nodes).status_code for _ in range(3)] == [429, 429, 200]
    assert http.get(nodes).status_code == 200
    assert emu.request_counts()["GET nodes.list"] == 4


def test_a_fault_can_return_a_raw_body(emu: Emulator, http: httpx.Client) -> None:
    emu.inject_fault(Fault(status=503, body="<html><body>Service Unavailable</body></html>"))
    answer = http.get(QRS)
    assert answer.status_code == 503
    assert answer.text.startswith("<html>")
    assert answer.headers["content-type"].startswith("text/html")
    emu.inject_fault(Fault(status=200, body="{not json", count=None))
    assert http.get(QRS).text == "{not json"
    emu.clear_faults()
    assert http.get(QRS).json() == {}


def test_latency_delays_answers(emu: Emulator, http: httpx.Client) -> None:
    emu.set_latency(0.05)
    emu.inject_fault(Fault(status=None, latency=0.1))
    started = time.monotonic()
    assert http.get(QRS).status_code == 200
    assert time.monotonic() - started >= 0.15
    emu.set_latency(0)
    started = time.monotonic()
    http.get(QRS)
    assert time.monotonic() - started < 0.1


def test_the_control_api_drives_the_emulator_over_http(emu: Emulator, http: httpx.Client) -> None:
    def control(path: str, **body: object) -> httpx.Response:
        return http.post(f"_emulator/{path}", json=body)

    assert control("capacity", zone=ZONE, accelerator="v4-8", count=1).status_code == 200
    assert control("queued-resources", zone=ZONE, name="a", state="ACTIVE").status_code == 200
    assert create(http, "b").status_code == 200
    assert control("advance", seconds=60).status_code == 200
    state = http.get("_emulator/state").json()
    assert {q["name"].rsplit("/", 1)[1]: q["state"]["state"] for q in state["queuedResources"]} == {
        "a": "ACTIVE",
        "b": "WAITING_FOR_RESOURCES",
    }
    assert control("preempt", zone=ZONE, node="a").status_code == 200
    node = emu.node(ZONE, "a")
    assert node is not None and node["state"] == "PREEMPTED"
    assert control("faults", status="PERMISSION_DENIED").status_code == 200
    assert http.get(QRS).status_code == 403
    log = http.get("_emulator/requests").json()
    assert log["counts"] == {"POST queuedResources.create": 1, "GET queuedResources.list": 1}
    assert [r["status"] for r in log["requests"]] == [200, 403]
    assert http.delete("_emulator/requests").status_code == 200
    assert emu.requests() == []


def test_the_client_drives_an_emulator_in_another_process_alike(
    emu: Emulator, http: httpx.Client
) -> None:
    client = EmulatorClient(emu.url)
    client.set_capacity(ZONE, "v4-8", 0)
    client.add_queued_resource(ZONE, "a", labels={"managed-by": "tpu-reconciler"})
    client.advance(10)
    qr = client.queued_resource(ZONE, "a")
    assert qr is not None and qr["state"]["state"] == "WAITING_FOR_RESOURCES"
    client.set_capacity(ZONE, "v4-8", 1)
    client.advance(5)
    node = client.node(ZONE, "a")
    assert node is not None and node["state"] == "READY"
    client.inject_fault(Fault(status=503, count=1))
    assert http.get(QRS).status_code == 503
    assert client.request_counts() == {"GET queuedResources.list": 1}
    assert [(r.method, r.status) for r in client.requests()] == [("GET", 503)]
    with pytest.raises(LookupError):
        client.preempt(ZONE, "ghost")
    with pytest.raises(ValueError, match="shortage"):
        client.set_capacity(ZONE, "v4-8", 1, shortage="sometimes")


def test_a_workers_guest_attributes_over_the_control_api(emu: Emulator, http: httpx.Client) -> None:
    """What a booted worker's script writes through its metadata server, read back through
    ``nodes.getGuestAttributes`` (each worker's own, by position)."""
    client = EmulatorClient(emu.url)
    client.add_queued_resource(ZONE, "a", accelerator="v4-16", state="ACTIVE")
    client.set_guest_attribute(ZONE, "a", "setup", "g0 running 1/2")
    client.set_guest_attribute(ZONE, "a", "setup", "g0 done", worker=1)
    guest = f"v2/projects/p/locations/{ZONE}/nodes/a:getGuestAttributes"
    answer = http.post(guest, json={"queryPath": "tpu-reconciler/"}).json()
    assert [e["queryValue"]["items"] for e in answer["guestAttributes"]] == [
        [{"namespace": "tpu-reconciler", "key": "setup", "value": "g0 running 1/2"}],
        [{"namespace": "tpu-reconciler", "key": "setup", "value": "g0 done"}],
    ]
    client.set_guest_attribute(ZONE, "a", "setup", "", worker=0)  # removed
    answer = http.post(guest, json={"queryPath": "tpu-reconciler/setup"}).json()
    assert [len(e["queryValue"]["items"]) for e in answer["guestAttributes"]] == [0, 1]
    with pytest.raises(ValueError, match="has no worker 5"):
        client.set_guest_attribute(ZONE, "a", "setup", "x", worker=5)
    with pytest.raises(LookupError):
        client.set_guest_attribute(ZONE, "ghost", "setup", "x")


def test_operation_failures_over_the_control_api(emu: Emulator, http: httpx.Client) -> None:
    client = EmulatorClient(emu.url)
    client.fail_operations(verb="create", name="doomed", status="UNIMPLEMENTED", message="no",
                           after=2, count=1)  # fmt: skip
    accepted = create(http, "doomed")
    assert accepted.status_code == 200 and accepted.json()["done"] is False
    assert client.queued_resource(ZONE, "doomed") is None  # a failing create leaves no QR
    client.advance(2)
    op = http.get(f"v2/{accepted.json()['name']}").json()
    assert op["done"] is True and op["error"] == {"code": 12, "message": "no"}
    assert create(http, "doomed").json()["done"] is False  # count=1: this one is real
    client.advance(5)
    assert client.queued_resource(ZONE, "doomed") is not None
    refused = http.post("_emulator/operation-failures", json={"status": "NOT_A_STATUS"})
    assert refused.status_code == 400


def test_the_control_api_refuses_bad_requests(http: httpx.Client) -> None:
    missing = http.post("_emulator/preempt", json={"zone": ZONE})
    assert missing.status_code == 400
    assert missing.json()["error"]["status"] == "INVALID_ARGUMENT"
    unknown_node = http.post("_emulator/preempt", json={"zone": ZONE, "node": "ghost"})
    assert unknown_node.status_code == 404
    assert http.post("_emulator/faults", json={"status": "NOPE"}).status_code == 400
    assert http.get("_emulator/nothing").status_code == 404


def test_concurrent_creates_all_land_once(emu: Emulator) -> None:
    def worker(index: int) -> list[int]:
        with httpx.Client(base_url=emu.url, timeout=10) as client:
            return [create(client, f"t{index}-{i}").status_code for i in range(10)]

    with ThreadPoolExecutor(8) as pool:
        statuses = [s for batch in pool.map(worker, range(8)) for s in batch]
    assert statuses == [200] * 80
    assert len(emu.queued_resources()) == 80
    assert emu.request_counts() == {"POST queuedResources.create": 80}


def test_a_stopped_emulator_answers_nothing_even_on_kept_alive_connections(
    make_emulator: Callable[..., Emulator],
) -> None:
    emu = make_emulator(speed=0)
    with httpx.Client(base_url=emu.url, timeout=5) as client:
        assert client.get(QRS).status_code == 200
        emu.stop()
        with pytest.raises(httpx.TransportError):
            client.get(QRS)


def test_the_clock_runs_by_itself_at_the_given_speed(
    make_emulator: Callable[..., Emulator],
) -> None:
    emu = make_emulator(speed=100_000)
    emu.add_queued_resource(ZONE, "a")
    deadline = time.monotonic() + 5
    while (qr := emu.queued_resource(ZONE, "a")) and qr["state"]["state"] != "ACTIVE":
        assert time.monotonic() < deadline, qr
    assert emu.now() > 8


def test_the_serve_command_is_wired_and_refuses_a_bad_scenario(
    tmp_path: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(
        ["emulator", "serve", "--speed", "5", "--ip-pool", "127.0.0.2,127.0.0.3", "--port", "0"]
    )
    assert args.handler == "reconciler.surfaces.cli._emulator:serve"
    assert (args.speed, args.ip_pool, args.port) == (5.0, "127.0.0.2,127.0.0.3", 0)
    bad = build_parser().parse_args(["emulator", "serve", "--scenario", "/nonexistent.yaml"])
    assert serve(bad) == 2
    assert "nonexistent.yaml" in capsys.readouterr().err


def test_the_emulators_environment_points_every_api_the_package_calls_at_itself(
    emu: Emulator,
) -> None:
    # Every endpoint override the package reads (found in its source, so a new API cannot be
    # forgotten here) is set by gcloud_env to the emulator: the demo and `emulator serve`
    # users never reach a Google endpoint, whichever settings they try.
    root = Path(reconciler.__file__).parent
    read = {
        m
        for p in root.rglob("*.py")
        for m in re.findall(r"CLOUDSDK_API_ENDPOINT_OVERRIDES_[A-Z]+", p.read_text())
    }
    env = emu.gcloud_env("/tmp/cfg", "/tmp/token")
    assert read >= {"CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDQUOTAS"}
    assert {name: env.get(name) for name in read} == dict.fromkeys(read, emu.url)
