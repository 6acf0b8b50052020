"""The controller's /metrics: a real controller against the emulator with ``settings.metrics``,
scraped over HTTP and parsed by prometheus_client's own text parser. The counters move as the
world does (creates, a race won, a preemption), every family in the golden list is there and no
label carries a value outside its documented set."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from reconciler.core import metrics as m
from reconciler.emulator import Fault
from reconciler.runtime.backends import make_cloud
from reconciler.runtime.controller import Controller
from reconciler.runtime.desired_loader import DesiredLoader
from reconciler.runtime.events import EventLog, read_events
from reconciler.runtime.metrics import Metrics
from reconciler.runtime.setup import make_setup_runner
from tests.fixtures.controller import Harness, desired_text
from tests.integration.test_controller_e2e import HELD, RACE
from tests.support.metrics import label_problems, scrape, value

pytestmark = pytest.mark.integration
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "metrics.txt"

# The race of test_controller_e2e with alpha held beside it.
WORLD = RACE.replace("slots:\n", HELD, 1)
PAIRS = (("us-central2-b", "alpha"), ("europe-west4-a", "cand-a"), ("us-east1-d", "cand-b"))
ZONES = tuple(zone for zone, _ in PAIRS)


def with_metrics(text: str, address: str = "'127.0.0.1:0'") -> str:
    return text.replace("defaults:\n", f"  metrics: {address}\ndefaults:\n", 1)


@pytest.fixture
async def metered(harness: Harness) -> AsyncIterator[tuple[Harness, Metrics]]:
    harness.write(with_metrics(desired_text("slots: []\n")))
    events = EventLog(harness.state)
    metrics = Metrics(events)
    controller = Controller(
        store=DesiredLoader(harness.path, harness.env),
        state=harness.state,
        cloud_factory=lambda d: make_cloud(d, harness.env),
        events=events,
        setup=make_setup_runner(harness.path, harness.state),
        metrics=metrics,
    )
    harness.controller = controller
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    try:
        yield harness, metrics
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=20)


async def fetch(metrics: Metrics) -> dict[str, object]:
    assert metrics.serving is not None
    return await asyncio.to_thread(scrape, f"http://{metrics.serving}/metrics")


async def test_metrics_follow_creates_a_race_and_a_preemption(
    metered: tuple[Harness, Metrics],
) -> None:
    h, metrics = metered
    await h.until("serving", lambda: metrics.serving is not None)
    assert metrics.serving is not None and metrics.serving.loopback and metrics.serving.port
    serving = [e for e in read_events(h.state.events) if e["kind"] == "metrics.serving"]
    assert serving and serving[0]["address"] == str(metrics.serving)
    before = await fetch(metrics)
    assert value(before, "actions", "_total") == 0
    assert value(before, "desired_valid") == 1

    h.emulator.set_capacity("europe-west4-a", "v6e-8", 0)
    h.emulator.set_capacity("us-east1-d", "v6e-8", 1)
    # One create and one observation refused with a 503: both retried, both counted.
    h.emulator.inject_fault(Fault(status=503, method="POST", path="/queuedResources$", count=1))
    h.emulator.inject_fault(Fault(status=503, method="GET", path="/queuedResources$", count=1))
    h.write(with_metrics(desired_text(WORLD)))
    await h.until(
        "alpha held, cand-b won, cand-a cancelled",
        lambda: [h.state_of(zone, name) for zone, name in PAIRS] == ["ACTIVE", None, "ACTIVE"],
    )
    await h.until(
        "the snapshot shows both held",
        lambda: sum(s.get("state") == "ACTIVE" for s in h.snapshot()["slots"]) == 2,
    )
    won = await fetch(metrics)
    creates = value(won, "actions", "_total", kind="create", outcome="succeeded")
    posts = [r.status for r in h.mutations() if r.method == "POST"]
    assert creates >= 2 and creates == sum(status == 200 for status in posts)  # as the cloud saw
    assert value(won, "actions", "_total", kind="create", outcome="failed") == 1 == posts.count(503)
    assert value(won, "errors", "_total", source="action", retry="transient") == 1
    assert value(won, "errors", "_total", source="observe", retry="transient") == 1
    assert value(won, "reconcile", "_total", result="observe_failed") == 1
    deletes = [r.status for r in h.mutations() if r.method == "DELETE"]  # cand-a, if created
    assert value(won, "actions", "_total", kind="delete", outcome="succeeded") == len(deletes)
    assert value(won, "race_duration_seconds", "_count") == 1
    assert value(won, "queue_wait_seconds", "_count", zone="us-central2-b", accelerator="v4-8") == 1
    assert value(won, "chips_held", zone="us-central2-b", accelerator="v4-8", mode="spot") == 4
    assert value(won, "chips_held", zone="us-east1-d", accelerator="v6e-8", mode="spot") == 8
    assert value(won, "slots", state="ACTIVE") == 2
    assert value(won, "slots", state="NOT_QUEUED") == 1  # cand-a, cancelled
    assert value(won, "slots", state="other") == 0
    assert value(won, "reconcile", "_total", result="success") >= 2
    assert value(won, "reconcile_time_seconds", "_count") >= value(won, "reconcile", "_total")
    assert value(won, "observe_requests", "_count") >= 2
    assert value(won, "observe_requests", "_sum") >= 2 * value(won, "observe_requests", "_count")
    assert value(won, "preemptions", "_total") == 0
    assert value(won, "desired_last_load_timestamp_seconds") > value(
        before, "desired_last_load_timestamp_seconds"
    )

    h.emulator.preempt("us-central2-b", "alpha")
    await h.until("alpha re-queued", lambda: h.state_of("us-central2-b", "alpha") == "ACTIVE")
    preempted = await fetch(metrics)
    assert value(preempted, "preemptions", "_total", zone="us-central2-b", mode="spot") == 1
    assert value(preempted, "actions", "_total", kind="replace", outcome="succeeded") == 1

    h.write(with_metrics(desired_text(WORLD)) + "slots: oops\n")  # a half-written save
    await h.until("the snapshot says invalid", lambda: not h.snapshot()["desired"]["valid"])
    invalid = await fetch(metrics)
    assert value(invalid, "desired_valid") == 0

    golden = [line.split()[0] for line in GOLDEN.read_text().splitlines()]
    assert sorted(n for n in invalid if n.startswith(m.PREFIX)) == sorted(golden)
    assert label_problems(invalid.values(), ZONES) == []  # type: ignore[arg-type]


async def test_metrics_move_with_the_file_and_stop_with_the_controller(
    metered: tuple[Harness, Metrics],
) -> None:
    h, metrics = metered
    await h.until("serving", lambda: metrics.serving is not None)
    first = metrics.serving
    h.write(desired_text("slots: []\n"))  # settings.metrics removed: the endpoint closes
    await h.until("stopped serving", lambda: metrics.serving is None)
    assert first is not None
    with pytest.raises(Exception):  # noqa: B017 - refused or reset, whichever the OS says
        await asyncio.to_thread(scrape, f"http://{first}/metrics")


def test_a_taken_port_is_reported_and_the_global_registry_stays_empty(tmp_path: Path) -> None:
    import socket

    from prometheus_client import REGISTRY

    from reconciler.adapters.statedir import StateDir

    events = EventLog(StateDir(tmp_path / "state").ensure())
    metrics = Metrics(events)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        metrics.serve(address)
    assert metrics.serving is None
    failed = [e for e in read_events(events.path) if e["kind"] == "metrics.failed"]
    assert [e["address"] for e in failed] == [address]
    metrics.serve("127.0.0.1:0")  # another address: tried again, and served
    assert metrics.serving is not None
    families = scrape(f"http://{metrics.serving}/metrics")
    assert {f"{m.PREFIX}reconcile", f"{m.PREFIX}actions"} <= families.keys()
    assert httpx.get(f"http://{metrics.serving}/").status_code == 404  # /metrics alone
    metrics.close()
    assert metrics.serving is None
    assert not [n for n in REGISTRY._names_to_collectors if n.startswith(m.PREFIX)]


def test_800_idle_connections_hold_few_threads_and_the_endpoint_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: one thread per connection and no read timeout, so 800 half-open connections
    made 806 threads for good. Now at most ``MAX_CONNECTIONS`` are served at once (the rest
    closed on arrival) and a silent one is dropped after ``READ_TIMEOUT``."""
    import socket
    import threading
    import time

    from reconciler.adapters.statedir import StateDir
    from reconciler.runtime import metrics as runtime_metrics

    monkeypatch.setattr(runtime_metrics._Quiet, "timeout", 0.5)
    metrics = Metrics(EventLog(StateDir(tmp_path / "state").ensure()))
    metrics.serve("127.0.0.1:0")
    assert metrics.serving is not None
    where = (metrics.serving.host, metrics.serving.port)
    before = threading.active_count()
    idle = []
    try:
        for _ in range(800):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(where)  # connected, then silent: never a request
            idle.append(s)
        most = 0
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            most = max(most, threading.active_count() - before)
            time.sleep(0.01)
        assert most <= runtime_metrics.MAX_CONNECTIONS + 1, most
    finally:
        for s in idle:
            s.close()
    try:
        deadline = time.monotonic() + 10.0
        while True:  # the burst is over: served again (its last stragglers time out)
            try:
                families = scrape(f"http://{metrics.serving}/metrics")
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert f"{m.PREFIX}reconcile" in families
    finally:
        metrics.close()
    deadline = time.monotonic() + 10.0  # the last handlers end with their read timeout
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before
