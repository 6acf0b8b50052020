"""End to end: the TUI in a real tmux pane (private server), read with capture-pane.

With a running controller and the emulator: pressing ``c`` on a released slot edits
desired.yaml; the controller queues it; the TUI, which only watches the snapshot, shows it
reach ACTIVE. At 80x24 on a fixed snapshot: ``B`` over a held ACTIVE slot and a queued one
asks first and, refused, changes nothing; every key of the help is reachable by scrolling."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import pytest

from reconciler.runtime.lock import ControllerLock
from tests.fixtures.controller import Harness, desired_text
from tests.support.cli import CLI_ARGV, ROOT
from tests.support.tui_world import World, make_world, snapshot
from tests.support.waiting import eventually

SLOT = "spot-v48-usc2b-1"
BODY = f"""\
slots:
  - name: {SLOT}  # the one the test holds
    zone: us-central2-b
    accelerator: v4-8
    want: released
"""

pytestmark = pytest.mark.integration


@pytest.fixture
def harness_with_file(harness: Harness) -> Harness:
    harness.write(desired_text(BODY))
    return harness


def _tmux(socket: str, *args: str) -> str:
    done = subprocess.run(
        ["tmux", "-L", socket, "-f", "/dev/null", *args],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    return done.stdout


async def _screen_until(socket: str, what: str, check, timeout: float = 30.0) -> str:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = _tmux(socket, "capture-pane", "-p", "-t", "tui")
        if check(screen):
            return screen
        await asyncio.sleep(0.1)
    pytest.fail(f"timed out waiting until {what}; the screen:\n{screen}")


def _slot_line(screen: str) -> str:
    return next((line for line in screen.splitlines() if SLOT in line), "")


async def test_c_in_the_tui_holds_a_slot_until_active(
    harness_with_file: Harness, running: Harness, tmux_socket: str, tmux_server: object
) -> None:
    # (harness_with_file comes first: the controller starts on the file it wrote)
    await running.until(
        "the controller has written a snapshot", lambda: running.state.status.exists()
    )
    lock = ControllerLock(running.state)  # what `tpu-reconciler run` holds around the loop
    lock.acquire()
    try:
        env = {
            "PYTHONPATH": str(ROOT),
            "HOME": os.environ.get("HOME", "/root"),
            "PATH": os.environ.get("PATH", ""),
            "TERM": "xterm-256color",
        }
        argv = [
            *CLI_ARGV,
            "--file",
            str(running.path),
            "--state-dir",
            str(running.state.root),
            "tui",
        ]
        env_args = [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
        _tmux(
            tmux_socket, "new-session", "-d", "-s", "tui", "-x", "150", "-y", "40", *env_args, *argv
        )
        screen = await _screen_until(
            tmux_socket,
            "the TUI shows the slot NOT_QUEUED",
            lambda s: "NOT_QUEUED" in _slot_line(s),
        )
        assert "controller pid" in screen
        _tmux(tmux_socket, "send-keys", "-t", "tui", "c")
        await _screen_until(
            tmux_socket, "the slot is ACTIVE on screen", lambda s: "ACTIVE" in _slot_line(s)
        )
        text = running.path.read_text()
        assert "want: held" in text and "# the one the test holds" in text
        assert running.state_of("us-central2-b", SLOT) == "ACTIVE"
        _tmux(tmux_socket, "send-keys", "-t", "tui", "q")

        def ended() -> bool:
            listed = subprocess.run(
                ["tmux", "-L", tmux_socket, "list-sessions"], capture_output=True, text=True
            )
            return "tui" not in listed.stdout

        assert await eventually(ended, timeout=10), "q did not end the TUI"
    finally:
        lock.release()


def _start_tui(socket: str, world: World, width: int, height: int) -> None:
    env = {
        "PYTHONPATH": str(ROOT),
        "HOME": str(world.path.parent),
        "PATH": os.environ.get("PATH", ""),
        "TERM": "xterm-256color",
    }
    argv = [
        *CLI_ARGV,
        "--file",
        str(world.path),
        "--state-dir",
        str(world.state.root),
        "tui",
    ]
    env_args = [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
    size = ("-x", str(width), "-y", str(height))
    _tmux(socket, "new-session", "-d", "-s", "tui", *size, *env_args, *argv)


async def _changed(socket: str, screen: str, timeout: float = 1.5) -> str | None:
    """The screen once it differs from ``screen``; None if it stays the same."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = _tmux(socket, "capture-pane", "-p", "-t", "tui")
        if now != screen:
            return now
        await asyncio.sleep(0.05)
    return None


