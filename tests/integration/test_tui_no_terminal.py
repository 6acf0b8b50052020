"""``tui`` without a terminal refuses at once, in one line, with the usage exit code (2),
instead of spinning a core forever: run from a pipe, with only stdout on a terminal, and in a
tmux pane whose stdin is redirected away from its terminal."""

from __future__ import annotations

import os
import pty
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from reconciler.exitcodes import EX_USAGE
from tests.support.cli import CLI_ARGV, clean_env
from tests.support.tools import require_tool

pytestmark = pytest.mark.integration


def _argv(tmp_path: Path) -> list[str]:
    return [*CLI_ARGV, "-f", str(tmp_path / "desired.yaml"), "--state-dir", str(tmp_path), "tui"]


def test_tui_in_a_pipe_refuses_at_once(tmp_path: Path) -> None:
    started = time.monotonic()
    done = subprocess.run(
        _argv(tmp_path),
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert time.monotonic() - started < 10
    assert done.returncode == EX_USAGE and done.stdout == ""
    assert done.stderr.splitlines() == [
        "error: tui needs a terminal, and stdin and stdout are not one (for a script: "
        "status --watch, status --json, events --follow)"
    ]


def test_tui_with_only_stdout_on_a_terminal_refuses(tmp_path: Path) -> None:
    controller, terminal = pty.openpty()
    try:
        done = subprocess.run(
            _argv(tmp_path),
            env=clean_env({"TERM": "xterm-256color"}),
            stdin=subprocess.DEVNULL,
            stdout=terminal,
            stderr=subprocess.PIPE,
            text=True,
            timeout=20,
        )
    finally:
        os.close(terminal)
        os.close(controller)
    assert done.returncode == EX_USAGE
    assert "tui needs a terminal, and stdin is not one" in done.stderr


def test_tui_in_tmux_with_stdin_redirected_refuses(
    tmp_path: Path, tmux_socket: str, tmux_server: object
) -> None:
    tmux = require_tool("tmux")
    code = tmp_path / "code"
    env = clean_env({"TERM": "xterm-256color"})
    script = f"{shlex.join(_argv(tmp_path))} </dev/null 2>{tmp_path / 'err'}; echo $? > {code}"
    try:
        subprocess.run(
            [tmux, "-L", tmux_socket, "-f", "/dev/null", "new-session", "-d", "-s", "t",
             "-x", "80", "-y", "24", "sh", "-c", script],
            env=env, check=True, timeout=10,
        )  # fmt: skip
        deadline = time.monotonic() + 15
        while not (code.exists() and code.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        subprocess.run([tmux, "-L", tmux_socket, "kill-server"], capture_output=True, timeout=10)
    assert code.read_text().strip() == str(EX_USAGE)
    assert "stdin is not one" in (tmp_path / "err").read_text()
