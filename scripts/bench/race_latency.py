"""Benchmark: a race's winner reaches PROVISIONING -> the losers' delete requests arrive.

A real controller runs as a subprocess (REST, ``fast_poll_interval`` 1 s by default) against an
emulator in this process. Each sample is a fresh race group of three candidates in three zones
that all wait for capacity; at a random moment one unit of capacity appears in the first
candidate's zone, so that candidate wins (as spot capacity shows up) and the other two lose.
Times come from the emulator's clock only: the winner's PROVISIONING moment is its
create request's time plus (node createTime - QR createTime) — the emulator creates the node
at the instant the QR enters PROVISIONING — and the losers' deletes are request times. Nothing
but polling can reveal a winner, so the latency is bounded by the fast poll interval (+10 %
jitter) plus one observation and dispatch. Target: every sample <= fast_poll_interval + 200 ms.

    python scripts/bench/race_latency.py [--races 10] [--fast 1.0] [--json out.json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _rig

from reconciler.emulator import Emulator

ACCELERATOR = "v4-8"


def _stamp(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _race_text(races: list[tuple[str, list[tuple[str, str]]]], fast: float) -> str:
    world = [c for _, cands in races for c in cands]
    groups = [
        f"  - {{name: {name}, count: 1, slots: [{', '.join(n for _, n in cands)}]}}"
        for name, cands in races
    ]
    groups = ["race_groups:", *groups] if groups else ["race_groups: []"]
    text = _rig.desired_yaml(world, poll="30s", fast=f"{fast:g}s", extra="\n".join(groups) + "\n")
    # race candidates carry no `want` of their own: the group decides
    return text.replace(", want: held}", "}")


def _steady(ctl: _rig.ControllerProcess) -> bool:
    doc = ctl.snapshot()
    return bool(
        doc is not None
        and ctl.alive()
        and not doc.get("in_flight")
        and (doc.get("plan") or {}).get("summary") == "No changes."
        and all(s.get("state") in ("ACTIVE", "NOT_QUEUED") for s in doc.get("slots", []))
    )


def measure(args: argparse.Namespace, report: _rig.Report) -> None:
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="bench-race-"))
    speed = args.speed
    target = args.fast + 0.2
    last: list[float] = []
    first: list[float] = []
    with Emulator(speed=speed) as emu:
        for zone in _rig.ZONES:
            emu.set_capacity(zone, ACCELERATOR, 0)
        env = _rig.cloud_env(emu.url, root)
        desired = root / "desired.yaml"
        races: list[tuple[str, list[tuple[str, str]]]] = []
        _rig.write_atomic(desired, _race_text(races, args.fast))
        with _rig.controller_process(desired, root / "state", env) as ctl:
            _rig.wait_until("the first snapshot", lambda: ctl.snapshot() is not None, timeout=60)
            for i in range(args.races):
                _rig.wait_until("the controller is steady", lambda: _steady(ctl), timeout=120)
                zones = [_rig.ZONES[(i + k) % len(_rig.ZONES)] for k in range(3)]
                winner_zone = zones[0]
                cands = [(z, f"r{i:02d}-{'abc'[k]}") for k, z in enumerate(zones)]
                races.append((f"race-{i:02d}", cands))
                _rig.write_atomic(desired, _race_text(races, args.fast))
                _rig.wait_until(
                    "every candidate waits for capacity",
                    lambda cands=cands: all(  # type: ignore[misc]
                        ((emu.queued_resource(z, n) or {}).get("state") or {}).get("state")
                        == "WAITING_FOR_RESOURCES"
                        for z, n in cands
                    ),
                    timeout=60,
                )
                # Capacity appears at a random moment of the controller's fast polls.
                time.sleep(rng.uniform(0.0, 1.5 * args.fast))
                used = emu.capacity_used(winner_zone, ACCELERATOR)
                emu.set_capacity(winner_zone, ACCELERATOR, used + 1)
                winner = cands[0][1]
                losers = {n for _, n in cands[1:]}

                def deletes(losers: set[str] = losers) -> dict[str, float]:
                    got: dict[str, float] = {}
                    for r in emu.requests():
                        name = r.path.rsplit("/", 1)[-1]
                        if r.key == "DELETE queuedResources.delete" and name in losers:
                            got.setdefault(name, r.at)
                    return got

                def all_deleted(losers: set[str] = losers) -> bool:
                    return len(deletes(losers)) == len(losers)

                _rig.wait_until("the losers' deletes", all_deleted, timeout=60)
                got = deletes()
                create = next(
                    r.at
                    for r in emu.requests()
                    if r.key == "POST queuedResources.create"
                    and r.query.get("queuedResourceId") == winner
                )
                qr = emu.queued_resource(winner_zone, winner)
                node = emu.node(winner_zone, winner)
                assert qr is not None and node is not None, "the winner has no node"
                provisioning = create + _stamp(node["createTime"]) - _stamp(qr["createTime"])
                lat_last = (max(got.values()) - provisioning) / speed
                lat_first = (min(got.values()) - provisioning) / speed
                last.append(lat_last)
                first.append(lat_first)
                print(
                    f"    race {i + 1:2d}: losers' deletes {lat_first * 1000:7.1f} /"
                    f" {lat_last * 1000:7.1f} ms after the winner's PROVISIONING",
                    flush=True,
                )
            if not ctl.alive():
                raise RuntimeError(f"controller died:\n{ctl.log_tail()}")
    report.add(
        f"max over {len(last)} races (last loser's delete)",
        max(last) * 1000,
        "ms",
        f"<= {target * 1000:g} ms",
        max(last) <= target,
    )
    report.add("median (last loser's delete)", _rig.median(last) * 1000, "ms")
    report.add("min (first loser's delete)", min(first) * 1000, "ms")
    spread = max(b - a for a, b in zip(first, last, strict=True))
    report.add("spread first->last loser's delete, max", spread * 1000, "ms")
    report.note(f"fast_poll_interval {args.fast:g} s, jitter +-10 %, emulator speed {speed:g}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--races", type=int, default=10)
    parser.add_argument("--fast", type=float, default=1.0, help="fast_poll_interval, seconds")
    parser.add_argument("--speed", type=float, default=2.0, help="emulator speed")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    report = _rig.start(
        "race_latency",
        "race latency: winner PROVISIONING -> losers' deletes (controller subprocess, REST)",
    )
    measure(args, report)
    return _rig.finish(report, args.json)


if __name__ == "__main__":
    sys.exit(main())
