"""Benchmark: bootstrap fan-out to 1, 16 and 64 workers with a script that sleeps 1 s.

Real OpenSSH sshd on 127.0.0.2 ... (the test fixture's launcher), real asyncssh, a fresh node
instance per run (so every run pins host keys on first use, as a new node does). Prints the
wall time of each run, and the ratios of the best run of each size to the best 1-worker run;
targets: 16/1 <= 1.5, 64/1 <= 3. All "workers" share this machine's cores, so the servers'
work (a re-exec'd sshd per connection, SFTP, the shell) competes with the client's: on real
slices each worker has its own CPU. Other load on the machine shows in the numbers; the load
average is printed.

    python scripts/bench/bootstrap_fanout.py                  # one sshd per worker
    python scripts/bench/bootstrap_fanout.py --shared-sshd    # one sshd per 16 addresses

Needs openssh-server and openssh-client. Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from reconciler.adapters.ssh import bootstrap, resolve_scripts
from tests.fixtures.sshd import make_client_key, start_cluster

TARGETS = {16: 1.5, 64: 3.0}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _run(size: int, root: Path, key: Path, shared: bool, repeat: int) -> float:
    cluster = start_cluster(
        root / f"c{size}", size, client_key=key, agent_sock=None, per_process=not shared
    )
    try:
        base = root / "desired"
        base.mkdir(exist_ok=True)
        (base / "sleep.sh").write_text("#!/bin/sh\nsleep 1\n")
        scripts = resolve_scripts(base, ["sleep.sh"])
        best = float("inf")
        for attempt in range(repeat):
            instance = f"bench-{size}@{attempt}{time.monotonic_ns()}"
            opts = cluster.options(root / f"known_hosts-{size}-{attempt}")
            cpu, start = _cpu(), time.perf_counter()
            result = await bootstrap(instance, cluster.workers(), scripts, root / "logs", opts)
            wall = time.perf_counter() - start
            if not result.ok:
                raise SystemExit(f"{size} workers: {[str(w.error) for w in result.failed]}")
            print(f"  {size:3d} workers: {wall:6.2f} s wall, {_cpu() - cpu:5.2f} s client CPU")
            best = min(best, wall)
        return best
    finally:
        cluster.stop()


async def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--shared-sshd", action="store_true", help="one sshd per 16 addresses")
    parser.add_argument("--repeat", type=int, default=3, help="runs per size (best is kept)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-fanout-", dir="/tmp"))
    try:
        key = make_client_key(root / "key")
        print(
            f"bootstrap fan-out, script 'sleep 1', {os.cpu_count()} cores, "
            f"{'one sshd per 16 workers' if args.shared_sshd else 'one sshd per worker'}"
        )
        print(f"  load average before: {os.getloadavg()[0]:.2f}")
        walls = {n: await _run(n, root, key, args.shared_sshd, args.repeat) for n in args.sizes}
        print(f"  load average after: {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    missed = False
    if 1 in walls:
        for n, wall in walls.items():
            if n == 1:
                continue
            ratio = wall / walls[1]
            target = TARGETS.get(n)
            verdict = "" if target is None else (" ok" if ratio <= target else " MISSED")
            missed |= target is not None and ratio > target
            print(
                f"  ratio {n}/1: {ratio:.2f}"
                + (f" (target <= {target}){verdict}" if target else "")
            )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
