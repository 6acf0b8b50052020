"""Benchmark: cloud calls per poll at 10 / 100 / 1,000 slots over 4 zones (must be flat).

For each size the emulator (own process, default list page size 25, like a server that picks a
small page when the client names none) holds that many ACTIVE slots, and one ``observe`` runs:

- REST as shipped (``locations/-``, no ``pageSize``): HTTP requests per poll;
- REST asking ``pageSize=1000`` (injected by an httpx request hook, the change proposed in
  docs/performance.md): HTTP requests per poll;
- the gcloud backend (per zone, as the controller calls it): gcloud processes per poll (counted
  by a wrapper script that logs each run, then execs gcloud) and the HTTP requests they made.

Requests are counted with the emulator's request log. Exit status 1 when the count of cloud
calls the controller makes (REST requests, gcloud runs) is not the same at every size.
``--slices N``: every slot a multislice queued resource of N nodes (each poll must still be
one QR list and one node list, and every slot read as one node of N slices).

    python scripts/bench/calls_per_poll.py [--sizes 10 100 1000] [--slices N] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _rig
import httpx

from reconciler.adapters.gcloud import GcloudCloud
from reconciler.adapters.rest import RestCloud
from reconciler.model.observed import Observation


async def _ask_big_pages(request: httpx.Request) -> None:
    if request.method == "GET" and request.url.path.endswith(("/queuedResources", "/nodes")):
        request.url = request.url.copy_merge_params({"pageSize": "1000"})


def _gcloud_wrapper(directory: Path, gcloud: str) -> tuple[Path, Path]:
    log = directory / "gcloud-runs.log"
    log.write_text("")
    wrapper = directory / "gcloud-counting"
    wrapper.write_text(f'#!/bin/sh\necho run >> "{log}"\nexec "{gcloud}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, log


def _runs(log: Path) -> int:
    return len(log.read_text().splitlines())


def _check(seen: Observation, world: list[tuple[str, str]], slices: int) -> None:
    assert len(seen.requests) == len(world)
    assert len(seen.nodes) == len(world) * slices
    if slices > 1:  # every slot one node of ``slices`` slices
        assert all(len(seen.node(z, name).slices) == slices for z, name in world)  # type: ignore[union-attr]


async def one_size(
    n: int, root: Path, report: _rig.Report, gcloud: str | None, slices: int = 1
) -> dict[str, int]:
    world = _rig.slots(n)
    zones = sorted({z for z, _ in world})
    out: dict[str, int] = {}
    scenario = _rig.scenario_yaml(world, slices=slices)
    with _rig.emulator_process(root / f"emu-{n}", scenario, speed=0) as emu:
        env = _rig.cloud_env(emu.url, root / f"env-{n}")
        client = emu.client

        async with RestCloud(_rig.PROJECT, env=env) as rest:
            await rest.observe(None)  # warm the connection
            client.clear_requests()
            seen = await rest.observe(None)
            _check(seen, world, slices)
            out["rest"] = sum(client.request_counts().values())

        hooked = httpx.AsyncClient(event_hooks={"request": [_ask_big_pages]}, trust_env=False)
        async with hooked, RestCloud(_rig.PROJECT, env=env, client=hooked) as rest:
            client.clear_requests()
            seen = await rest.observe(None)
            assert len(seen.requests) == n
            out["rest_page1000"] = sum(client.request_counts().values())

        if gcloud is not None:
            wrapper, log = _gcloud_wrapper(root / f"env-{n}", gcloud)
            cloud = GcloudCloud(_rig.PROJECT, gcloud=str(wrapper), env=env)
            client.clear_requests()
            seen = await cloud.observe(zones)
            _check(seen, world, slices)
            out["gcloud_runs"] = _runs(log)
            out["gcloud_http"] = sum(client.request_counts().values())
            await cloud.aclose()
    report.add(f"{n:>5} slots: REST requests per poll (as shipped)", out["rest"], "req")
    report.add(f"{n:>5} slots: REST requests per poll (pageSize=1000)", out["rest_page1000"], "req")
    if gcloud is not None:
        report.add(f"{n:>5} slots: gcloud runs per poll", out["gcloud_runs"], "runs")
        report.add(
            f"{n:>5} slots: HTTP requests made by those gcloud runs", out["gcloud_http"], "req"
        )
    return out


async def measure(sizes: list[int], report: _rig.Report, slices: int = 1) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-calls-"))
    gcloud = _rig.gcloud_path()
    if gcloud is None:
        report.note("gcloud is not installed: gcloud counts skipped")
    counts = [await one_size(n, root, report, gcloud, slices) for n in sizes]
    for key, label in (
        ("rest", "REST requests (as shipped)"),
        ("rest_page1000", "REST requests (pageSize=1000)"),
        ("gcloud_runs", "gcloud runs"),
    ):
        values = [c[key] for c in counts if key in c]
        if values:
            flat = len(set(values)) == 1
            report.add(
                f"{label}: flat over {sizes}",
                float(flat),
                "bool",
                "flat",
                flat if key != "rest_page1000" else None,
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--slices", type=int, default=1, help="slices per slot (multislice)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    each = f" of {args.slices} slices" if args.slices > 1 else ""
    report = _rig.start(
        "calls_per_poll",
        f"calls per poll over {len(_rig.ZONES)} zones at {args.sizes} slots{each}",
    )
    asyncio.run(measure(args.sizes, report, args.slices))
    return _rig.finish(report, args.json)


if __name__ == "__main__":
    sys.exit(main())
