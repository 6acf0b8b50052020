"""Screen snapshots of the TUI (pytest-textual-snapshot; golden SVGs in ``__snapshots__/``):
the main screen, each bottom pane and the no-controller banner, at 80x24 and 160x48, and the
main screen in the light theme. Deterministic: the clock is fixed, the controller probe is
injected, HOME is the test directory (paths show as ``~/...``), the logs come from a fixed
source. ``pytest --snapshot-update`` rewrites them after a change that was looked at."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler.surfaces.tui import start_command
from reconciler.surfaces.tui._app import TpuApp
from reconciler.surfaces.tui._frame import SlotRow
from tests.support.tui_world import NOW, PID, World, make_world

SIZES = [(80, 24), (160, 48)]


@dataclass(frozen=True)
class FixedLine:
    worker: int
    attempt: int
    text: str


async def fixed_logs(row: SlotRow) -> AsyncIterator[FixedLine]:
    for step in range(1, 4):
        for worker in range(len(row.ips) or 1):
            yield FixedLine(worker, 1, f"step {step}: loss {2.0 / (step + worker):.3f}")


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("TPU_RECONCILER_TMUX_SOCKET", raising=False)
    return make_world(tmp_path)


def app_for(world: World, *, running: bool = True, theme: str = "textual-dark") -> TpuApp:
    return TpuApp(
        world.path,
        world.state,
        editor=world.editor,
        start_command=start_command(world.path, None),
        clock=lambda: NOW,
        holder=(lambda state: PID) if running else (lambda state: None),
        log_source=fixed_logs,
        watch=False,
        theme=theme,
    )


async def _settle(pilot) -> None:  # type: ignore[no-untyped-def]
    app = pilot.app
    busy = [w for w in app.workers if w.group != "watch"]
    if busy:
        await app.workers.wait_for_complete(busy)
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("pane", ["plan", "events", "logs", "info"])
def test_main_screen_with_each_pane(snap_compare, world: World, pane: str, size) -> None:  # type: ignore[no-untyped-def]
    key = {"plan": "p", "events": "e", "logs": "l", "info": "i"}[pane]
    # On the four-worker slot, so the logs interleave workers and info lists them.
    assert snap_compare(app_for(world), terminal_size=size, run_before=_settle_after(key))


def _settle_after(key: str):  # type: ignore[no-untyped-def]
    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("down", key)
        await _settle(pilot)

    return run


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_no_controller_banner(snap_compare, world: World, size) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(world, running=False), terminal_size=size, run_before=_settle)


def test_light_theme(snap_compare, world: World) -> None:  # type: ignore[no-untyped-def]
    app = app_for(world, theme="textual-light")
    assert snap_compare(app, terminal_size=(80, 24), run_before=_settle)


def test_invalid_file_banner(snap_compare, world: World) -> None:  # type: ignore[no-untyped-def]
    world.path.write_text(world.text().replace("accelerator: v4-32", "accelerator: [v4-32"))
    assert snap_compare(app_for(world), terminal_size=(80, 24), run_before=_settle)
