"""A desired.yaml with comments and the controller's snapshot of it, at a fixed instant, for
the TUI's tests and benchmarks.

The snapshot is the golden fixture (``tests/golden/state/status.json.tmpl``, the document the
controller writes, schema tpu-reconciler.status.v1) with its ``{{ago:N}}`` times rendered
against ``NOW``, plus one released slot; the file declares the same slots. ``big_world``
writes a 1,000-slot pair for the benchmarks.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from reconciler.adapters.statedir import StateDir
from reconciler.intent.engine import IntentEditor

GOLDEN: Final = Path(__file__).resolve().parents[1] / "golden"
NOW: Final = 1_764_579_600.0  # 2025-12-01T09:00:00Z
PID: Final = 4242

DESIRED: Final = """\
# TPUs for the team — keep this comment
project: test-project
settings:
  backend: rest
  ssh_user: alice  # OS Login user
slots:
  # on-demand quota
  - name: od-v48-usc2b-1
    zone: us-central2-b
    accelerator: v4-8
    mode: on-demand
    want: held
  - name: od-v432-usc2b-1
    zone: us-central2-b
    accelerator: v4-32
    mode: on-demand
    want: held  # four workers
    workload:
      command: python3 train.py  # on every worker
  - name: spot-v48-usc2b-2
    zone: us-central2-b
    accelerator: v4-8
    want: held
  - name: spot-v48-usc2b-3  # parked
    zone: us-central2-b
    accelerator: v4-8
    want: released
  - {name: spot-v6e8-ew4a-1, zone: europe-west4-a, accelerator: v6e-8}
  - {name: spot-v6e8-use1d-1, zone: us-east1-d, accelerator: v6e-8}
race_groups:
  - name: any-v6e-8  # whichever comes first
    count: 1
    slots: [spot-v6e8-ew4a-1, spot-v6e8-use1d-1]
# end of file
"""

_AGO: Final = re.compile(r"\{\{ago:(\d+)\}\}")


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def snapshot(desired_file: Path, now: float = NOW) -> dict[str, Any]:
    text = (GOLDEN / "state" / "status.json.tmpl").read_text(encoding="utf-8")
    text = _AGO.sub(lambda m: iso(int(now) - int(m.group(1))), text)
    doc: dict[str, Any] = json.loads(text)
    doc["desired"]["file"] = str(desired_file)
    parked = dict(doc["slots"][2])
    parked.update(
        name="spot-v48-usc2b-3",
        want="released",
        state="NOT_QUEUED",
        state_since=iso(now - 3600),
        last_error=None,
        create_time=None,
    )
    doc["slots"].insert(3, parked)
    doc["slots"][1]["workload"] = {
        "state": "running",
        "run_id": "od-v432-usc2b-1-0",
        "attempt": 2,
        "since": iso(now - 4000),
        "summary": "running 1h6m · attempt 2",
    }
    return doc


@dataclass
class World:
    path: Path
    state: StateDir
    editor: IntentEditor

    def write_snapshot(self, doc: dict[str, Any]) -> None:
        tmp = self.state.status.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=2), encoding="utf-8")
        tmp.replace(self.state.status)

    def text(self) -> str:
        return self.path.read_text(encoding="utf-8")


def make_world(root: Path, *, with_snapshot: bool = True, events: bool = True) -> World:
    path = root / "desired.yaml"
    path.write_text(DESIRED, encoding="utf-8")
    state = StateDir(root / "state").ensure()
    world = World(path, state, IntentEditor(path, state))
    if with_snapshot:
        world.write_snapshot(snapshot(path))
    if events:
        shutil.copyfile(GOLDEN / "state" / "events.jsonl", state.events)
    return world


def big_world(root: Path, slots: int = 1000, now: float = NOW) -> World:
    """A 1,000-slot world as such a file is written: eight slots of its own, the rest from a
    ``generate:`` entry over four zones; every slot ACTIVE in the snapshot, own ones first."""
    zones = ("us-central2-b", "europe-west4-a", "us-east1-d", "us-east5-a")
    own = 8
    per_zone = -(-(slots - own) // len(zones))
    lines = ["project: test-project", "settings: {backend: rest, ssh_user: alice}", "slots:"]
    for i in range(own):
        name, zone = f"slot-{i:05d}", zones[i % len(zones)]
        lines.append(f"  - {{name: {name}, zone: {zone}, accelerator: v4-8, want: held}}")
    lines += [
        "generate:",
        f"  - zones: [{', '.join(zones)}]",
        f"    accelerators: {{v4-8: {per_zone}}}",
    ]
    lines.append("    want: held")
    path = root / "desired.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    state = StateDir(root / "state").ensure()
    world = World(path, state, IntentEditor(path, state))
    specs = world.editor.parse(world.text()).slots[:slots]
    rows = []
    for i, spec in enumerate(specs):
        rows.append(
            {
                "name": spec.name,
                "zone": spec.zone,
                "accelerator": spec.accelerator,
                "mode": spec.mode,
                "want": "held",
                "managed": True,
                "race_group": None,
                "state": "ACTIVE",
                "node_state": "READY",
                "health": "HEALTHY",
                "ips": [f"10.{i // 250}.{i % 250}.2"],
                "create_time": iso(now - 7200),
                "labelled": True,
                "state_since": iso(now - 3600 - i),
                "last_error": None,
                "setup": {"bootstrap": "off", "tailscale": "off", "generation": 0, "detail": None},
                "tmux": {"target": None, "open": False},
                "instance": f"{spec.name}@{1000 + i}",
            }
        )
    doc = snapshot(path, now)
    doc.update(slots=rows, race_groups=[])
    doc["plan"] = {"summary": "No changes.", "actions": [], "deferred": [], "blocked": []}
    doc["plan"]["warnings"] = []
    world.write_snapshot(doc)
    return world
