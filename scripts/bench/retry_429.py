"""429 bursts and a 429 storm against the real controller, measured against the retry rule.

The production ``Controller`` (REST backend, in-process) observes an emulator (speed 1, so its
clock is real seconds) with one ACTIVE slot and ``poll_interval: 30s``. Then every API request
is answered 429 (RESOURCE_EXHAUSTED):

- *burst*: for B seconds, then the fault is cleared; measured: seconds from the end of the
  burst to the first list call answered 200 (``core.retry`` promises at most ~B, and ~30 s
  for a 30 s burst);
- *storm*: for S seconds; measured: list attempts per minute, and the mean gap between
  attempts after the first two minutes (the rule's steady state: ~60 s).

Beside the real runs, the pure rule is simulated over many seeds for the same burst lengths
(no clock, instant). Prints the machine and the command; nothing leaves 127.0.0.1.

    python scripts/bench/retry_429.py                    # bursts 5/10/20 s x3, storm 300 s
    python scripts/bench/retry_429.py --storm 0 --repeats 1
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from _common import ensure_repo_on_path

ensure_repo_on_path()

from reconciler.adapters.statedir import StateDir  # noqa: E402
from reconciler.core import retry  # noqa: E402
from reconciler.emulator import Emulator, Fault  # noqa: E402
from reconciler.runtime.backends import make_cloud  # noqa: E402
from reconciler.runtime.controller import Controller  # noqa: E402
from reconciler.runtime.desired_loader import DesiredLoader  # noqa: E402
from reconciler.runtime.events import EventLog  # noqa: E402

DESIRED = """\
project: test-project
settings:
  backend: rest
  poll_interval: 30s
  fast_poll_interval: 5s
defaults:
  setup: {tmux: false}
slots:
  - name: alpha
    zone: us-central2-b
    accelerator: v4-8
    want: held
"""
LIST = "GET queuedResources.list"
print = partial(print, flush=True)


def simulate(burst: float, seed: int) -> float:
    rng = random.Random(seed)
    t, failures = 0.0, 0
    while t < burst:
        failures += 1
        t += retry.retry_delay(failures, rng.random(), elapsed=t)
    return t - burst


def lists(emu: Emulator, after: float) -> list[tuple[float, int]]:
    return [(r.at, r.status) for r in emu.requests() if r.key == LIST and r.at >= after]


async def run(args: argparse.Namespace) -> None:
    print(f"machine: {os.uname().nodename} {os.cpu_count()} cores, python {sys.version.split()[0]}")
    print(f"command: python scripts/bench/retry_429.py {' '.join(sys.argv[1:])}")
    print("\npure rule, 2,000 seeds: seconds from the end of a burst to the next attempt")
    for burst in args.bursts:
        lags = [simulate(burst, s) for s in range(2000)]
        print(
            f"  burst {burst:>4.0f} s: median {statistics.median(lags):5.1f}  "
            f"p95 {sorted(lags)[1899]:5.1f}  max {max(lags):5.1f}"
        )
    with tempfile.TemporaryDirectory() as tmp, Emulator(speed=1.0) as emu:
        root = Path(tmp)
        token = root / "token"
        token.write_text("bench-token\n")
        env = {
            **os.environ,
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU": emu.url,
            "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": str(token),
        }
        emu.add_queued_resource("us-central2-b", "alpha", "v4-8", state="ACTIVE")
        path = root / "desired.yaml"
        path.write_text(DESIRED)
        state = StateDir(root / "state").ensure()
        controller = Controller(
            store=DesiredLoader(path, env),
            state=state,
            cloud_factory=lambda d: make_cloud(d, env),
            events=EventLog(state),
        )
        stop = asyncio.Event()
        task = asyncio.create_task(controller.run(stop, watch=False))
        while not lists(emu, 0.0):
            await asyncio.sleep(0.1)
        print("\nreal controller, emulator at 127.0.0.1 (poll_interval 30 s)")
        for burst in args.bursts:
            lags = []
            for _ in range(args.repeats):
                await asyncio.sleep(1.0)
                emu.inject_fault(Fault(status=429, count=None))
                began = emu.now()
                controller.wake.set()  # the burst begins as the controller calls
                await asyncio.sleep(burst)
                emu.clear_faults()
                ended = emu.now()
                while not any(s == 200 for _, s in lists(emu, ended)):
                    await asyncio.sleep(0.05)
                first_ok = min(at for at, s in lists(emu, ended) if s == 200)
                tried = sum(1 for _, s in lists(emu, began) if s == 429)
                lags.append(first_ok - ended)
                print(f"  burst {burst:>4.0f} s: {tried:2d} attempts refused, "
                      f"recovered {first_ok - ended:5.1f} s after it ended")  # fmt: skip
            print(f"  burst {burst:>4.0f} s: median lag {statistics.median(lags):.1f} s, "
                  f"max {max(lags):.1f} s")  # fmt: skip
        if args.storm > 0:
            await asyncio.sleep(1.0)
            emu.inject_fault(Fault(status=429, count=None))
            began = emu.now()
            controller.wake.set()
            started = time.monotonic()
            await asyncio.sleep(args.storm)
            emu.clear_faults()
            times = [at - began for at, s in lists(emu, began) if s == 429]
            print(f"\nstorm of {args.storm:.0f} s ({time.monotonic() - started:.0f} s real): "
                  f"{len(times)} attempts")  # fmt: skip
            for minute in range(int(args.storm // 60) + 1):
                n = sum(1 for t in times if minute * 60 <= t < (minute + 1) * 60)
                print(f"  minute {minute + 1}: {n} attempts")
            late = [t for t in times if t >= 120]
            gaps = [b - a for a, b in itertools.pairwise(late)]
            if gaps:
                print(
                    f"  after 2 min: mean gap {statistics.mean(gaps):.1f} s over {len(gaps)} gaps"
                )
        stop.set()
        await asyncio.wait_for(task, timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bursts", type=float, nargs="*", default=[5.0, 10.0, 20.0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--storm", type=float, default=300.0, help="seconds; 0 skips it")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
