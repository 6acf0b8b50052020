"""The tmux mirror against a real, private tmux server: creates only, never kills."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import libtmux
import pytest

from reconciler.adapters.tmux import TmuxMirror, WantedWindow
from reconciler.errors import SetupFailed

pytestmark = pytest.mark.integration

SLEEP = ("sleep", "600")


def want(session: str, window: str, argv: tuple[str, ...] = SLEEP, **env: str) -> WantedWindow:
    return WantedWindow(session=session, window=window, argv=argv, environment=env)


def targets(server: libtmux.Server) -> list[str]:
    return sorted(f"{w.session_name}:{w.window_name}" for w in server.windows)


def window_ids(server: libtmux.Server) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for w in server.windows:
        out.setdefault(f"{w.session_name}:{w.window_name}", []).append(str(w.window_id))
    return out


def session(server: libtmux.Server, name: str) -> libtmux.Session:
    found = server.sessions.get(session_name=name, default=None)
    assert found is not None
    return found


async def wait_dead(server: libtmux.Server, target: str, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for w in server.windows:
            if f"{w.session_name}:{w.window_name}" == target and w.pane_dead == "1":
                return True
        await asyncio.sleep(0.05)
    return False


async def test_creates_one_window_per_wanted_slot_in_its_zone_session(
    tmux_mirror: TmuxMirror, tmux_server: libtmux.Server
) -> None:
    report = await tmux_mirror.sync(
        [want("tpu-usc2b", "spot-v4-8-usc2b-1"), want("tpu-ew4a", "spot-v6e-8-ew4a-1")]
    )
    assert sorted(report.created) == ["tpu-ew4a:spot-v6e-8-ew4a-1", "tpu-usc2b:spot-v4-8-usc2b-1"]
    assert report.existing == ()
    assert targets(tmux_server) == ["tpu-ew4a:spot-v6e-8-ew4a-1", "tpu-usc2b:spot-v4-8-usc2b-1"]
    # a later window for the same zone joins the existing session
    await tmux_mirror.sync([want("tpu-usc2b", "spot-v4-8-usc2b-2")])
    assert len(tmux_server.sessions.filter(session_name="tpu-usc2b")) == 1
    assert "tpu-usc2b:spot-v4-8-usc2b-2" in targets(tmux_server)


async def test_second_sync_creates_nothing_and_kills_nothing(
    tmux_mirror: TmuxMirror, tmux_server: libtmux.Server
) -> None:
    wanted = [want("tpu-usc2b", "a-1"), want("tpu-usc2b", "b-1")]
    await tmux_mirror.sync(wanted)
    session(tmux_server, "tpu-usc2b").new_window(
        window_name="someone-elses", window_shell="sleep 600", attach=False
    )
    before = window_ids(tmux_server)
    report = await tmux_mirror.sync(wanted)
    assert report.created == ()
    assert sorted(report.existing) == ["tpu-usc2b:a-1", "tpu-usc2b:b-1"]
    assert window_ids(tmux_server) == before


async def test_window_of_slot_that_left_active_is_orphaned_and_kept(
    tmux_mirror: TmuxMirror, tmux_server: libtmux.Server
) -> None:
    await tmux_mirror.sync([want("tpu-usc2b", "a-1"), want("tpu-ew4a", "b-1")])
    # b-1 is no longer ACTIVE: the controller stops wanting it
    await tmux_mirror.sync([want("tpu-usc2b", "a-1")])
    inventory = await tmux_mirror.inventory({"a-1"})
    assert [w.target for w in inventory.orphans] == ["tpu-ew4a:b-1"]
    assert sorted(w.target for w in inventory.windows) == ["tpu-ew4a:b-1", "tpu-usc2b:a-1"]
    assert inventory.targets()[1] == ["tpu-ew4a:b-1"]
    assert "tpu-ew4a:b-1" in targets(tmux_server)


async def test_inventory_ignores_non_tpu_sessions_and_may_not_know_active_slots(
    tmux_mirror: TmuxMirror, tmux_server: libtmux.Server
) -> None:
    tmux_server.new_session(session_name="work", window_name="a-1", window_command="sleep 600")
    await tmux_mirror.sync([want("tpu-usc2b", "a-1")])
    unknown = await tmux_mirror.inventory(None)
    assert [w.target for w in unknown.windows] == ["tpu-usc2b:a-1"]
    assert unknown.orphans == () and not unknown.known


async def test_duplicate_window_is_left_alone(
    tmux_mirror: TmuxMirror, tmux_server: libtmux.Server
) -> None:
    await tmux_mirror.sync([want("tpu-usc2b", "a-1")])
    session(tmux_server, "tpu-usc2b").new_window(
        window_name="a-1", window_shell="sleep 600", attach=False
    )
    before = window_ids(tmux_server)
    assert len(before["tpu-usc2b:a-1"]) == 2
    report = await tmux_mirror.sync([want("tpu-usc2b", "a-1")])
    assert report.created == () and report.existing == ("tpu-usc2b:a-1",)
    assert window_ids(tmux_server) == before
    inventory = await tmux_mirror.inventory({"a-1"})
    assert [w.target for w in inventory.windows] == ["tpu-usc2b:a-1"] * 2


async def test_fast_exiting_window_stays_on_a_server_the_mirror_starts(
    tmux_mirror: TmuxMirror, tmux_server: libtmux.Server
) -> None:
    assert not tmux_server.is_alive()
    await tmux_mirror.sync([want("tpu-usc2b", "a-1", ("sh", "-c", "exit 3"))])
    assert await wait_dead(tmux_server, "tpu-usc2b:a-1")
    assert tmux_server.cmd("show-options", "-gv", "remain-on-exit").stdout == ["on"]
    inventory = await tmux_mirror.inventory({"a-1"})
    assert [(w.target, w.dead) for w in inventory.windows] == [("tpu-usc2b:a-1", True)]


async def test_fast_exiting_window_stays_on_a_running_server(
    tmux_mirror: TmuxMirror, tmux_server: libtmux.Server
) -> None:
    tmux_server.new_session(session_name="work", window_command="sleep 600")
    assert tmux_server.cmd("show-options", "-gv", "remain-on-exit").stdout == ["off"]
    await tmux_mirror.sync(
        [want("tpu-usc2b", "a-1", ("true",)), want("tpu-usc2b", "a-2", ("true",))]
    )
    assert await wait_dead(tmux_server, "tpu-usc2b:a-1")
    assert await wait_dead(tmux_server, "tpu-usc2b:a-2")
    assert tmux_server.cmd("show-options", "-gv", "remain-on-exit").stdout == ["on"]


async def test_environment_reaches_the_command_and_the_shell_interprets_nothing(
    tmux_mirror: TmuxMirror, tmux_server: libtmux.Server, tmp_path: Path
) -> None:
    pwned = tmp_path / "pwned"
    hostile = f"$(touch {pwned}); `touch {pwned}` 'q\" \\ * #{{session_name}}"
    script = 'printf "%s|%s" "$TR_VAR" "$1" > "$2"; sleep 600'

    def argv(out: Path) -> tuple[str, ...]:
        return ("sh", "-c", script, "sh", hostile, str(out))

    out_a, out_b = tmp_path / "a", tmp_path / "b"
    await tmux_mirror.sync(
        [
            want("tpu-usc2b", "a-1", argv(out_a), TR_VAR="x y"),  # starts the server
            want("tpu-usc2b", "b-1", argv(out_b), TR_VAR="z"),  # joins it
        ]
    )
    deadline = time.monotonic() + 5
    while not (out_a.exists() and out_b.exists()) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.1)
    assert out_a.read_text() == f"x y|{hostile}"
    assert out_b.read_text() == f"z|{hostile}"
    assert not pwned.exists()


async def test_close_kills_every_window_of_that_slot_and_nothing_else(
    tmux_mirror: TmuxMirror, tmux_server: libtmux.Server
) -> None:
    await tmux_mirror.sync([want("tpu-usc2b", "a-1"), want("tpu-usc2b", "b-1")])
    tmux_server.new_session(session_name="work", window_name="b-1", window_command="sleep 600")
    closed = await tmux_mirror.close("b-1")
    assert [w.target for w in closed] == ["tpu-usc2b:b-1"]
    assert targets(tmux_server) == ["tpu-usc2b:a-1", "work:b-1"]
    assert await tmux_mirror.close("b-1") == ()


async def test_no_server_yet_gives_an_empty_inventory_and_starts_nothing(
    tmux_mirror: TmuxMirror, tmux_server: libtmux.Server
) -> None:
    inventory = await tmux_mirror.inventory({"a-1"})
    assert inventory.windows == () and inventory.note and "no tmux server" in inventory.note
    assert (await tmux_mirror.sync([])).created == ()
    assert not tmux_server.is_alive()


async def test_missing_tmux_is_a_temporary_sync_error_and_an_inventory_note(
    tmp_path: Path,
) -> None:
    async with TmuxMirror("trt-missing", tmux_bin=str(tmp_path / "no-tmux")) as mirror:
        with pytest.raises(SetupFailed, match="not installed"):
            await mirror.sync([want("tpu-usc2b", "a-1")])
        inventory = await mirror.inventory({"a-1"})
        assert inventory.windows == () and inventory.note == "tmux is not installed"


async def test_sync_runs_off_the_event_loop(tmux_mirror: TmuxMirror) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    task = asyncio.create_task(ticker())
    try:
        await tmux_mirror.sync([want("tpu-usc2b", f"a-{i}") for i in range(1, 6)])
    finally:
        task.cancel()
    assert ticks > 5  # the loop kept running while tmux was forked five-plus times


async def test_closed_mirror_refuses_work(tmux_socket: str) -> None:
    mirror = TmuxMirror(tmux_socket)
    await mirror.aclose()
    with pytest.raises(SetupFailed, match="closed"):
        await mirror.inventory(None)


def start_command(server: libtmux.Server, target: str) -> str:
    proc = server.cmd("display-message", "-p", "-t", target, "#{pane_start_command}")
    return (proc.stdout or [""])[0].strip().strip('"')


async def test_dead_window_of_an_older_node_is_respawned_for_the_new_one(
    tmux_mirror: TmuxMirror, tmux_server: libtmux.Server
) -> None:
    old = want("tpu-usc2b", "alpha", ("true", "old-node"))
    await tmux_mirror.sync([old])
    assert await wait_dead(tmux_server, "tpu-usc2b:alpha")
    ids = window_ids(tmux_server)

    same = await tmux_mirror.sync([old])  # the user exited on the current node: left alone
    assert same.respawned == () and start_command(tmux_server, "tpu-usc2b:alpha") == old.command

    new = want("tpu-usc2b", "alpha", ("sleep", "600"))
    report = await tmux_mirror.sync([new])
    assert report.respawned == ("tpu-usc2b:alpha",) and report.created == ()
    assert window_ids(tmux_server) == ids  # the same window, restarted in place
    assert start_command(tmux_server, "tpu-usc2b:alpha") == new.command

    other = want("tpu-usc2b", "alpha", ("sleep", "601"))
    live = await tmux_mirror.sync([other])  # a live window is never restarted
    assert live.respawned == ()
    assert start_command(tmux_server, "tpu-usc2b:alpha") == new.command
