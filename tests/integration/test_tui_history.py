"""The TUI's history pane (``h``), through Textual's own harness: with a real capacity store
in the state directory it shows what ``history --plot`` prints for the same moment and width,
at 80 columns too, and says so when there is no history."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.surfaces.tui._app import TpuApp
from tests.support.cli import Cli, clean_env
from tests.support.history_world import UNTIL, UNTIL_TEXT, fill_history
from tests.support.tui_world import PID, World, make_world

pytestmark = pytest.mark.integration


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


def app_for(world: World) -> TpuApp:
    return TpuApp(
        world.path,
        world.state,
        editor=world.editor,
        clock=lambda: UNTIL,
        holder=lambda state: PID,
        watch=False,
    )


async def pane_text(app: TpuApp, pilot: object) -> tuple[list[str], int]:
    """The history pane's lines after ``h`` (and its workers) and the width it drew for."""
    from textual.widgets import RichLog

    await pilot.press("h")  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]
    busy = [w for w in app.workers if w.group != "watch"]
    if busy:
        await app.workers.wait_for_complete(busy)
    await pilot.pause()  # type: ignore[attr-defined]
    log = app.query_one("#history", RichLog)
    assert app.pane == "history" and log.display
    return [strip.text.rstrip() for strip in log.lines], app.history_width()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_h_shows_what_history_plot_prints(world: World, size: tuple[int, int]) -> None:
    fill_history(world.state.history)
    app = app_for(world)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        shown, width = await pane_text(app, pilot)
    assert size[0] - 8 <= width <= size[0] - 4  # the pane's width, less padding and scroll bar
    assert all(len(line) <= width for line in shown)  # nothing cut by the scroll bar
    cli = Cli("--file", str(world.path), "--state-dir", str(world.state.root), env=clean_env())
    printed = cli("history", "--plot", "--until", UNTIL_TEXT, "--width", str(width))
    assert printed.returncode == 0, printed.stderr
    assert shown == [line.rstrip() for line in printed.stdout.splitlines()]
    assert any(line.startswith("Chips held") for line in shown)


async def test_h_without_history_says_so(world: World) -> None:
    app = app_for(world)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        shown, _ = await pane_text(app, pilot)
    assert shown == ["No capacity history to plot yet (the controller records it while it runs)."]
