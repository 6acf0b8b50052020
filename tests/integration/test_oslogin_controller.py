"""A steady controller whose OS Login lookup keeps failing stays quiet.

Forty ACTIVE slots with ``setup.tmux`` and no ``settings.ssh_user``: every slot's tmux step
needs the OS Login user, and the real gcloud is pointed
(``CLOUDSDK_API_ENDPOINT_OVERRIDES_OSLOGIN``) at a local endpoint that refuses every request
with 403 and counts them. The production controller and ``LiveSetup`` run against the
emulator (node addresses on loopback, so the steps get as far as the lookup); their clock is
``time.time() + offset`` so a test can jump past a backoff. Asserted: one lookup for all forty
slots, none more inside the backoff window, exactly one more after it; each slot shows the
cause and ``settings.ssh_user``; the failure is on disk for CLI verbs; and the poll stays at
the steady interval meanwhile, also while forty retries wait on a slow lookup.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.statedir import StateDir
from reconciler.emulator import Emulator
from reconciler.runtime.backends import make_cloud
from reconciler.runtime.controller import Controller
from reconciler.runtime.desired_loader import DesiredLoader
from reconciler.runtime.events import EventLog
from reconciler.runtime.setup import LiveSetup
from tests.support.oslogin import RefusingOsLogin
from tests.support.oslogin import refusing_oslogin as refusing_oslogin_server
from tests.support.tools import require_tool
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

ZONE = "us-central2-b"
SLOTS = 40
#: Loopback, not a documentation range: the steps get past ``check_dialable`` to the lookup.
IPS = [f"127.0.0.{i}" for i in range(100, 104)]


@pytest.fixture
def refusing_oslogin() -> Iterator[RefusingOsLogin]:
    with refusing_oslogin_server() as server:
        yield server


@dataclass
class World:
    emulator: Emulator
    path: Path
    state: StateDir
    env: dict[str, str]
    offset: float = 0.0

    def clock(self) -> float:
        return time.time() + self.offset

    def memory_errors(self) -> dict[str, Any]:
        errors: dict[str, Any] = json.loads(self.state.memory.read_text())["errors"]
        return errors

    def list_calls(self) -> int:
        return sum(
            1
            for r in self.emulator.requests()
            if r.method == "GET" and r.path.endswith("/queuedResources")
        )


@pytest.fixture
async def world(
    refusing_oslogin: RefusingOsLogin,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmux_socket: str,
    tmux_server: object,
) -> AsyncIterator[World]:
    require_tool("gcloud")
    emulator = Emulator(speed=20.0, ip_pool=IPS).start()
    token = tmp_path / "token"
    token.write_text("test-token\n")
    env = emulator.gcloud_env(str(tmp_path / "gcloud"), str(token), "test-project")
    env["CLOUDSDK_API_ENDPOINT_OVERRIDES_OSLOGIN"] = refusing_oslogin.url
    env["CLOUDSDK_CORE_ACCOUNT"] = "alice@example.com"
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    path = tmp_path / "desired.yaml"
    slots = "".join(
        f"  - {{name: s{i:02d}, zone: {ZONE}, accelerator: v4-8, want: held}}\n"
        for i in range(SLOTS)
    )
    path.write_text(
        "project: test-project\n"
        "settings:\n"
        "  backend: rest\n"
        "  poll_interval: 1s\n"
        "  fast_poll_interval: 0.2s\n"
        f"  tmux_socket: {tmux_socket}\n"
        "defaults:\n"
        "  setup: {tmux: true}\n"
        "slots:\n" + slots
    )
    state = StateDir(tmp_path / "state").ensure()
    try:
        yield World(emulator, path, state, {**os.environ, **env})
    finally:
        emulator.stop()


@pytest.fixture
async def running(world: World) -> AsyncIterator[World]:
    controller = Controller(
        store=DesiredLoader(world.path, world.env),
        state=world.state,
        cloud_factory=lambda d: make_cloud(d, world.env),
        events=EventLog(world.state),
        setup=LiveSetup(world.path, world.state, world.env, clock=world.clock),
        clock=world.clock,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    try:
        yield world
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=30)


async def until(what: str, check: Any, timeout: float = 60.0) -> None:
    def safe() -> bool:
        try:
            return bool(check())
        except (FileNotFoundError, json.JSONDecodeError, KeyError):
            return False

    if not await eventually(safe, timeout, step=0.1):
        pytest.fail(f"timed out after {timeout}s waiting until {what}")


def _children_cpu() -> float:
    """CPU seconds of this process's finished child processes (gcloud runs among them)."""
    times = os.times()
    return times.children_user + times.children_system


