"""Benchmark: workload probe passes and launches on 1 and 64 workers over pooled SSH.

Real OpenSSH sshd on 127.0.0.2 ... (the test fixture's launcher, one common port as
``settings.ssh_port`` requires), the real wrapper, real detached processes (``sleep``).

* probe: with the pool warm (one connection and one ``wrapper serve`` channel per worker already
  open), ``--passes`` passes of ``WorkloadRunner.probe`` on 64 workers; per pass the
  controller's CPU (this process: user + system from ``getrusage``) and wall time. Targets:
  CPU <= 30 ms, wall <= 1 s (median).
* launch: ``WorkloadRunner.launch`` of a fresh attempt on 1 and on 64 workers, cold (a new
  runner: connect, pin host keys, SFTP the wrapper — what a new node costs) and warm (pooled
  connections: a relaunch). Target: 64-worker wall <= 2 x 1-worker wall, each pair measured
  back to back in this run (best of ``--repeat``).

All "workers" share this machine's cores with the sshd processes and the shells they start, so
the servers' work competes with the client's; on a real slice each worker has its own CPU.

    python scripts/bench/workload_fanout.py                  # one sshd per worker
    python scripts/bench/workload_fanout.py --shared-sshd    # one sshd per 16 addresses
    python scripts/bench/workload_fanout.py --telemetry      # probe passes with the chip probe

``--telemetry``: each probe also asks the chip probe (``setup.telemetry``) on the same pooled
connection; every worker's tpu-env names one fake ``RuntimeMetricService``
(``tests/support/fake_tpu_runtime.py``, tpu-info's stubs) run in a process of its own, so its
work is not counted as the controller's. Same targets; no launch rounds.
    python scripts/bench/workload_fanout.py --workers 8 --slices 2   # multislice: launch on
        # both slices (8 workers, the slice variables set) against one slice (4): target <= 2x

Needs openssh-server and openssh-client. Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from _common import median, print_header

from reconciler.adapters.statedir import StateDir
from reconciler.adapters.workload import WorkloadRunner
from reconciler.model.desired import Settings
from reconciler.model.observed import NetworkEndpoint, Node, NodeState
from reconciler.model.workload import LaunchRequest
from tests.fixtures.setup_world import one_port
from tests.fixtures.sshd import SshCluster, make_client_key, start_cluster
from tests.support.fake_tpu_runtime import worker_files

SLOT = "bench"
RUN = "r1"
PROBE_CPU_MS = 30.0
PROBE_WALL_S = 1.0
LAUNCH_RATIO = 2.0


def _node(ips: list[str], uid: str) -> Node:
    return Node(
        name=f"bench-{len(ips)}",
        zone="us-central2-b",
        state=NodeState.READY,
        uid=uid,
        endpoints=tuple(NetworkEndpoint(ip) for ip in ips),
    )


def _runner(root: Path, cluster: SshCluster, port: int, tag: str) -> WorkloadRunner:
    state = StateDir(root / f"state-{tag}").ensure()
    return WorkloadRunner(
        state=state,
        settings=Settings(ssh_port=port, ssh_concurrency=64),
        user=cluster.user,
        key=cluster.client_key,
    )


def _request(workers: int, attempt: int, run_id: str = RUN, slices: int = 1) -> LaunchRequest:
    return LaunchRequest(
        slices=slices,
        slot=SLOT,
        run_id=run_id,
        attempt=attempt,
        command="sleep 600",
        workdir=None,
        env={"BENCH": "1", "HOME": "/nonexistent"},  # no login profile of this machine
        secret_env={},
        workers=workers,
    )


async def _launch_pair(
    root: Path, cluster: SshCluster, port: int, ips: list[str], repeat: int, slices: int = 1
) -> dict[str, dict[int, float]]:
    """Best wall time of launch on 1 (with ``slices`` > 1: one slice's) and on all workers
    (all slices, as one multislice program), cold and warm."""
    best: dict[str, dict[int, float]] = {"cold": {}, "warm": {}}
    for round_ in range(repeat):
        for size in (len(ips) // slices if slices > 1 else 1, len(ips)):
            node = _node(ips[:size], uid=f"{round_}{time.monotonic_ns()}")
            runner = _runner(root, cluster, port, f"{size}-{round_}")
            run_id = f"launch-{size}-{round_}"  # a fresh run: every launch starts a process
            try:
                for kind, attempt in (("cold", 1), ("warm", 2)):
                    start, cpu = time.perf_counter(), time.process_time()
                    many = slices if size == len(ips) else 1
                    await runner.launch(node, _request(size, attempt, run_id, many))
                    wall = time.perf_counter() - start
                    cpu = time.process_time() - cpu
                    best[kind][size] = min(best[kind].get(size, float("inf")), wall)
                    print(
                        f"  launch {kind} {size:3d} workers: {wall * 1000:7.1f} ms wall, "
                        f"{cpu * 1000:6.1f} ms controller CPU"
                    )
                    await runner.stop(node, SLOT, run_id, attempt, grace=1)
            finally:
                await runner.aclose()
    return best


async def _probe_passes(
    root: Path, cluster: SshCluster, port: int, ips: list[str], passes: int, telemetry: bool
) -> tuple[list[float], list[float]]:
    node = _node(ips, uid="probe")
    runner = _runner(root, cluster, port, "probe")
    try:
        await runner.launch(node, _request(len(ips), 1))
        return await _passes(runner, node, passes, telemetry)
    finally:
        await runner.stop(node, SLOT, RUN, 1, grace=1)
        await runner.aclose()


async def _passes(
    runner: WorkloadRunner, node: Node, passes: int, telemetry: bool = False
) -> tuple[list[float], list[float]]:
    """CPU and wall seconds of each probe pass, the pool warm."""
    for _ in range(60):  # until every chip probe has started (python and grpc, 64 at once)
        warm = await runner.probe(node, SLOT, RUN, 1, telemetry=telemetry)
        if not telemetry or all(p.telemetry and p.telemetry.chips for p in warm):
            break
        await asyncio.sleep(1.0)
    cpu: list[float] = []
    wall: list[float] = []
    user = system = 0.0
    for _ in range(passes):
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        probes = await runner.probe(node, SLOT, RUN, 1, telemetry=telemetry)
        wall.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        user += r1.ru_utime - r0.ru_utime
        system += r1.ru_stime - r0.ru_stime
        cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
        states = {p.state for p in probes}
        if states != {"alive"}:
            raise SystemExit(f"probe saw {states}: {[p.error for p in probes if p.error]}")
        if telemetry and not all(p.telemetry and p.telemetry.chips for p in probes):
            why = {p.telemetry.metrics if p.telemetry else "none" for p in probes}
            raise SystemExit(f"the chip probe read no chips on some worker: {why}")
        await asyncio.sleep(0.2)  # a pass every so often, not back to back
    print(
        f"  probe passes: {user / passes * 1000:.1f} ms user + {system / passes * 1000:.1f} ms "
        "system CPU per pass (system: the kernel's loopback TCP, which here also does the "
        "receiving side's work)"
    )
    return cpu, wall


def _fake_runtime(cluster: SshCluster) -> subprocess.Popen[str]:
    """One fake RuntimeMetricService in its own process, named in every worker's tpu-env."""
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.fake_tpu_runtime"],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    for host in cluster.hosts:
        worker_files(host.directory / "home", port)
    return proc


async def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--passes", type=int, default=20, help="probe passes")
    parser.add_argument("--repeat", type=int, default=3, help="launch rounds (best is kept)")
    parser.add_argument("--shared-sshd", action="store_true", help="one sshd per 16 addresses")
    parser.add_argument("--telemetry", action="store_true", help="probe the chips too")
    parser.add_argument(
        "--slices", type=int, default=1, help="compare all workers as N slices with one slice"
    )
    args = parser.parse_args()
    print_header(
        f"workload fan-out: {args.workers} workers, "
        f"{'one sshd per 16 workers' if args.shared_sshd else 'one sshd per worker'}"
        + (", chip telemetry on" if args.telemetry else "")
    )
    root = Path(tempfile.mkdtemp(prefix="bench-workload-", dir="/tmp"))
    cluster = None
    runtime: subprocess.Popen[str] | None = None
    best: dict[str, dict[int, float]] = {}
    try:
        key = make_client_key(root / "key")
        cluster = start_cluster(
            root / "c",
            args.workers,
            client_key=key,
            agent_sock=None,
            per_process=not args.shared_sshd,
        )
        port = one_port(cluster)
        ips = [a for host in cluster.hosts for a, _ in host.listen]
        if args.telemetry:
            runtime = _fake_runtime(cluster)
        cpu, wall = await _probe_passes(root, cluster, port, ips, args.passes, args.telemetry)
        if not args.telemetry:
            best = await _launch_pair(root, cluster, port, ips, args.repeat, args.slices)
    finally:
        if runtime is not None:
            runtime.kill()
            runtime.wait(10)
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    n = args.workers
    probe_cpu, probe_wall = median(cpu) * 1000, median(wall)
    ok_cpu, ok_wall = probe_cpu <= PROBE_CPU_MS, probe_wall <= PROBE_WALL_S
    print()
    print(
        f"  probe pass, {n} workers, pooled: CPU median {probe_cpu:.1f} ms "
        f"(max {max(cpu) * 1000:.1f}; target <= {PROBE_CPU_MS:g}) {'ok' if ok_cpu else 'MISSED'}"
    )
    print(
        f"  probe pass, {n} workers, pooled: wall median {probe_wall * 1000:.0f} ms "
        f"(max {max(wall) * 1000:.0f}; target <= {PROBE_WALL_S * 1000:.0f}) "
        f"{'ok' if ok_wall else 'MISSED'}"
    )
    missed = not (ok_cpu and ok_wall)
    one = n // args.slices if args.slices > 1 else 1
    for kind in best:
        ratio = best[kind][n] / best[kind][one]
        ok = ratio <= LAUNCH_RATIO
        missed |= not ok
        print(
            f"  launch {kind}: {one} worker(s) {best[kind][one] * 1000:.0f} ms, {n} workers "
            f"{best[kind][n] * 1000:.0f} ms, ratio {ratio:.2f} (target <= {LAUNCH_RATIO:g}) "
            f"{'ok' if ok else 'MISSED'}"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
