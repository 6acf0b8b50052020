"""A lab at a fixed moment, for the timeline's goldens, its page, its TUI pane and MCP tool.

Three members share a 32-chip spot v6e limit in europe-west4-a (the Cloud Quotas API's: a file
limit would have ``validate`` refuse carol's v6e-64): alice (capped at 16 v6e chips)
holds a v6e-8 until 03:00 (``hold_until``), bob (priority 1) a v6e-16 for 6h (``hold_for``, 2h
served), carol a flex-start v6e-8 run that ends at 05:00 and renews; waiting for the quota are
alice's and bob's second v6e-8 and carol's v6e-64 (more than the limit: never). Beside them a
v6e-8 queued in us-east5-b (the history has its expected wait), a v4-8 with a maintenance
window and a ``start_at`` slot, and an unmanaged suspended request.

The snapshot is written through the typed status model (``model.status``), as the controller
writes it; the capacity history is ``tests/support/history_world``'s week, which ends at
``AS_OF`` and names some of the same slots. Everything is absolute time: the same files give
the same pictures whatever the clock says.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from reconciler.adapters.statedir import StateDir
from reconciler.core.quota import wait_text
from reconciler.model.desired import QuotaSpec
from reconciler.model.status import (
    ControllerInfo,
    DesiredInfo,
    MaintenanceStatus,
    PlanStatus,
    QuotaStatus,
    SlotQuotaStatus,
    SlotStatus,
    StatusSnapshot,
    to_json,
)
from reconciler.model.times import utc_text
from tests.support.history_world import UNTIL, fill_history

AS_OF: Final = UNTIL  # 2026-03-02T00:00:00Z
H: Final = 3600.0
ZONE: Final = "europe-west4-a"
QUOTA_ID: Final = "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI"
LIMIT: Final = QuotaSpec("v6e", "spot", "zone", ZONE, 32, "cloud", QUOTA_ID)

DESIRED: Final = f"""\
# A lab sharing one project's spot v6e quota (the cloud's: carol's v6e-64 passes validate)
project: lab-project
settings:
  backend: rest
  quota_source: cloud
members:
  alice: {{chips: {{v6e: 16}}}}
  bob: {{priority: 1}}
  carol: {{}}
defaults:
  setup: {{tmux: false}}
slots:
  - {{name: spot-v6e8-eua-1, zone: {ZONE}, accelerator: v6e-8, want: held, owner: alice,
     hold_until: "2026-03-02T03:00:00Z"}}
  - {{name: spot-v6e8-eua-2, zone: {ZONE}, accelerator: v6e-8, want: held, owner: alice,
     hold_for: 8h}}
  - {{name: bob-v6e16, zone: {ZONE}, accelerator: v6e-16, want: held, owner: bob, hold_for: 6h}}
  - {{name: bob-v6e8, zone: {ZONE}, accelerator: v6e-8, want: held, owner: bob}}
  - {{name: carol-flex, zone: {ZONE}, accelerator: v6e-8, mode: flex-start,
     max_run_duration: 6h, renew: true, want: held, owner: carol}}
  - {{name: carol-v6e64, zone: {ZONE}, accelerator: v6e-64, want: held, owner: carol}}
  - {{name: spot-v6e8-usb-1, zone: us-east5-b, accelerator: v6e-8, want: held, owner: bob}}
  - {{name: spot-v48-usb-1, zone: us-central2-b, accelerator: v4-8, want: held, owner: carol}}
  - {{name: dave-later, zone: us-central2-b, accelerator: v4-8, want: held, owner: alice,
     start_at: "2026-03-02T10:00:00Z"}}
"""


def _at(hours: float) -> str:
    return utc_text(AS_OF + hours * H)


def _slot(name: str, zone: str, accelerator: str, owner: str | None, **seen: object) -> SlotStatus:
    managed = owner is not None
    return SlotStatus(
        name=name,
        zone=zone,
        accelerator=accelerator,
        mode=str(seen.pop("mode", "spot")),
        want="held" if managed else None,
        managed=managed,
        owner=owner,
        **seen,  # type: ignore[arg-type]
    )


def _waiting(used: int, behind: str = "") -> SlotQuotaStatus:
    words = wait_text(LIMIT, used) + behind
    return SlotQuotaStatus("waiting", words, None, LIMIT.chips, ZONE)


WAITING: Final = ("spot-v6e8-eua-2", "bob-v6e8", "carol-v6e64")


def snapshot(desired_file: Path, *, running: bool = True) -> StatusSnapshot:
    held = " (held by alice 8, bob 16, carol 8)"
    slots = (
        _slot("spot-v6e8-eua-1", ZONE, "v6e-8", "alice", state="ACTIVE",
              state_since=_at(-5), releases_at=_at(3), create_time=_at(-6)),
        _slot("spot-v6e8-eua-2", ZONE, "v6e-8", "alice", state="NOT_QUEUED",
              state_since=_at(-1), quota=_waiting(32, held)),
        _slot("bob-v6e16", ZONE, "v6e-16", "bob", state="ACTIVE", state_since=_at(-2),
              releases_at=_at(4), create_time=_at(-3)),
        _slot("bob-v6e8", ZONE, "v6e-8", "bob", state="NOT_QUEUED", state_since=_at(-1),
              quota=_waiting(32, held)),
        _slot("carol-flex", ZONE, "v6e-8", "carol", mode="flex-start", state="ACTIVE",
              state_since=_at(-1), ends_at=_at(5), create_time=_at(-1.5)),
        _slot("carol-v6e64", ZONE, "v6e-64", "carol", state="NOT_QUEUED", state_since=_at(-1),
              quota=_waiting(32, held)),
        _slot("spot-v6e8-usb-1", "us-east5-b", "v6e-8", "bob", state="WAITING_FOR_RESOURCES",
              state_since=_at(-1), create_time=_at(-1)),
        _slot("spot-v48-usb-1", "us-central2-b", "v4-8", "carol", state="ACTIVE",
              state_since=_at(-30), create_time=_at(-31),
              maintenance=MaintenanceStatus("SCHEDULED", "PENDING", _at(8), _at(10), True)),
        _slot("dave-later", "us-central2-b", "v4-8", "alice", state="WAITING_FOR_RESOURCES",
              state_since=_at(-0.5), create_time=_at(-0.5)),
        _slot("old-experiment", "us-central2-b", "v4-8", None, state="SUSPENDED",
              create_time=_at(-200)),
    )  # fmt: skip
    return StatusSnapshot(
        generated_at=_at(0),
        controller=ControllerInfo(running, 4242 if running else None),
        backend="rest",
        desired=DesiredInfo(str(desired_file), True, (), "0" * 64),
        observed_at=_at(-0.01),
        slots=slots,
        plan=PlanStatus(summary="No changes."),
        quotas=(QuotaStatus("v6e", "spot", "zone", ZONE, 32, 32, WAITING, "cloud", QUOTA_ID),),
    )


@dataclass(frozen=True)
class Lab:
    root: Path
    path: Path
    state: StateDir


def make_lab(root: Path, *, history: bool = True, running: bool = True) -> Lab:
    """desired.yaml, ``state/status.json`` and (``history``) the week's store under ``root``."""
    path = root / "desired.yaml"
    path.write_text(DESIRED, encoding="utf-8")
    state = StateDir(root / "state").ensure()
    doc = to_json(snapshot(path, running=running))
    state.status.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    if history:
        fill_history(state.history)
    return Lab(root, path, state)