def tmux_errors(world: World) -> dict[str, Any]:
    return {k: e for k, e in world.memory_errors().items() if k.endswith(":tmux")}


async def test_forty_slots_share_one_failed_lookup_per_backoff_window(
    running: World, refusing_oslogin: RefusingOsLogin
) -> None:
    world = running
    await until("every slot's tmux step failed once", lambda: len(tmux_errors(world)) == SLOTS)
    assert len(refusing_oslogin.hits) == 1, refusing_oslogin.hits
    [message] = {e["message"] for e in tmux_errors(world).values()}
    assert "OS Login is refused here" in message and "settings.ssh_user" in message
    assert "gcloud feedback" not in message and "\n" not in message
    record = json.loads((world.state.root / "oslogin_user.failed").read_text())
    assert "OS Login is refused here" in record["error"]

    # Steady: every QR ACTIVE, only the failing steps pending. Poll at the steady 1 s, not
    # at 0.2 s, and run no gcloud.
    before, children = world.list_calls(), _children_cpu()
    await asyncio.sleep(4.0)
    passes = world.list_calls() - before
    assert 2 <= passes <= 7, passes  # ~4 at 1 s; ~20 at the fast interval
    assert len(refusing_oslogin.hits) == 1
    assert _children_cpu() - children < 0.05  # no gcloud (or other) child process ran

    # Past the first window (1 min): all forty steps are sent again and share one lookup,
    # which now takes 3 s to be refused. Forty retries in flight all that time do not make
    # the controller poll fast: they are steps in backoff, and their end wakes it anyway.
    refusing_oslogin.delay = 3.0
    world.offset += 61.0
    await until("the second lookup", lambda: len(refusing_oslogin.hits) == 2)
    before = world.list_calls()
    await asyncio.sleep(2.5)
    passes = world.list_calls() - before
    assert passes <= 4, passes  # ~2 at 1 s; ~12 at the fast interval
    await until(
        "every step failed a second time",
        lambda: all(e["failures"] >= 2 for e in tmux_errors(world).values()),
    )
    await asyncio.sleep(2.0)
    assert len(refusing_oslogin.hits) == 2, refusing_oslogin.hits
    record = json.loads((world.state.root / "oslogin_user.failed").read_text())
    assert record["failures"] == 2


async def test_an_emulated_nodes_steps_fail_once_permanently_and_look_nothing_up(
    cloud_world: Any, tmux_socket: str, tmux_server: object
) -> None:
    # The emulator's own addresses (203.0.113.x): no machine stands behind them. The tmux
    # step fails at once with NoMachine, permanently (not retried in a loop), and neither the
    # OS Login user is looked up nor anything dialled.
    world = cloud_world()
    world.write(
        world.desired(
            f"slots:\n  - {{name: alpha, zone: {ZONE}, accelerator: v4-8, want: held}}\n",
            settings=f"tmux_socket: {tmux_socket}",
            defaults="{tmux: true}",
        )
    )
    await world.start()
    await world.until(
        "alpha's tmux step failed",
        lambda: "us-central2-b/alpha:tmux" in world.memory()["errors"],
        timeout=30,
    )
    error = world.memory()["errors"]["us-central2-b/alpha:tmux"]
    assert "is an emulated node's address" in error["message"]
    assert "no machine stands behind it" in error["message"]
    assert error["permanent_fingerprint"]
    world.clock_offset += 3600.0  # far past any backoff: a permanent error stays put
    await asyncio.sleep(2.0)
    error = world.memory()["errors"]["us-central2-b/alpha:tmux"]
    assert error["failures"] == 1
    [failed] = world.events("action.failed", slot="alpha", action="tmux")
    assert failed["retry"] == "permanent" and "no machine stands behind it" in failed["error"]
    assert not world.state.oslogin_user.exists()
    assert not (world.state.root / "oslogin_user.failed").exists()
