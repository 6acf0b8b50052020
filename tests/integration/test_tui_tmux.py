"""End to end: the TUI in a real tmux pane (private server), a running controller and the
emulator. Pressing ``c`` on a released slot edits desired.yaml; the controller queues it; the
TUI, which only watches the snapshot, shows it reach ACTIVE (read with capture-pane)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time

import pytest

from reconciler.runtime.lock import ControllerLock
from tests.fixtures.controller import Harness, desired_text
from tests.support.cli import CLI_ARGV, ROOT
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
