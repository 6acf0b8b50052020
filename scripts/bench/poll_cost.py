"""Benchmark: what one poll of 40 slots over 4 zones costs, three ways, in one run.

(a) the old tool's way: one ``gcloud compute tpus queued-resources describe`` per slot (40 runs,
    at most ``--concurrency`` at once, as the old tool's poll concurrency bounded them);
(b) the gcloud backend's ``observe``: one QR list and one node list per zone (8 gcloud runs);
(c) the REST backend's ``observe``: one paginated QR list and one node list on ``locations/-``.

CPU is this process's own (RUSAGE_SELF) plus its waited-for children's (RUSAGE_CHILDREN: every
gcloud run). The emulator runs in its own process, so its CPU is not counted; wall time
includes its answers. (a) runs once (40 gcloud runs are ~30 s of CPU); (b) ``--gcloud-repeat``
times; (c) ``--rest-repeat`` times after one warm-up call (the cold first call is shown too).
Target: REST <= 20 ms CPU per poll. Exit status 1 when it is missed.

    python scripts/bench/poll_cost.py [--slots 40] [--json out.json]
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

from reconciler.adapters.gcloud import GcloudCloud
from reconciler.adapters.rest import RestCloud

TARGET_REST_CPU_MS = 20.0


async def _describe_each(cloud: GcloudCloud, world: list[tuple[str, str]]) -> int:
    found = await asyncio.gather(*(cloud.describe_request("tpu", z, n) for z, n in world))
    return sum(q is not None for q in found)


async def measure(args: argparse.Namespace, report: _rig.Report) -> None:
    world = _rig.slots(args.slots)
    zones = sorted({z for z, _ in world})
    root = Path(tempfile.mkdtemp(prefix="bench-poll-cost-"))
    with _rig.emulator_process(root / "emu", _rig.scenario_yaml(world), speed=0) as emu:
        env = _rig.cloud_env(emu.url, root)
        report.note(f"{len(world)} ACTIVE slots over {len(zones)} zones; emulator {emu.url}")

        # (c) REST
        rest = RestCloud(_rig.PROJECT, env=env)
        emu.client.clear_requests()
        cpu0, t0 = _rig.cpu_self(), time.perf_counter()
        seen = await rest.observe(None)
        cold_wall, cold_cpu = time.perf_counter() - t0, _rig.cpu_self() - cpu0
        assert len(seen.requests) == len(world), "REST observe missed slots"
        requests_per_poll = sum(emu.client.request_counts().values())
        cpu0, t0 = _rig.cpu_self(), time.perf_counter()
        for _ in range(args.rest_repeat):
            await rest.observe(None)
        rest_wall = (time.perf_counter() - t0) / args.rest_repeat
        rest_cpu = (_rig.cpu_self() - cpu0) / args.rest_repeat
        await rest.aclose()

        gcloud = _rig.gcloud_path()
        if gcloud is None:
            report.note("gcloud is not installed: (a) and (b) skipped")
            b_cpu = b_wall = a_cpu = a_wall = float("nan")
        else:
            cloud = GcloudCloud(_rig.PROJECT, gcloud=gcloud, env=env, concurrency=args.concurrency)
            # (b) the gcloud backend's observe (per zone, as the controller calls it)
            b_cpus, b_walls = [], []
            for _ in range(args.gcloud_repeat):
                c0, s0, t0 = _rig.cpu_children(), _rig.cpu_self(), time.perf_counter()
                seen = await cloud.observe(zones)
                b_walls.append(time.perf_counter() - t0)
                b_cpus.append(_rig.cpu_children() - c0 + _rig.cpu_self() - s0)
                assert len(seen.requests) == len(world), "gcloud observe missed slots"
            b_cpu, b_wall = _rig.median(b_cpus), _rig.median(b_walls)
            # (a) one describe per slot, once
            c0, s0, t0 = _rig.cpu_children(), _rig.cpu_self(), time.perf_counter()
            found = await _describe_each(cloud, world)
            a_wall = time.perf_counter() - t0
            a_cpu = _rig.cpu_children() - c0 + _rig.cpu_self() - s0
            assert found == len(world), "describe missed slots"
            await cloud.aclose()

    n = len(world)
    report.add(f"(a) {n} x gcloud describe: CPU per poll", a_cpu * 1000, "ms")
    report.add(f"(a) {n} x gcloud describe: wall per poll", a_wall * 1000, "ms")
    report.add(f"(b) gcloud observe ({2 * len(zones)} runs): CPU per poll", b_cpu * 1000, "ms")
    report.add(f"(b) gcloud observe ({2 * len(zones)} runs): wall per poll", b_wall * 1000, "ms")
    report.add(
        f"(c) REST observe ({requests_per_poll} requests): CPU per poll",
        rest_cpu * 1000,
        "ms",
        f"<= {TARGET_REST_CPU_MS:g} ms",
        rest_cpu * 1000 <= TARGET_REST_CPU_MS,
    )
    report.add("(c) REST observe: wall per poll", rest_wall * 1000, "ms")
    report.add("(c) REST observe, cold first call: CPU", cold_cpu * 1000, "ms")
    report.add("(c) REST observe, cold first call: wall", cold_wall * 1000, "ms")
    report.add("ratio CPU (a)/(c)", a_cpu / rest_cpu, "x")
    report.add("ratio CPU (b)/(c)", b_cpu / rest_cpu, "x")
    report.add("ratio CPU (a)/(b)", a_cpu / b_cpu, "x")
    report.add("ratio wall (a)/(c)", a_wall / rest_wall, "x")
    report.add("ratio wall (b)/(c)", b_wall / rest_wall, "x")
    report.add("gcloud CPU per run, (a)", a_cpu / n * 1000, "ms")
    report.add("gcloud CPU per run, (b)", b_cpu / (2 * len(zones)) * 1000, "ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--slots", type=int, default=40)
    parser.add_argument("--rest-repeat", type=int, default=50)
    parser.add_argument("--gcloud-repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8, help="gcloud runs at once")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    report = _rig.start("poll_cost", f"poll cost: {args.slots} slots over {len(_rig.ZONES)} zones")
    asyncio.run(measure(args, report))
    return _rig.finish(report, args.json)


if __name__ == "__main__":
    sys.exit(main())
