"""Benchmark: a steady controller stays quiet while a setup step keeps failing.

Forty ACTIVE slots (the emulator in its own process, nodes on loopback addresses so setup gets
as far as the SSH user) with ``setup.tmux: true`` and no ``settings.ssh_user``: every slot's
tmux step needs the OS Login user, and gcloud's OS Login endpoint is pointed at a local server
that refuses every request (403). The same world is run twice as a user starts it (``python -m
reconciler run``): once with ``setup.tmux: false`` (the REST observation's own cost: the
baseline) and once with the failing step. For each, over ``--window`` seconds of real time:
the controller's CPU (itself and the gcloud runs it waited for, from /proc), the polls (QR
list requests at the emulator) and the OS Login lookups (requests at the refusing server).
Targets: the failing step's CPU per poll <= 2x the baseline's; its polls no more than the
baseline's (the steady interval, never the fast one); at most one lookup per backoff window
(the first backoff is 60 s, so at most 2 in a window under 2 minutes).

    python scripts/bench/quiet_poll.py [--slots 40] [--window 30] [--warmup 10] [--json out.json]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import _rig

from tests.support.oslogin import RefusingOsLogin, refusing_oslogin

IPS = ",".join(f"127.0.0.{i}" for i in range(100, 104))


def _steady(ctl: _rig.ControllerProcess, n: int, tmux: bool) -> bool:
    doc: dict[str, Any] | None = ctl.snapshot()
    if doc is None:
        if not ctl.alive():
            raise RuntimeError(f"controller died:\n{ctl.log_tail()}")
        return False
    rows = [s for s in doc.get("slots", []) if s.get("managed")]
    if len(rows) != n or not all(s.get("state") == "ACTIVE" for s in rows):
        return False
    # With the failing step the plan is never empty (the step is due again after its backoff):
    # the run waits a warm-up instead (every step has been tried and has failed by then).
    return tmux or (doc.get("plan") or {}).get("summary") == "No changes."


def run_once(args: argparse.Namespace, tmux: bool, refusing: RefusingOsLogin) -> dict[str, float]:
    world = _rig.slots(args.slots, zones=("us-central2-b",))
    root = Path(tempfile.mkdtemp(prefix="bench-quiet-"))
    scenario = _rig.scenario_yaml(world)
    with _rig.emulator_process(root / "emu", scenario, speed=1.0, ip_pool=IPS) as emu:
        env = _rig.cloud_env(emu.url, root)
        env["CLOUDSDK_API_ENDPOINT_OVERRIDES_OSLOGIN"] = refusing.url
        env["CLOUDSDK_CORE_ACCOUNT"] = "bench@example.com"
        desired = root / "desired.yaml"
        text = _rig.desired_yaml(world, poll="2s", fast="0.3s")
        if tmux:
            text = text.replace("tmux: false}", "tmux: true}").replace(
                "settings:\n", f"settings:\n  tmux_socket: bench-quiet-{root.name}\n"
            )
        _rig.write_atomic(desired, text)
        with _rig.controller_process(desired, root / "state", env) as ctl:
            _rig.wait_until(
                "the snapshot is steady",
                lambda: _steady(ctl, len(world), tmux),
                timeout=120,
                interval=0.1,
            )
            if tmux:
                time.sleep(args.warmup)
            emu.client.clear_requests()
            hits0, cpu0, t0 = len(refusing.hits), ctl.cpu_seconds(), time.monotonic()
            time.sleep(args.window)
            cpu1, t1, hits1 = ctl.cpu_seconds(), time.monotonic(), len(refusing.hits)
            polls = sum(
                1
                for r in emu.client.requests()
                if r.key == "GET queuedResources.list" and "pageToken" not in r.query
            )
    cpu = cpu1 - cpu0
    return {
        "cpu_s": cpu,
        "window_s": t1 - t0,
        "polls": polls,
        "per_poll_ms": cpu / max(polls, 1) * 1000,
        "lookups": hits1 - hits0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--slots", type=int, default=40)
    parser.add_argument("--window", type=float, default=30.0, help="seconds measured, each run")
    parser.add_argument(
        "--warmup", type=float, default=10.0, help="seconds before the failing run's window"
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    report = _rig.start("quiet_poll", "A steady controller while a setup step keeps failing")
    with refusing_oslogin("refused") as refusing:
        base = run_once(args, False, refusing)
        failing = run_once(args, True, refusing)
    report.note(
        f"{args.slots} ACTIVE slots, REST, poll 2 s (fast 0.3 s), window {args.window:g} s each"
    )
    report.add("baseline (no setup step): CPU per poll", base["per_poll_ms"], "ms")
    report.add("baseline: polls in the window", base["polls"], "polls")
    ratio = failing["per_poll_ms"] / max(base["per_poll_ms"], 1e-9)
    report.add("failing tmux step: CPU per poll", failing["per_poll_ms"], "ms")
    report.add("failing tmux step / baseline, CPU per poll", ratio, "x", "<= 2x", ratio <= 2.0)
    report.add(
        "failing tmux step: polls in the window",
        failing["polls"],
        "polls",
        f"<= {base['polls'] + 1:g} (the baseline's)",
        failing["polls"] <= base["polls"] + 1,
    )
    report.add(
        "failing tmux step: OS Login lookups in the window",
        failing["lookups"],
        "lookups",
        "<= 2",
        failing["lookups"] <= 2,
    )
    return _rig.finish(report, args.json)


if __name__ == "__main__":
    sys.exit(main())
