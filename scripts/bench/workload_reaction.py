"""Benchmark: a worker's process exits -> the controller decides to stop the rest and relaunch.

The real controller (in this process), the emulator, and four real sshd on 127.0.0.2-5 as the
workers of an emulated v4-32; the workload is the real wrapper running a small shell loop that
exits 1 on one worker when told to and writes the exact time it exited. Each round: wait until
the attempt runs on every worker, make one worker exit, then read from the event log when the
controller *decided* to stop the others (``action.started`` of ``stop``) and when it
relaunched (``action.started`` of ``launch`` of the next attempt). Target: exit -> stop decision
<= fast_poll_interval + 1 s (the loop polls at the fast interval while a workload runs).

    python scripts/bench/workload_reaction.py                 # fast poll 1 s, 5 rounds
    python scripts/bench/workload_reaction.py --fast-poll 5 --rounds 3

Needs openssh-server and openssh-client. Exit status 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from _common import command_line, median

from reconciler.adapters.statedir import StateDir
from reconciler.emulator import Emulator
from tests.fixtures.controller import Harness
from tests.fixtures.setup_world import ZONE, SetupWorld, one_port
from tests.fixtures.sshd import make_client_key, start_cluster

JOB = """\
w=$TPU_RECONCILER_WORKER; a=$TPU_RECONCILER_ATTEMPT
while :; do
  if [ -f "exit-$w-$a" ]; then date +%s.%N > "exited-$w-$a"; exit 1; fi
  echo "tick $w $a"
  sleep 0.02
done
"""


def _ts(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _events(world: SetupWorld) -> list[dict[str, object]]:
    lines = world.state.events.read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _first(world: SetupWorld, after: int, **match: object) -> dict[str, object] | None:
    return next(
        (
            e
            for e in _events(world)
            if int(str(e["seq"])) > after and all(e.get(k) == v for k, v in match.items())
        ),
        None,
    )


async def _round(world: SetupWorld, attempt: int, worker: int) -> tuple[float, float]:
    def memory() -> dict[str, object]:
        doc: dict[str, object] = world.memory()["workloads"]["alpha"]
        return doc

    await world.until(
        f"attempt {attempt} running",
        lambda: memory()["phase"] == "running" and memory()["attempt"] == attempt,
        timeout=60,
    )
    seq = int(str(_events(world)[-1]["seq"]))
    (world.marks / f"exit-{worker}-{attempt}").touch()
    exited_file = world.marks / f"exited-{worker}-{attempt}"
    await world.until("the exit", exited_file.exists, timeout=10)
    exited = float(exited_file.read_text())
    await world.until(
        "the relaunch",
        lambda: _first(world, seq, kind="action.started", action="launch") is not None,
        timeout=30,
    )
    stop = _first(world, seq, kind="action.started", action="stop")
    launch = _first(world, seq, kind="action.started", action="launch")
    assert stop is not None and launch is not None
    return _ts(str(stop["ts"])) - exited, _ts(str(launch["ts"])) - exited


async def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--fast-poll", type=float, default=1.0, help="fast_poll_interval (s)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-workload-", dir="/tmp"))
    emulator = None
    world = None
    cluster = None
    try:
        key = make_client_key(root / "key")
        cluster = start_cluster(root / "sshd", 4, client_key=key, agent_sock=None)
        port = one_port(cluster)
        ips = [a for host in cluster.hosts for a, _ in host.listen]
        emulator = Emulator(speed=20.0, ip_pool=ips).start()
        token = root / "token"
        token.write_text("bench-token\n")
        env = emulator.gcloud_env(str(root / "gcloud"), str(token), "test-project")
        os.environ.update(env)
        os.environ.pop("SSH_AUTH_SOCK", None)
        state = StateDir(root / "state").ensure()
        harness = Harness(emulator, root / "desired.yaml", state, dict(os.environ))
        marks = root / "marks"
        marks.mkdir()
        (marks / "job.sh").write_text(JOB)
        world = SetupWorld(harness, cluster, port, marks)
        world.write(
            world.desired(
                "slots:\n  - name: alpha\n"
                f"    zone: {ZONE}\n    accelerator: v4-32\n    want: held\n"
                f"    workload: {{command: [sh, job.sh], workdir: {marks}, "
                "restart: on-failure, max_failures: 1000, stop_grace: 2s}\n"
            ).replace("fast_poll_interval: 0.2s", f"fast_poll_interval: {args.fast_poll}s")
        )
        await world.start()
        print(command_line())
        print(f"  {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
        print(
            f"  fast_poll_interval {args.fast_poll:g}s, 4 workers (real sshd), {args.rounds} rounds"
        )
        decide, relaunch = [], []
        for i in range(args.rounds):
            d, r = await _round(world, i + 1, i % 4)
            decide.append(d)
            relaunch.append(r)
            print(f"  round {i + 1}: exit -> stop decided {d:5.2f} s, -> relaunch {r:5.2f} s")
        target = args.fast_poll + 1.0
        worst = max(decide)
        verdict = "ok" if worst <= target else "MISSED"
        print(
            f"  exit -> stop decided: median {median(decide):.2f} s, max {worst:.2f} s "
            f"(target <= {target:g} s) {verdict}"
        )
        print(
            f"  exit -> relaunch sent: median {median(relaunch):.2f} s, max {max(relaunch):.2f} s"
        )
        return 0 if worst <= target else 1
    finally:
        if world is not None:
            await world.stop()
        for pid in root.glob("sshd/host-*/home/.tpu-reconciler/w*/*/*/*/pid"):
            with contextlib.suppress(ProcessLookupError, ValueError, OSError):
                os.killpg(int(pid.read_text().split()[0]), signal.SIGKILL)
        if emulator is not None:
            emulator.stop()
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
