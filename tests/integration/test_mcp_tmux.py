"""Closing tmux windows from MCP and from ``release --close-tmux``, on a real private tmux server.

The MCP server is a real process driven by the SDK's stdio client; it finds the private server
through ``settings.tmux_socket`` (the CLI test passes ``TPU_RECONCILER_TMUX_SOCKET`` instead).
Windows are the mirror's shape, ``tpu-<zone code>:<slot>``; the ``windows`` fixture also puts a
window named like a slot in a session that is not ours, which must never be touched.
"""

from __future__ import annotations

import os
import subprocess
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import libtmux
import pytest
from mcp import ClientSession

from reconciler.intent.tmux import REOPEN_NOTE, SOCKET_ENV
from reconciler.model.load import parse_desired
from tests.integration.test_mcp_server import call
from tests.integration.test_mcp_server import session as mcp_session
from tests.integration.test_tmux_cli import targets, windows
from tests.support.cli import run_cli

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
__all__ = ["windows"]  # the fixture: tpu-usc2b:a-1, tpu-usc2b:b-1 and work:b-1

DESIRED = """\
project: my-project-1
slots:
  - name: a-1
    zone: us-central2-b
    accelerator: v4-8
    want: held
  - name: b-1   # mirrored in tmux
    zone: us-central2-b
    accelerator: v4-8
    want: held
"""


def write_desired(tmp_path: Path, socket: str | None) -> str:
    text = DESIRED
    if socket is not None:
        text = DESIRED.replace("slots:", f"settings:\n  tmux_socket: {socket}\nslots:", 1)
    (tmp_path / "desired.yaml").write_text(text)
    return text


@pytest.fixture
def tmp(tmp_path: Path, tmux_socket: str) -> Path:
    """tmp_path holding desired.yaml that names the private tmux socket."""
    write_desired(tmp_path, tmux_socket)
    return tmp_path


def session(tmp_path: Path) -> AbstractAsyncContextManager[ClientSession]:
    """A fresh MCP server on tmp_path/desired.yaml; opened inside each test body."""
    paths = ("--file", str(tmp_path / "desired.yaml"), "--state-dir", str(tmp_path / "state"))
    return mcp_session(tmp_path, "reconciler.surfaces.mcp_server", *paths)


async def test_tmux_close_needs_confirm_then_closes_only_that_slots_window(
    windows: libtmux.Server, tmp: Path
) -> None:
    text = (tmp / "desired.yaml").read_text()
    before = targets(windows)
    async with session(tmp) as s:
        refused = await s.call_tool("tmux_close", {"name": "b-1"})
        assert refused.is_error
        assert "confirm=true" in " ".join(getattr(c, "text", "") for c in refused.content)
        assert targets(windows) == before

        doc = await call(s, "tmux_close", name="b-1", confirm=True)
        assert doc["closed"] == ["tpu-usc2b:b-1"] and doc["note"] == REOPEN_NOTE
        assert targets(windows) == ["tpu-usc2b:a-1", "work:b-1"]

        again = await call(s, "tmux_close", name="b-1", confirm=True)
        assert again["closed"] == [] and again["note"] == "no window was open"
    assert (tmp / "desired.yaml").read_text() == text  # a local action, not an edit


async def test_cancel_slot_leaves_the_window_unless_asked_to_close_it(
    windows: libtmux.Server, tmp: Path
) -> None:
    async with session(tmp) as s:
        kept = await call(s, "cancel_slot", name="b-1", operation_id="c-b", confirm=True)
        assert "tmux_closed" not in kept
        assert "tpu-usc2b:b-1" in targets(windows)

        closed = await call(s, "cancel_slot", name="a-1", operation_id="c-a", confirm=True,
                            close_tmux=True)  # fmt: skip
        assert closed["tmux_closed"]["closed"] == ["tpu-usc2b:a-1"]
    assert targets(windows) == ["tpu-usc2b:b-1", "work:b-1"]
    slots = parse_desired((tmp / "desired.yaml").read_text()).slots
    assert {s.name: s.want for s in slots} == {"a-1": "released", "b-1": "released"}


async def test_cancel_slot_without_close_tmux_warns_that_the_window_stays(
    windows: libtmux.Server, tmp: Path
) -> None:
    async with session(tmp) as s:
        doc = await call(s, "cancel_slot", name="b-1", operation_id="c-b", confirm=True)
    assert "tpu-usc2b:b-1" in targets(windows)
    said = [*doc.get("notes", []), *doc.get("warnings", []), str(doc.get("tmux", ""))]
    assert any("tmux" in text and "open" in text for text in said), said


def release(cwd: Path, socket: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TPU_RECONCILER_")}
    files = ["-f", str(cwd / "desired.yaml"), "--state-dir", str(cwd / "state")]
    return run_cli(*files, "release", "b-1", *args, cwd=REPO, env={**env, SOCKET_ENV: socket})


def test_cli_release_close_tmux_yes_closes_the_window(
    windows: libtmux.Server, tmux_socket: str, tmp_path: Path
) -> None:
    text = write_desired(tmp_path, None)  # the socket comes from the environment here

    unconfirmed = release(tmp_path, tmux_socket, "--close-tmux")
    assert unconfirmed.returncode == 2, unconfirmed.stderr
    assert (tmp_path / "desired.yaml").read_text() == text
    assert "tpu-usc2b:b-1" in targets(windows)

    done = release(tmp_path, tmux_socket, "--close-tmux", "--yes")
    assert done.returncode == 0, done.stderr
    assert "closed tpu-usc2b:b-1" in done.stdout and REOPEN_NOTE in done.stdout
    assert targets(windows) == ["tpu-usc2b:a-1", "work:b-1"]
    slot = parse_desired((tmp_path / "desired.yaml").read_text()).slot("b-1")
    assert slot is not None and slot.want == "released"
