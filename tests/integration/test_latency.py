"""The LATENCY column with real sockets: the adapter's connect against a listening and a closed
port on loopback, and the real controller measuring a held node whose worker address is a
127.0.0.x that listens on ``settings.ssh_port`` (the emulator hands out that address), shown
by ``status`` and ``status --json``."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from reconciler.adapters import latency
from reconciler.adapters.latency import connect_time
from reconciler.emulator import Emulator
from tests.fixtures.controller import Harness, desired_text
from tests.support.cli import Cli, clean_env

pytestmark = pytest.mark.integration

WORKER = "127.0.0.77"  # every 127.0.0.x is loopback on Linux: the held node's worker 0


@pytest.fixture
async def listening() -> AsyncIterator[int]:
    """A TCP server on WORKER that accepts and closes; its port."""

    async def close(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(close, WORKER, 0)
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        server.close()
        await server.wait_closed()


def closed_port() -> int:
    """A port on WORKER with nothing listening (bound once, then let go)."""
    with socket.socket() as s:
        s.bind((WORKER, 0))
        return int(s.getsockname()[1])


# --- the adapter ------------------------------------------------------------------------------


async def test_a_listening_port_gives_its_connect_time(listening: int) -> None:
    seconds = await connect_time(WORKER, listening)
    assert seconds is not None and 0.0 < seconds < latency.CONNECT_TIMEOUT


async def test_a_closed_port_is_unknown_at_once() -> None:
    start = time.monotonic()
    assert await connect_time(WORKER, closed_port(), timeout=5.0) is None
    assert time.monotonic() - start < 1.0  # refused, not waited for


async def test_a_documentation_address_is_unknown_without_a_connect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dialled: list[str] = []
    real = asyncio.open_connection

    async def spy(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        dialled.append(host)
        return await real(host, port)

    monkeypatch.setattr(asyncio, "open_connection", spy)
    assert await connect_time("203.0.113.7", 22, timeout=30.0) is None  # the emulator's nodes
    assert await connect_time("2001:db8::1", 22, timeout=30.0) is None
    assert await connect_time("not-an-ip.example", 22, timeout=30.0) is None  # no DNS either
    assert dialled == []


# --- the controller ---------------------------------------------------------------------------


@pytest.fixture
def fast_emulator() -> Iterator[Emulator]:
    """The harness's emulator, handing out WORKER as the nodes' external address."""
    with Emulator(speed=20.0, ip_pool=[WORKER]) as emu:
        yield emu


SLOTS = """\
slots:
  - {name: near, zone: us-central2-b, accelerator: v4-8, want: held}
  - {name: far, zone: europe-west4-a, accelerator: v6e-8, want: held}
"""


async def test_the_controller_measures_a_held_zone_and_status_shows_it(
    harness: Harness, listening: int
) -> None:
    from reconciler.runtime.backends import make_cloud
    from reconciler.runtime.controller import Controller
    from reconciler.runtime.desired_loader import DesiredLoader
    from reconciler.runtime.events import EventLog

    h = harness
    h.emulator.set_capacity("europe-west4-a", "v6e-8", 0)  # far stays queued: nothing held there
    h.write(desired_text(SLOTS).replace("settings:\n", f"settings:\n  ssh_port: {listening}\n", 1))
    controller = Controller(
        store=DesiredLoader(h.path, h.env),
        state=h.state,
        cloud_factory=lambda d: make_cloud(d, h.env),
        events=EventLog(h.state),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    try:

        def near() -> dict[str, object]:
            return next(s for s in h.snapshot()["slots"] if s["name"] == "near")

        await h.until(
            "near ACTIVE", lambda: h.state.status.exists() and near()["state"] == "ACTIVE"
        )
        assert near()["ips"] == [WORKER]
        await h.until("a round trip to near's zone", lambda: "latency_ms" in near())
        measured = near()["latency_ms"]
        assert isinstance(measured, float) and 0.0 < measured < 2000.0
        far = next(s for s in h.snapshot()["slots"] if s["name"] == "far")
        assert far["state"] != "ACTIVE" and "latency_ms" not in far  # nothing held there

        cli = Cli(cwd=h.path.parent, env=clean_env(h.env), timeout=60)
        args = ("-f", str(h.path), "--state-dir", str(h.state.root), "status")
        human = await asyncio.to_thread(cli, *args)
        assert human.returncode == 0, human.stderr
        lines = {line.split()[0]: line.split() for line in human.stdout.splitlines() if line}
        assert lines["SLOT"][:3] == ["SLOT", "ZONE", "LATENCY"]
        assert re.fullmatch(r"<1ms|~\d+ms", lines["near"][2]), lines["near"]
        assert lines["far"][2] == "-"
        machine = await asyncio.to_thread(cli, *args, "--json")
        rows = {s["name"]: s for s in json.loads(machine.stdout)["slots"]}
        assert isinstance(rows["near"]["latency_ms"], float) and "latency_ms" not in rows["far"]
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=20)
    memory = json.loads(h.state.memory.read_text())
    assert set(memory["latency"]) == {"us-central2-b"}  # kept for the next controller
    assert memory["latency"]["us-central2-b"]["ms"] > 0
