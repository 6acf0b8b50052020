"""The TUI's chips pane (key ``u``), driven through Textual's harness against a real
desired.yaml and a controller snapshot whose running workload carries chip telemetry: every
worker's chips with duty cycle, HBM and holders, following the selected slot; a slot without
telemetry says there is nothing to show. The per-worker text itself is checked pure too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reconciler.intent.chip_views import NONE, format_chips
from reconciler.surfaces.tui._app import TpuApp
from tests.support.tui_world import NOW, PID, make_world, snapshot

GIB = 1024**3
SLOT = "od-v432-usc2b-1"  # the snapshot's running workload


def _chips(duties: list[float | None], holders: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    return [
        {"index": i, "duty_cycle": d, "hbm_used": 7 * GIB if d is not None else None,
         "hbm_total": 8 * GIB, "holders": list(holders) if i == 0 else []}
        for i, d in enumerate(duties)
    ]  # fmt: skip


def _telemetry_snapshot(path: Path) -> dict[str, Any]:
    doc = snapshot(path)
    workload = doc["slots"][1]["workload"]
    workload["tpu"] = "TPU 12% · HBM 28/32 GiB"
    workload["workers"] = [
        {"index": 0, "state": "alive", "chips": _chips([97.0, 96.0], (4242,))},
        {"index": 1, "state": "alive", "chips": _chips([12.0, None])},
        {"index": 2, "state": "unknown"},
    ]
    return doc


def _text(app: TpuApp) -> str:
    return str(app.query_one("#chips").render())


async def test_u_shows_every_workers_chips_and_follows_the_selection(tmp_path: Path) -> None:
    from reconciler.surfaces.tui._widgets import SlotTable

    world = make_world(tmp_path)
    world.write_snapshot(_telemetry_snapshot(world.path))
    app = TpuApp(world.path, world.state, editor=world.editor, clock=lambda: NOW,
                 holder=lambda state: PID, watch=False)  # fmt: skip
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        table = app.query_one(SlotTable)
        table.move_cursor(row=table.get_row_index(SLOT))
        await pilot.press("u")
        await app.workers.wait_for_complete([w for w in app.workers if w.group != "watch"])
        await pilot.pause()
        assert app.pane == "chips"
        shown = _text(app).splitlines()
        assert shown[0] == f"{SLOT} chips: TPU 12% · HBM 28/32 GiB (least busy worker)"
        assert shown[1].split() == ["WORKER", "CHIP", "DUTY", "HBM", "HELD", "BY"]
        assert shown[2].split() == ["w0", "0", "97%", "7.0/8.0", "GiB", "(88%)", "pid", "4242"]
        assert shown[3].split() == ["1", "96%", "7.0/8.0", "GiB", "(88%)", "-"]
        assert shown[5].split() == ["1", "?", "?", "-"]  # w1's second chip: not read
        assert shown[6].split()[:2] == ["w2", "-"]  # a worker that did not answer
        # another slot, without telemetry: the pane follows and says so
        table.move_cursor(row=table.get_row_index("od-v48-usc2b-1"))
        await pilot.pause()
        await app.workers.wait_for_complete([w for w in app.workers if w.group != "watch"])
        await pilot.pause()
        assert _text(app) == f"od-v48-usc2b-1: {NONE}"


def test_the_chip_text_of_a_blocked_launch_says_who_holds_the_tpu() -> None:
    doc = {
        "name": "a",
        "observed": {"last_error": "TPU held by pid 4242 `python3` (user alice, 2h) on worker 0"},
        "chips": {"tpu": "TPU ? · HBM ?", "workers": [{"index": 0, "chips": []}]},
    }
    text = format_chips(doc).splitlines()
    assert text[2].split() == ["w0", "-", "?", "?", "not", "read", "this", "pass"]
    assert text[-1] == "launch waits: TPU held by pid 4242 `python3` (user alice, 2h) on worker 0"
    assert format_chips({"name": "b"}) == f"b: {NONE}"
