"""``tpu-reconciler tmux status|close`` run as a real process against a private tmux server."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from collections.abc import Mapping
from pathlib import Path

import libtmux
import pytest

from tests.support.cli import clean_env
from tests.support.cli import run_cli as run_reconciler

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def run_cli(
    cwd: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    stdin: int | None = subprocess.DEVNULL,
    input_text: str | None = None,
) -> subprocess.CompletedProcess[str]:
    return run_reconciler(
        "--state-dir", str(cwd / "state"), *args,
        cwd=cwd, env=clean_env(env), stdin=stdin, input=input_text,
    )  # fmt: skip


def targets(server: libtmux.Server) -> list[str]:
    return sorted(f"{w.session_name}:{w.window_name}" for w in server.windows)


@pytest.fixture
def windows(tmux_server: libtmux.Server) -> libtmux.Server:
    """tpu-usc2b with windows a-1 and b-1, plus a non-tpu session."""
    session = tmux_server.new_session(
        session_name="tpu-usc2b", window_name="a-1", window_command="sleep 600"
    )
    session.new_window(window_name="b-1", window_shell="sleep 600", attach=False)
    tmux_server.new_session(session_name="work", window_name="b-1", window_command="sleep 600")
    return tmux_server


def write_snapshot(cwd: Path, active: list[str], other: list[str]) -> None:
    state = cwd / "state"
    state.mkdir(exist_ok=True)
    slots = [{"name": n, "state": "ACTIVE"} for n in active]
    slots += [{"name": n, "state": "SUSPENDED"} for n in other]
    doc = {
        "schema_version": "tpu-reconciler.status.v1",
        "generated_at": "2026-11-30T10:00:00Z",
        "slots": slots,
    }
    (state / "status.json").write_text(json.dumps(doc))


def test_close_without_yes_and_without_a_terminal_refuses(
    windows: libtmux.Server, tmux_socket: str, tmp_path: Path
) -> None:
    result = run_cli(tmp_path, "tmux", "close", "b-1", "--socket", tmux_socket)
    assert result.returncode == 1
    assert "--yes" in result.stderr and "tpu-usc2b:b-1" in result.stderr
    assert "tpu-usc2b:b-1" in targets(windows)


def test_close_with_yes_closes_only_that_slots_tpu_window(
    windows: libtmux.Server, tmux_socket: str, tmp_path: Path
) -> None:
    result = run_cli(tmp_path, "tmux", "close", "b-1", "--yes", "--socket", tmux_socket)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "closed tpu-usc2b:b-1"
    assert targets(windows) == ["tpu-usc2b:a-1", "work:b-1"]


@pytest.mark.parametrize(("answer", "closed"), [("n\n", False), ("y\n", True)])
def test_close_on_a_terminal_asks(
    windows: libtmux.Server, tmux_socket: str, tmp_path: Path, answer: str, closed: bool
) -> None:
    controller, terminal = pty.openpty()
    try:
        os.write(controller, answer.encode())
        result = run_cli(tmp_path, "tmux", "close", "b-1", "--socket", tmux_socket, stdin=terminal)
    finally:
        os.close(terminal)
        os.close(controller)
    assert "Close tmux window tpu-usc2b:b-1?" in result.stderr
    assert result.returncode == (0 if closed else 1)
    assert ("tpu-usc2b:b-1" in targets(windows)) is not closed


def test_close_reports_a_missing_window_and_rejects_a_bad_name(
    windows: libtmux.Server, tmux_socket: str, tmp_path: Path
) -> None:
    missing = run_cli(tmp_path, "tmux", "close", "c-1", "--yes", "--socket", tmux_socket)
    assert missing.returncode == 1 and "no window named c-1" in missing.stderr
    bad = run_cli(tmp_path, "tmux", "close", "x;rm", "--yes", "--socket", tmux_socket)
    assert bad.returncode == 2 and "invalid name" in bad.stderr
    assert targets(windows) == ["tpu-usc2b:a-1", "tpu-usc2b:b-1", "work:b-1"]


def test_status_marks_orphans_from_the_snapshot(
    windows: libtmux.Server, tmux_socket: str, tmp_path: Path
) -> None:
    write_snapshot(tmp_path, active=["a-1"], other=["b-1"])
    result = run_cli(tmp_path, "tmux", "status", "--json", "--socket", tmux_socket)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema_version"] == "tpu-reconciler.tmux-status.v1"
    assert {w["target"]: w["state"] for w in doc["windows"]} == {
        "tpu-usc2b:a-1": "active",
        "tpu-usc2b:b-1": "orphaned",
    }
    assert doc["orphans"] == ["tpu-usc2b:b-1"]
    text = run_cli(tmp_path, "tmux", "status", "--socket", tmux_socket).stdout
    assert "tpu-usc2b:b-1" in text and "orphaned" in text and "2 windows, 1 orphaned" in text


def test_status_without_a_snapshot_shows_every_window_as_unknown(
    windows: libtmux.Server, tmux_socket: str, tmp_path: Path
) -> None:
    doc = json.loads(run_cli(tmp_path, "tmux", "status", "--json", "--socket", tmux_socket).stdout)
    assert [w["state"] for w in doc["windows"]] == ["unknown", "unknown"]
    assert doc["orphans"] == []
    assert any("no status snapshot" in n for n in doc["notes"])


def test_socket_comes_from_the_environment_then_the_desired_file(
    windows: libtmux.Server, tmux_socket: str, tmp_path: Path
) -> None:
    by_env = run_cli(
        tmp_path, "tmux", "status", "--json", env={"TPU_RECONCILER_TMUX_SOCKET": tmux_socket}
    )
    assert len(json.loads(by_env.stdout)["windows"]) == 2
    (tmp_path / "desired.yaml").write_text(
        f"project: my-project-1\nsettings:\n  tmux_socket: {tmux_socket}\n"
    )
    by_file = run_cli(tmp_path, "tmux", "status", "--json")
    doc = json.loads(by_file.stdout)
    assert doc["socket"] == tmux_socket and len(doc["windows"]) == 2


def test_status_with_no_server_is_empty_with_a_note_and_starts_none(
    tmux_server: libtmux.Server, tmux_socket: str, tmp_path: Path
) -> None:
    result = run_cli(tmp_path, "tmux", "status", "--socket", tmux_socket)
    assert result.returncode == 0
    assert "0 windows" in result.stdout and "no tmux server" in result.stdout
    assert not tmux_server.is_alive()
