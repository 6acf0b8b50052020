"""``status --watch`` picks its cells by name: a slot with a workload adds a WORKLOAD cell
before NOTE, and the NOTE column still shows the note (it once showed the workload)."""

from __future__ import annotations

from rich.console import Console

from reconciler.model.status import (
    SetupStatus,
    SlotStatus,
    StatusSnapshot,
    TmuxStatus,
    WorkloadStatus,
)
from reconciler.surfaces.cli._live import render


def _slot(name: str, **kw: object) -> SlotStatus:
    return SlotStatus(
        name=name, zone="us-central2-b", accelerator="v4-8", state="ACTIVE", managed=True,
        setup=SetupStatus(), tmux=TmuxStatus(), **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def _text(snapshot: StatusSnapshot, width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(render(snapshot, 0.0, width, 2.0))
    return console.export_text()


def test_a_workload_cell_never_takes_the_notes_place() -> None:
    snap = StatusSnapshot(
        slots=(
            _slot("trains", workload=WorkloadStatus(state="running", summary="running 2h")),
            _slot("broken", last_error="bootstrap failed: exit 3"),
        )
    )
    wide = _text(snap, 200)
    header = next(line for line in wide.splitlines() if line.startswith("SLOT"))
    assert header.index("WORKLOAD") < header.index("NOTE")
    broken = next(line for line in wide.splitlines() if line.startswith("broken"))
    assert "bootstrap failed" in broken[header.index("NOTE") :]
    trains = next(line for line in wide.splitlines() if line.startswith("trains"))
    assert "running" in trains[header.index("WORKLOAD") : header.index("NOTE")]
    narrow = _text(snap, 90)
    assert "WORKLOAD" not in narrow and "bootstrap failed" in narrow
