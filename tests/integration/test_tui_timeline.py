"""The TUI's timeline pane (``m``), through Textual's own harness on the fixed lab of
``tests/support/timeline_world``: pilot snapshots (pytest-textual-snapshot, golden SVGs in
``__snapshots__/``) of the pane at 80x24 in the dark and light themes and at 160x48 scrolled
and zoomed, and what the keys do: ``m`` is listed in ``?``, ←/→ move the view in time and +/-
zoom only while the pane is shown (elsewhere ←/→ still scroll the table), the slot selected in
the table is the one highlighted and kept in view. ``pytest --snapshot-update`` rewrites the
SVGs after a change that was looked at."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.intent.engine import IntentEditor
from reconciler.surfaces.tui._app import TpuApp
from reconciler.surfaces.tui._timeline import TimelinePane
from tests.support.timeline_world import AS_OF, Lab, make_lab

pytestmark = pytest.mark.integration


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lab:
    monkeypatch.setenv("HOME", str(tmp_path))
    return make_lab(tmp_path)


def app_for(lab: Lab, theme: str = "textual-dark") -> TpuApp:
    return TpuApp(
        lab.path,
        lab.state,
        editor=IntentEditor(lab.path, lab.state),
        clock=lambda: AS_OF + 60,
        holder=lambda state: 4242,
        watch=False,
        theme=theme,
    )


async def _settle(pilot) -> None:  # type: ignore[no-untyped-def]
    app = pilot.app
    for _ in range(3):  # the frame's load, then the pane's
        busy = [w for w in app.workers if w.group != "watch"]
        if busy:
            await app.workers.wait_for_complete(busy)
        await pilot.pause()


def _press(*keys: str):  # type: ignore[no-untyped-def]
    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await _settle(pilot)
        await pilot.press(*keys)
        await _settle(pilot)

    return run


def test_pane_at_80_columns(snap_compare, lab: Lab) -> None:  # type: ignore[no-untyped-def]
    # the fourth slot, bob's v6e-8 waiting for the quota: highlighted, its estimate under it
    assert snap_compare(app_for(lab), terminal_size=(80, 24), run_before=_press("j", "j", "j", "m"))


def test_pane_in_the_light_theme(snap_compare, lab: Lab) -> None:  # type: ignore[no-untyped-def]
    app = app_for(lab, theme="textual-light")
    assert snap_compare(app, terminal_size=(80, 24), run_before=_press("m"))


def test_pane_scrolled_and_zoomed_at_160(snap_compare, lab: Lab) -> None:  # type: ignore[no-untyped-def]
    keys = ("G", "m", "right", "plus")  # the last slot, half a view later, twice as close
    assert snap_compare(app_for(lab), terminal_size=(160, 48), run_before=_press(*keys))


async def test_keys_move_the_view_only_while_the_pane_is_shown(lab: Lab) -> None:
    app = app_for(lab)
    async with app.run_test(size=(100, 30)) as pilot:
        await _settle(pilot)
        pane = app.query_one(TimelinePane)
        await pilot.press("m")
        await _settle(pilot)
        assert app.pane == "timeline" and pane.timeline is not None and pane.view is not None
        start, end = pane.view
        assert (start, end) == (pane.timeline.since, pane.timeline.until)
        assert start < AS_OF < end

        await pilot.press("right")
        assert pane.view == (start + (end - start) / 4, end + (end - start) / 4)
        await pilot.press("left", "left")
        assert pane.view[0] == pytest.approx(start - (end - start) / 4)
        await pilot.press("right", "plus")
        zoomed = pane.view
        assert zoomed[1] - zoomed[0] == pytest.approx((end - start) / 2)
        assert zoomed[0] < AS_OF < zoomed[1]  # around now
        await pilot.press("minus", "minus")
        assert pane.view[1] - pane.view[0] == pytest.approx(2 * (end - start))
        await _settle(pilot)
        assert pane.timeline.since <= pane.view[0]  # the history was read further back

        shown = str(pane.render())
        assert "UTC, one column" in shown and "alice" in shown  # the span, a group
        await pilot.press("j")  # the table follows j; the pane highlights its slot
        assert pane.selected == app.selected.name if app.selected else False
        assert f"{pane.selected}:" in str(pane.render())

        await pilot.press("p")  # another pane: the arrows are the table's again
        before = pane.view
        await pilot.press("right", "plus")
        assert pane.view == before and app.pane == "plan"

        await pilot.press("question_mark")
        await pilot.pause()
        help_text = " ".join(str(w.render()) for w in app.screen.query("Static"))
        assert "timeline pane: who holds what, when" in help_text  # the m key
        assert "in the timeline pane: scroll in time" in help_text  # the moves


async def test_the_estimate_under_the_chart_names_what_frees_the_chips(lab: Lab) -> None:
    app = app_for(lab)
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(pilot)
        await pilot.press("j", "j", "j", "m")
        await _settle(pilot)
        text = str(app.query_one(TimelinePane).render())
        assert app.selected is not None and app.selected.name == "bob-v6e8"
    # alice's hold_until, three hours ahead, frees the chips bob's (priority 1) takes first
    assert "bob-v6e8: starts ~03-02 03:00 (in 3h), when spot-v6e8-eua-1 (alice) ends" in text
    assert "(estimate)" in text