def _inside_box(screen: str) -> list[str]:
    """The lines of a dialog drawn over the screen: what is between its side borders."""
    out = []
    for line in screen.splitlines():
        if line.count("│") >= 2:
            out.append(line[line.index("│") + 1 : line.rindex("│")].strip())
    return out


def _keys(socket: str, *keys: str) -> None:
    for key in keys:  # one at a time, as a person types them
        _tmux(socket, "send-keys", "-t", "tui", key)


async def test_at_80x24_B_asks_first_and_every_key_of_help_is_reachable(
    tmp_path: Path, tmux_socket: str, tmux_server: object
) -> None:
    """The TUI in a real 80x24 terminal, on the snapshot of a world with a held ACTIVE
    v4-8 and a held queued one: B names both with their states and asks; n changes not a
    byte. Then ? and j until the help's end: every key it lists was on screen."""
    from reconciler.surfaces.tui._app import KEYS, NAVIGATION

    world = make_world(tmp_path)
    doc = snapshot(world.path)
    doc["slots"][2]["state"] = "WAITING_FOR_RESOURCES"  # spot-v48-usc2b-2, held, queued again
    world.write_snapshot(doc)
    before = world.path.read_bytes()
    _start_tui(tmux_socket, world, 80, 24)
    screen = await _screen_until(
        tmux_socket, "the table is on screen", lambda s: "spot-v48-usc2b-2" in s and "? help" in s
    )
    footer = screen.rstrip().splitlines()[-1]
    assert "? help" in footer and "q quit" in footer
    assert "us-central2-b" in screen  # the zone column stays at 80 columns
    # The cursor starts on od-v48-usc2b-1 (held, ACTIVE); spot-v48-usc2b-2 is two below.
    _keys(tmux_socket, "b", "j", "j", "b")
    await _screen_until(
        tmux_socket,
        "both slots are in the bucket",
        lambda s: "*od-v48-usc2b-1" in s and "*spot-v48-usc2b-2" in s,
    )
    _keys(tmux_socket, "B")
    await _screen_until(tmux_socket, "B asks for a second press", lambda s: "press B again" in s)
    _keys(tmux_socket, "B")
    question = await _screen_until(
        tmux_socket, "B asks y/n", lambda s: "Race? (y/n)" in s and "y: yes" in s
    )
    flat = " ".join(question.split())
    assert "od-v48-usc2b-1 (ACTIVE, held)" in flat
    assert "spot-v48-usc2b-2 (WAITING_FOR_RESOURCES, held)" in flat
    _keys(tmux_socket, "n")
    await _screen_until(tmux_socket, "the answer is shown", lambda s: "nothing changed" in s)
    assert world.path.read_bytes() == before
    assert not world.state.audit.exists()

    _keys(tmux_socket, "?")
    seen: set[str] = set()
    screen = await _screen_until(tmux_socket, "the help is open", lambda s: "escape closes" in s)
    for _ in range(80):
        seen.update(_inside_box(screen))
        _keys(tmux_socket, "j")
        moved = await _changed(tmux_socket, screen)
        if moved is None:  # j moves no more: the end of the list
            break
        screen = moved
    for key, what in (*NAVIGATION, *KEYS):
        assert any(line.startswith(key) and what[:20] in line for line in seen), (key, seen)
    _keys(tmux_socket, "escape")  # (alone: an escape followed at once by q reads as alt+q)
    await _screen_until(tmux_socket, "the help is closed", lambda s: "escape closes" not in s)
    _keys(tmux_socket, "q")

    def ended() -> bool:
        listed = subprocess.run(
            ["tmux", "-L", tmux_socket, "list-sessions"], capture_output=True, text=True
        )
        return "tui" not in listed.stdout

    assert await eventually(ended, timeout=10), "q did not end the TUI"
