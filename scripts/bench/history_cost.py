"""Benchmark: what recording capacity history costs the controller at 1,000 slots.

The emulator (own process) holds 1,000 ACTIVE slots over 4 zones. Two production controllers
run in this process against it, each with its own state directory, one without and one with
the history recorder; their passes (``Controller.reconcile``: observe, plan, snapshot, memory)
are interleaved, so both see the same machine load. Process CPU (``time.process_time``: every
thread, so the writer thread counts) is read around each pass; after each recording pass the
recorder is flushed and the flush is counted in that pass, so the writer's work cannot leak
into the other controller's figure (this forces one SQLite transaction per pass, more than the
one-per-second batching of a real run: an upper bound). Target: <= 5 % more CPU per pass.

A second figure exercises the recorder where it has work: 1,000 QRs with 100 changing state
per pass, fed to the tracker and written (one transaction per pass), per-pass CPU.

    python scripts/bench/history_cost.py [--slots 1000] [--passes 15] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _rig

from reconciler.adapters.history_db import HistoryDB
from reconciler.adapters.statedir import StateDir
from reconciler.adapters.tpu_api_parse import request_state
from reconciler.core.history import Seen, Tracker
from reconciler.runtime.backends import make_cloud
from reconciler.runtime.controller import Controller
from reconciler.runtime.desired_loader import DesiredLoader
from reconciler.runtime.events import EventLog
from reconciler.runtime.history import HistoryRecorder

TARGET_PCT = 5.0
CYCLE = ("ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING", "ACTIVE", "SUSPENDED", "DELETING")


def controller(desired: Path, root: Path, env: dict[str, str], history: bool) -> Controller:
    state = StateDir(root).ensure()
    events = EventLog(state)
    return Controller(
        store=DesiredLoader(desired, env),
        state=state,
        cloud_factory=lambda d: make_cloud(d, env),
        events=events,
        history=HistoryRecorder(state, events) if history else None,
    )


async def passes(
    plain: Controller, recording: Controller, n: int
) -> tuple[list[float], list[float]]:
    assert recording.history is not None
    recording.history.start()
    a: list[float] = []
    b: list[float] = []
    for i in range(n + 2):
        for ctl, out in ((plain, a), (recording, b)) if i % 2 else ((recording, b), (plain, a)):
            t0 = time.process_time()
            await ctl.reconcile()
            if ctl.history is not None:
                await asyncio.to_thread(ctl.history.flush)
            if i >= 2:  # the first two rounds warm caches and fill the store
                out.append(time.process_time() - t0)
    await plain.drain()
    await recording.drain()
    recording.history.close()
    return a, b


def churn(root: Path, slots: int, changing: int, rounds: int) -> float:
    """CPU ms per pass to diff ``slots`` QRs with ``changing`` of them moving, and write."""
    db = HistoryDB(root / "churn.sqlite")
    tracker = Tracker()
    phase = [i % len(CYCLE) for i in range(slots)]
    zones = _rig.ZONES
    cost = 0.0
    for r in range(rounds):
        for i in range(r * changing, (r + 1) * changing):
            phase[i % slots] = (phase[i % slots] + 1) % len(CYCLE)
        looks = [
            Seen(
                f"slot-{i:05d}",
                zones[i % len(zones)],
                CYCLE[phase[i]],
                "v4-8",
                "spot",
                request=request_state(CYCLE[phase[i]]),
            )
            for i in range(slots)
        ]
        t0 = time.process_time()
        records = tracker.step(looks, 1e9 + r * 30, gone_zones=zones, complete=True)
        db.write(records)
        cost += time.process_time() - t0
    db.close()
    return cost / rounds * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--slots", type=int, default=1000)
    parser.add_argument("--passes", type=int, default=15, help="measured passes per controller")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    report = _rig.start("history_cost", f"history recording cost: {args.slots} ACTIVE slots")
    world = _rig.slots(args.slots)
    root = Path(tempfile.mkdtemp(prefix="bench-history-"))
    with _rig.emulator_process(root / "emu", _rig.scenario_yaml(world, page_size=1000)) as emu:
        env = _rig.cloud_env(emu.url, root)
        desired = root / "desired.yaml"
        _rig.write_atomic(desired, _rig.desired_yaml(world))
        plain = controller(desired, root / "plain", env, history=False)
        recording = controller(desired, root / "recording", env, history=True)
        a, b = asyncio.run(passes(plain, recording, args.passes))
    med_a, med_b = _rig.median(a) * 1000, _rig.median(b) * 1000
    extra = (med_b - med_a) / med_a * 100
    report.note(f"{len(a)} passes each, interleaved; emulator page size 1000")
    report.add("controller CPU per pass, without history (median)", med_a, "ms")
    report.add("controller CPU per pass, with history + flush (median)", med_b, "ms")
    report.add("extra CPU for recording", extra, "%", f"<= {TARGET_PCT:g} %", extra <= TARGET_PCT)
    report.add(
        "extra CPU for recording (total over all passes)",
        (sum(b) - sum(a)) / sum(a) * 100,
        "%",
    )
    ms = churn(root, args.slots, args.slots // 10, 30)
    report.add(
        f"recorder: diff {args.slots} QRs, {args.slots // 10} moving, + write", ms, "ms/pass"
    )
    return _rig.finish(report, args.json)


if __name__ == "__main__":
    sys.exit(main())
