"""Benchmark: the controller at steady state with 1,000 slots — CPU % of a core and RSS.

The emulator (own process) holds 1,000 ACTIVE slots over 4 zones, all in a valid desired file
(REST, ``poll_interval`` 30 s, setup steps and tmux off), so every pass is a full observation,
plan, snapshot and memory save that changes nothing. The controller runs as a subprocess, as a
user starts it (``python -m reconciler -f desired.yaml --state-dir ... -q run``). Once its
snapshot shows all 1,000 ACTIVE with no changes planned, its CPU (utime+stime from
/proc/<pid>/stat) is read over a ``--window`` of real time (default 180 s at the real 30 s
interval: a direct measurement, no scaling) and its VmRSS from /proc/<pid>/status is
sampled every second; VmHWM is the peak since start. Polls in the window are counted in the
emulator's request log (QR list requests without a page token). As a window holds 5 to 7
passes of 30 s depending on its phase, the cost of one pass (window CPU less the waiting
cost, per pass) and what it makes at the poll interval are reported too. Targets: CPU <= 1 %
of a core (both ways), RSS <= 120 MB.

    python scripts/bench/steady_state.py [--slots 1000] [--window 180] [--json out.json]
    python scripts/bench/steady_state.py --page-size 1000    # emulator serves 1,000 per page
    python scripts/bench/steady_state.py --metrics           # /metrics on, scraped every 15 s

With ``--metrics`` the file sets ``settings.metrics`` and the window is scraped every
``--scrape-interval`` seconds over HTTP (``_metrics_probe.Scraper``): each answer's wall time
(target <= 50 ms at 1,000 slots), and the metrics' share of the controller's CPU, measured
directly in this process (the per-pass hooks and one scrape's rendering of the controller's own
last snapshot, ``_metrics_probe.in_process_costs``) and set against the window's CPU (target
<= 2 %). A run without ``--metrics`` just before gives the paired whole-process comparison.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _metrics_probe
import _rig

TARGET_CPU_PCT = 1.0
TARGET_RSS_MB = 120.0


def _steady(ctl: _rig.ControllerProcess, n: int) -> bool:
    doc: dict[str, Any] | None = ctl.snapshot()
    if doc is None:
        if not ctl.alive():
            raise RuntimeError(f"controller died:\n{ctl.log_tail()}")
        return False
    rows = [s for s in doc.get("slots", []) if s.get("managed")]
    return (
        len(rows) == n
        and all(s.get("state") == "ACTIVE" for s in rows)
        and (doc.get("plan") or {}).get("summary") == "No changes."
        and not doc.get("in_flight")
    )


def measure(args: argparse.Namespace, report: _rig.Report) -> None:
    world = _rig.slots(args.slots)
    root = Path(tempfile.mkdtemp(prefix="bench-steady-"))
    scenario = _rig.scenario_yaml(world, page_size=args.page_size)
    with _rig.emulator_process(root / "emu", scenario, speed=1.0) as emu:
        env = _rig.cloud_env(emu.url, root)
        desired = root / "desired.yaml"
        text = _rig.desired_yaml(world, poll=f"{args.poll:g}s", fast="5s")
        if args.metrics:
            text = text.replace("defaults:\n", "  metrics: '127.0.0.1:0'\ndefaults:\n", 1)
        _rig.write_atomic(desired, text)
        started = time.monotonic()
        with _rig.controller_process(desired, root / "state", env) as ctl:
            _rig.wait_until(
                "the snapshot shows every slot ACTIVE",
                lambda: _steady(ctl, len(world)),
                timeout=120,
                interval=0.1,
            )
            startup = time.monotonic() - started
            startup_cpu = ctl.cpu_seconds()
            emu.client.clear_requests()
            scraper = contextlib.nullcontext(None)
            if args.metrics:
                url = _metrics_probe.serving_url(root / "state" / "events.jsonl")
                assert url is not None, "no metrics.serving event"
                scraper = _metrics_probe.Scraper(url, args.scrape_interval)
            cpu0, t0 = ctl.cpu_seconds(), time.monotonic()
            rss: list[int] = []
            cpus = [cpu0]
            with scraper as scraping:
                while time.monotonic() - t0 < args.window:
                    time.sleep(1.0)
                    if not ctl.alive():
                        raise RuntimeError(f"controller died:\n{ctl.log_tail()}")
                    rss.append(ctl.memory_kb()["VmRSS"])
                    cpus.append(ctl.cpu_seconds())
            cpu1, t1 = ctl.cpu_seconds(), time.monotonic()
            mem = ctl.memory_kb()
            polls = sum(
                1
                for r in emu.client.requests()
                if r.key == "GET queuedResources.list" and "pageToken" not in r.query
            )
            requests = len(emu.client.requests())
            still = _steady(ctl, len(world))
            if scraping is not None:
                costs = _metrics_probe.in_process_costs(desired, root / "state" / "status.json")
    window = t1 - t0
    cpu = cpu1 - cpu0
    cpu_pct = cpu / window * 100
    rss_mb = max(rss) / 1024
    # Seconds without a pass (under 50 ms of CPU): what the loop costs while it waits.
    quiet = [b - a for a, b in itertools.pairwise(cpus) if b - a < 0.05]
    idle_pct = sum(quiet) / max(len(quiet), 1) * 100
    report.note(
        f"{len(world)} ACTIVE slots, REST, poll_interval {args.poll:g} s, emulator page size "
        f"{args.page_size or 25}; window {window:.0f} s, {polls} polls, {requests} requests"
    )
    report.add(
        f"controller CPU over {window:.0f} s at a {args.poll:g} s poll",
        cpu_pct,
        "% core",
        f"<= {TARGET_CPU_PCT:g} %",
        cpu_pct <= TARGET_CPU_PCT,
    )
    report.add(
        "VmRSS, max sampled in the window",
        rss_mb,
        "MB",
        f"<= {TARGET_RSS_MB:g} MB",
        rss_mb <= TARGET_RSS_MB,
    )
    report.add("VmHWM (peak RSS since start)", mem["VmHWM"] / 1024, "MB")
    # The window holds 3 or 4 passes depending on where it starts: also give the cost of one
    # pass (window CPU minus the waiting cost, per pass) and what that makes at the interval.
    per_pass = max(0.0, cpu - idle_pct / 100 * window) / max(polls, 1)
    projected = per_pass / args.poll * 100 + idle_pct
    report.add("CPU of one pass (window CPU less waiting, per pass)", per_pass * 1000, "ms")
    report.add("CPU while waiting between passes", idle_pct, "% core")
    report.add(
        f"one pass every {args.poll:g} s + waiting",
        projected,
        "% core",
        f"<= {TARGET_CPU_PCT:g} %",
        projected <= TARGET_CPU_PCT,
    )
    report.add("polls in the window", polls, "polls")
    report.add("start to first steady snapshot: wall", startup, "s")
    report.add("start to first steady snapshot: CPU", startup_cpu, "s")
    if not still:
        report.note("the snapshot was not steady at the end of the window")
    if scraping is not None:
        _metrics_rows(report, scraping, costs, polls, cpu)


def _metrics_rows(
    report: _rig.Report,
    scraping: _metrics_probe.Scraper,
    costs: tuple[float, float, float],
    polls: int,
    cpu: float,
) -> None:
    hooks, served, remade = costs
    wall = sorted(scraping.wall_ms)
    report.note(
        f"{len(wall)} scrapes, {scraping.families} families, {scraping.samples} samples each"
    )
    report.add("scrape answer, median (wall)", statistics.median(wall), "ms")
    report.add("scrape answer, slowest (wall)", wall[-1], "ms", "<= 50 ms", wall[-1] <= 50.0)
    report.add("metrics hooks of one pass (CPU)", hooks * 1e6, "us")
    report.add("serving one scrape, page already made (CPU)", served * 1000, "ms")
    report.add("making the page after a pass, 1,000 slots (CPU)", remade * 1000, "ms")
    # The page is made again only by the first scrape after a pass (at most one per pass).
    added = polls * hooks + len(wall) * served + min(len(wall), polls + 1) * remade
    share = added / cpu * 100
    report.add("metrics' share of the controller's CPU", share, "%", "<= 2 %", share <= 2.0)
    every = (polls * hooks + len(wall) * (served + remade)) / cpu * 100
    report.add("the same if every scrape made the page again", every, "%")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--slots", type=int, default=1000)
    parser.add_argument("--window", type=float, default=180.0, help="seconds measured")
    parser.add_argument("--poll", type=float, default=30.0, help="poll_interval, seconds")
    parser.add_argument("--page-size", type=int, default=None, help="emulator list page size")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--metrics", action="store_true", help="serve /metrics and scrape it")
    parser.add_argument("--scrape-interval", type=float, default=15.0, help="seconds")
    args = parser.parse_args()
    report = _rig.start(
        "steady_state", f"steady state: {args.slots} ACTIVE slots, controller subprocess, REST"
    )
    measure(args, report)
    return _rig.finish(report, args.json)


if __name__ == "__main__":
    sys.exit(main())
