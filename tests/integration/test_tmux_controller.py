"""The tmux SSH mirror through the real controller, on a private tmux server.

A slot with ``setup.tmux`` gets one window ``tpu-<zone code>:<slot>`` once it is ACTIVE, running
OpenSSH to worker 0 (a real sshd) pinned under the node instance's HostKeyAlias. The controller
creates windows and never kills one: not when the slot is released, not across a restart; a
window whose slot is not ACTIVE is reported as an orphan in status.json.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import libtmux
import pytest

from reconciler.adapters.hostkeys import HostKeyStore
from reconciler.model.names import host_key_alias
from tests.fixtures.setup_world import ZONE, ZONE_CODE, SetupWorld

pytestmark = pytest.mark.integration

TARGET = f"tpu-{ZONE_CODE}:alpha"


def v4_8(world: SetupWorld, socket: str, want: str = "held") -> str:
    return world.desired(
        "slots:\n"
        "  - name: alpha\n"
        f"    zone: {ZONE}\n"
        "    accelerator: v4-8\n"
        f"    want: {want}\n"
        "    setup: {tmux: true}\n",
        settings=f"tmux_socket: {socket}",
        defaults="{bootstrap: false, tmux: false}",
    )


def panes(server: libtmux.Server) -> dict[str, list[tuple[str, str]]]:
    """``session:window`` -> [(window id, start command)] for every pane on the server."""
    if not server.is_alive():
        return {}
    out: dict[str, list[tuple[str, str]]] = {}
    for w in server.windows:
        for p in w.panes:
            target = f"{w.session_name}:{w.window_name}"
            out.setdefault(target, []).append((str(w.window_id), str(p.pane_start_command)))
    return out


async def active_window(
    setup_world: Callable[[int], SetupWorld], server: libtmux.Server, socket: str
) -> SetupWorld:
    """A v4-8 on one sshd, queued without capacity first, then ACTIVE with its window open."""
    world = setup_world(1)
    world.harness.emulator.set_capacity(ZONE, "v4-8", 0, shortage="wait")
    world.write(v4_8(world, socket))
    await world.start()
    await world.until(
        "alpha waits for capacity",
        lambda: world.slot("alpha")["state"] == "WAITING_FOR_RESOURCES",
    )
    await asyncio.sleep(1.5)  # passes while the slot is not ACTIVE open nothing
    assert panes(server) == {}
    world.harness.emulator.set_capacity(ZONE, "v4-8", None)
    await world.until("the window opened", lambda: TARGET in panes(server))
    assert world.harness.state_of(ZONE, "alpha") == "ACTIVE"
    return world


async def test_window_opens_once_active_and_is_never_killed(
    setup_world: Callable[[int], SetupWorld], tmux_server: libtmux.Server, tmux_socket: str
) -> None:
    world = await active_window(setup_world, tmux_server, tmux_socket)
    instance = world.slot("alpha")["instance"]
    alias = host_key_alias(instance, 0)
    [(window_id, command)] = panes(tmux_server)[TARGET]
    assert "127.0.0.2" in command and f"HostKeyAlias={alias}" in command, command
    assert f"-p {world.port}" in command
    assert tmux_server.cmd("show-options", "-gv", "remain-on-exit").stdout == ["on"]
    # The window's ssh really reached worker 0 and pinned its key under the instance's alias.
    await world.until(
        "worker 0's key pinned by the window's ssh",
        lambda: bool(HostKeyStore(world.state.known_hosts).pinned(alias)),
    )
    await world.until("status lists the window", lambda: world.snapshot()["tmux"]["windows"])
    assert world.snapshot()["tmux"] == {"windows": [TARGET], "orphans": []}
    assert world.slot("alpha")["tmux"] == {"target": TARGET, "open": True}

    await world.restart()  # a new controller: nothing created twice, nothing killed
    await asyncio.sleep(1.5)
    assert panes(tmux_server) == {TARGET: [(window_id, command)]}

    world.write(v4_8(world, tmux_socket, want="released"))
    await world.until("alpha deleted", lambda: world.harness.qr(ZONE, "alpha") is None)
    await world.until(
        "status lists the orphan", lambda: world.snapshot()["tmux"]["orphans"] == [TARGET]
    )
    assert panes(tmux_server) == {TARGET: [(window_id, command)]}

    await world.restart()
    await asyncio.sleep(1.5)
    assert panes(tmux_server) == {TARGET: [(window_id, command)]}
    assert world.snapshot()["tmux"] == {"windows": [TARGET], "orphans": [TARGET]}


async def test_orphan_of_a_slot_removed_from_the_file_is_still_reported(
    setup_world: Callable[[int], SetupWorld], tmux_server: libtmux.Server, tmux_socket: str
) -> None:
    world = await active_window(setup_world, tmux_server, tmux_socket)
    world.write(v4_8(world, tmux_socket, want="released"))
    await world.until("alpha deleted", lambda: world.harness.qr(ZONE, "alpha") is None)
    world.write(world.desired("slots: []\n", settings=f"tmux_socket: {tmux_socket}"))
    await world.until("the slot left the file", lambda: world.snapshot()["slots"] == [])
    await asyncio.sleep(1.5)
    assert TARGET in panes(tmux_server)
    assert world.snapshot()["tmux"]["orphans"] == [TARGET]
