"""Benchmark: Compute Engine calls per poll at 10 / 100 / 1,000 slots (no call per slot), and
the controller's CPU per poll on Compute Engine and on the TPU API, in one run.

For each size two emulators (each its own process, so a pass on one API sees nothing of the
other) hold that many slots: on Compute Engine nine in ten single-host TPU VMs (RUNNING, ours
by label) and one in ten a two-host TPU7x slice made by the Compute Engine cloud itself (a
BULK MIG, ACTIVE); on the TPU API as many ACTIVE queued resources. Then:

- ``ComputeCloud.observe``: its HTTP requests per poll (the emulator's request log): one
  ``aggregated/instances`` list and one ``aggregated/instanceGroupManagers`` list, each
  paged at the API's most (500 items a page), so the count grows with hosts / 500 and never
  with a call per slot; the check is that it equals those pages exactly;
- the CPU of one ``observe`` on each API (median of ``--repeat``);
- the CPU of one whole controller pass (``Controller.reconcile``: load, observe, plan,
  snapshot) with a desired file of those slots on each API (median of ``--repeat``).

The emulator's CPU is not counted (another process). Exit status 1 when a poll makes a call
more than its pages.

    python scripts/bench/compute_calls_per_poll.py [--sizes 10 100 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _rig

from reconciler.adapters.compute import PAGE_SIZE, ComputeCloud
from reconciler.adapters.rest import RestCloud
from reconciler.adapters.statedir import StateDir
from reconciler.model.requests import CreateRequest
from reconciler.runtime.backends import make_cloud
from reconciler.runtime.controller import Controller
from reconciler.runtime.desired_loader import DesiredLoader
from reconciler.runtime.events import EventLog

ZONES = ("us-central1-a", "us-central1-b", "us-central1-c", "us-east5-a")
IMAGE = "projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accel-2404-amd64-tpu"
LABELS = {"managed-by": "tpu-reconciler"}


def compute_world(n: int) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(single-host slots, two-host slice slots), one in ten a slice."""
    world = _rig.slots(n, ZONES, prefix="ce")
    singles = [w for i, w in enumerate(world) if i % 10]
    return singles, [w for i, w in enumerate(world) if not i % 10]


def desired_text(singles: list[tuple[str, str]], slices: list[tuple[str, str]],
                 tpu: list[tuple[str, str]]) -> str:  # fmt: skip
    rows = [f"  - {{name: {n}, zone: {z}, accelerator: tpu7x-8, want: held}}" for z, n in singles]
    rows += [f"  - {{name: {n}, zone: {z}, accelerator: tpu7x-16, want: held}}" for z, n in slices]
    rows += [f"  - {{name: {n}, zone: {z}, accelerator: v4-8, want: held}}" for z, n in tpu]
    return (
        f"project: {_rig.PROJECT}\nsettings: {{backend: rest}}\n"
        "defaults:\n  setup: {bootstrap: false, tailscale: false, tmux: false}\n"
        "slots:\n" + "\n".join(rows) + "\n"
    )


async def cpu_of(work: Callable[[], Awaitable[object]], repeat: int) -> float:
    """Median CPU seconds of ``work`` (after one warm-up)."""
    await work()
    spent = []
    for _ in range(repeat):
        before = _rig.cpu_self()
        await work()
        spent.append(_rig.cpu_self() - before)
    return statistics.median(spent)


