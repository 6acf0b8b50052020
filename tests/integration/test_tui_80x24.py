"""The TUI at 80x24 in a real tmux pane (private server), read with capture-pane: the footer
fits whole, a slot whose create waits for quota says so in the table (as ``status`` does in
NOTE), and the history pane (``h``) has room for its chart."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.cli import CLI_ARGV, clean_env
from tests.support.history_world import fill_history
from tests.support.tools import require_tool
from tests.support.tui_world import make_world, snapshot

pytestmark = pytest.mark.integration

WAITING = "spot-v6e8-use1d-1"


def _tmux(socket: str, *args: str) -> str:
    done = subprocess.run(
        [require_tool("tmux"), "-L", socket, "-f", "/dev/null", *args],
        capture_output=True, text=True, timeout=10, check=True,
    )  # fmt: skip
    return done.stdout


def _screen_until(socket: str, what: str, check: Callable[[str], bool]) -> str:
    deadline = time.monotonic() + 30
    screen = ""
    while time.monotonic() < deadline:
        screen = _tmux(socket, "capture-pane", "-p", "-t", "tui")
        if check(screen):
            return screen
        time.sleep(0.1)
    pytest.fail(f"timed out waiting until {what}; the screen:\n{screen}")


def test_the_tui_at_80x24(tmp_path: Path, tmux_socket: str, tmux_server: object) -> None:
    world = make_world(tmp_path)
    doc = snapshot(world.path)
    row = next(s for s in doc["slots"] if s["name"] == WAITING)
    row["quota"] = {
        "state": "waiting",
        "message": "waiting for quota: 16/16 spot v6e chips in us-east1-d",
        "limit": 16,
        "place": "us-east1-d",
    }
    world.write_snapshot(doc)
    fill_history(world.state.history)
    argv = [*CLI_ARGV, "--file", str(world.path), "--state-dir", str(world.state.root), "tui"]
    env = clean_env({"TERM": "xterm-256color"})
    env_args = [a for k, v in env.items() if k in ("PYTHONPATH", "PATH", "HOME", "TERM")
                for a in ("-e", f"{k}={v}")]  # fmt: skip
    _tmux(tmux_socket, "new-session", "-d", "-s", "tui", "-x", "80", "-y", "24", *env_args, *argv)
    try:
        screen = _screen_until(
            tmux_socket, "the table and footer", lambda s: WAITING in s and "quit" in s
        )
        footer = screen.rstrip("\n").splitlines()[-1]
        assert footer.split() == [
            "?",
            "help",
            "q",
            "quit",
            "c",
            "hold",
            "d",
            "release",
            "s",
            "ssh",
            "i",
            "info",
            "l",
            "logs",
            "p",
            "plan",
            "e",
            "events",
        ]
        (line,) = [x for x in screen.splitlines() if x.strip().startswith(WAITING)]
        assert "QUOTA 16/16" in line, line

        _tmux(tmux_socket, "send-keys", "-t", "tui", "h")
        today = time.strftime("%m-%d", time.gmtime())

        def dates(screen: str) -> str:
            lines = screen.splitlines()
            axis = next((i for i, x in enumerate(lines) if "+-----" in x), len(lines) - 1)
            return lines[axis + 1] if axis + 1 < len(lines) else ""

        # The chart's right-hand label whole, once the pane is laid out (its scroll bar)
        screen = _screen_until(
            tmux_socket, "the chart, its labels whole", lambda s: dates(s).rstrip().endswith(today)
        )
        lines = screen.splitlines()
        top = next(i for i, x in enumerate(lines) if "Capacity history" in x)
        axis = next(i for i, x in enumerate(lines) if "+-----" in x)
        assert axis - top >= 10, screen  # the waits' chart whole, with its axis
        assert lines[-1].split()[:2] == ["?", "help"]  # the footer stays
    finally:
        _tmux(tmux_socket, "send-keys", "-t", "tui", "q")
