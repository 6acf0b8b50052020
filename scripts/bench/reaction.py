"""Benchmark: desired.yaml saved -> the create request arrives at the emulator.

A real controller runs as a subprocess (``python -m reconciler -f desired.yaml --state-dir ...
-q run``, what a user starts) against an emulator in this process. Each sample, once the
controller is steady (everything it holds ACTIVE in its snapshot, so it sits in its slow poll)
and after a random pause (so saves fall at random points of its timers), the file is saved by
rename with one more held slot (one ACTIVE slot per zone is held from the start, so every
observation covers the same 4 zones). The latency is the emulator's clock at the create
request minus its clock just before the save: one clock, no cross-process skew. Both backends,
in one run: REST ``--samples`` times (median of 20 by default), gcloud ``--gcloud-samples``
times (each gcloud pass is seconds of CPU: fewer samples). Target: REST median <= 300 ms.

    python scripts/bench/reaction.py [--samples 20] [--gcloud-samples 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _rig

from reconciler.emulator import Emulator

TARGET_REST_MS = 300.0
SPEED = 20.0  # emulated seconds per real second: a new QR is ACTIVE 0.4 s after its create


def _create_at(emu: Emulator, name: str) -> float | None:
    for r in emu.requests():
        if r.key == "POST queuedResources.create" and r.query.get("queuedResourceId") == name:
            return r.at
    return None


def _steady(ctl: _rig.ControllerProcess, n: int) -> bool:
    doc = ctl.snapshot()
    if doc is None or not ctl.alive():
        return False
    rows = [s for s in doc.get("slots", []) if s.get("managed")]
    return (
        len(rows) == n
        and all(s.get("state") == "ACTIVE" for s in rows)
        and not doc.get("in_flight")
    )


def run_backend(backend: str, samples: int, root: Path, seed: int) -> list[float]:
    """Latencies in seconds, one per sample."""
    rng = random.Random(seed)
    latencies: list[float] = []
    root.mkdir(parents=True)
    with Emulator(speed=SPEED) as emu:
        env = _rig.cloud_env(emu.url, root)
        desired = root / "desired.yaml"
        # One ACTIVE slot held in every zone from the start, so every sample's observation
        # covers the same four zones (the gcloud backend lists per zone in use).
        world: list[tuple[str, str]] = [(z, f"base-{k}") for k, z in enumerate(_rig.ZONES)]
        for zone, name in world:
            emu.add_queued_resource(zone, name, labels=dict(_rig.LABELS), state="ACTIVE")

        def text() -> str:
            return _rig.desired_yaml(world, backend=backend, poll="30s", fast="1s")

        _rig.write_atomic(desired, text())
        with _rig.controller_process(desired, root / "state", env) as ctl:
            _rig.wait_until("the first snapshot", lambda: ctl.snapshot() is not None, timeout=60)
            for i in range(samples):
                _rig.wait_until(
                    "the controller is steady", lambda: _steady(ctl, len(world)), timeout=120
                )
                time.sleep(rng.uniform(0.3, 1.0))
                zone = _rig.ZONES[i % len(_rig.ZONES)]
                name = f"react-{backend}-{i:03d}"
                world.append((zone, name))
                saved_at = emu.now()
                _rig.write_atomic(desired, text())
                _rig.wait_until(
                    f"the create of {name}",
                    lambda name=name: _create_at(emu, name) is not None,  # type: ignore[misc]
                    timeout=120,
                    interval=0.005,
                )
                arrived = _create_at(emu, name)
                assert arrived is not None
                latency = (arrived - saved_at) / SPEED
                latencies.append(latency)
                print(f"    {backend} sample {i + 1:2d}: {latency * 1000:8.1f} ms", flush=True)
            if not ctl.alive():
                raise RuntimeError(f"controller died:\n{ctl.log_tail()}")
    return latencies


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=20, help="REST samples")
    parser.add_argument("--gcloud-samples", type=int, default=5, help="gcloud samples (0: skip)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-reaction-"))
    report = _rig.start(
        "reaction",
        "reaction: desired.yaml saved -> create request at the emulator (controller subprocess)",
    )
    rest = run_backend("rest", args.samples, root / "rest", args.seed)
    med = _rig.median(rest)
    report.add(
        f"REST: median of {len(rest)}",
        med * 1000,
        "ms",
        f"<= {TARGET_REST_MS:g} ms",
        med * 1000 <= TARGET_REST_MS,
    )
    report.add("REST: min", min(rest) * 1000, "ms")
    report.add("REST: p90", _rig.pct(rest, 0.9) * 1000, "ms")
    report.add("REST: max", max(rest) * 1000, "ms")
    if args.gcloud_samples and _rig.gcloud_path() is None:
        report.note("gcloud is not installed: the gcloud backend was not measured")
    elif args.gcloud_samples:
        gc = run_backend("gcloud", args.gcloud_samples, root / "gcloud", args.seed)
        report.add(f"gcloud: median of {len(gc)}", _rig.median(gc) * 1000, "ms")
        report.add("gcloud: min", min(gc) * 1000, "ms")
        report.add("gcloud: max", max(gc) * 1000, "ms")
        report.add("ratio of medians gcloud/REST", _rig.median(gc) / med, "x")
    return _rig.finish(report, args.json)


if __name__ == "__main__":
    sys.exit(main())