async def one_size(n: int, root: Path, report: _rig.Report, repeat: int) -> bool:
    singles, slices = compute_world(n)
    tpu = _rig.slots(n, prefix="qr")
    # Each API's world in an emulator of its own: a pass on one sees none of the other's.
    with _rig.emulator_process(root / f"emu-ce-{n}", "", speed=1000) as emu:
        env = _rig.cloud_env(emu.url, root / f"env-ce-{n}")
        env["CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE"] = emu.url
        for zone, name in singles:
            emu.client.compute.add_instance(
                zone, name, "tpu7x-standard-4t",
                labels={**LABELS, "tpu-reconciler-slot": name, "tpu-accelerator": "tpu7x-8"},
            )  # fmt: skip
        async with ComputeCloud(_rig.PROJECT, env=env) as compute:
            for zone, name in slices:
                await compute.create_request(slice_request(zone, name))
            await asyncio.sleep(0.2)  # the slices' hosts come up (x1000 clock)
            await compute.observe(None)  # the first look also sweeps: let it finish
            if compute._sweep is not None:
                await compute._sweep
            emu.client.clear_requests()
            seen = await compute.observe(None)
            calls = sum(emu.client.request_counts().values())
            hosts = len(singles) + 2 * len(slices)
            pages = math.ceil(hosts / PAGE_SIZE) + max(1, math.ceil(len(slices) / PAGE_SIZE))
            assert len(seen.requests) == n, (len(seen.requests), n)
            assert all(r.state.value == "active" for r in seen.requests)
            compute_cpu = await cpu_of(lambda: compute.observe(None), repeat)
        compute_pass = await controller_pass_cpu(
            root / f"compute-{n}", env, desired_text(singles, slices, []), repeat
        )
    with _rig.emulator_process(root / f"emu-tpu-{n}", _rig.scenario_yaml(tpu), speed=0) as emu:
        env = _rig.cloud_env(emu.url, root / f"env-tpu-{n}")
        async with RestCloud(_rig.PROJECT, env=env) as rest:
            tpu_cpu = await cpu_of(lambda: rest.observe(None), repeat)
        tpu_pass = await controller_pass_cpu(
            root / f"tpu-{n}", env, desired_text([], [], tpu), repeat
        )
    flat = calls == pages
    report.add(f"{n:>5} compute slots: requests per poll", calls, "req", f"= {pages} pages", flat)
    report.add(f"{n:>5} compute slots: observe CPU", compute_cpu * 1000, "ms")
    report.add(f"{n:>5} TPU API slots: observe CPU", tpu_cpu * 1000, "ms")
    report.add(f"{n:>5} compute slots: controller pass CPU", compute_pass * 1000, "ms")
    report.add(f"{n:>5} TPU API slots: controller pass CPU", tpu_pass * 1000, "ms")
    return flat


def slice_request(zone: str, name: str) -> CreateRequest:
    return CreateRequest(
        name=name, zone=zone, accelerator="tpu7x-16", image=IMAGE, mode="spot", labels=LABELS,
        api="compute", machine_type="tpu7x-standard-4t", topology="2x2x2", hosts=2,
    )  # fmt: skip


async def controller_pass_cpu(root: Path, env: dict[str, str], text: str, repeat: int) -> float:
    """Median CPU of one controller pass over a file holding exactly what the cloud has."""
    root.mkdir(parents=True)
    path = root / "desired.yaml"
    path.write_text(text)
    state = StateDir(root / "state").ensure()
    controller = Controller(
        store=DesiredLoader(path, env),
        state=state,
        cloud_factory=lambda d: make_cloud(d, env),
        events=EventLog(state),
    )

    async def one() -> None:
        done = await controller.reconcile()
        assert done.observe_error is None, done.observe_error
        assert not [a for a in done.plan.actions if a.kind.value in ("create", "delete")]

    try:
        return await cpu_of(one, repeat)
    finally:
        await controller.drain()


async def measure(sizes: list[int], repeat: int, report: _rig.Report) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-compute-calls-"))
    flat = [await one_size(n, root, report, repeat) for n in sizes]
    report.add(f"no call per slot over {sizes}", float(all(flat)), "bool", "true", all(flat))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    report = _rig.start(
        "compute_calls_per_poll",
        f"Compute Engine calls per poll and controller CPU per poll at {args.sizes} slots",
    )
    asyncio.run(measure(args.sizes, args.repeat, report))
    return _rig.finish(report, args.json)


if __name__ == "__main__":
    sys.exit(main())
