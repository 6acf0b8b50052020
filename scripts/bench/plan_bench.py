"""Benchmark: one ``plan()`` over N slots, N = 10, 100, 1,000 and 10,000.

Worlds come from ``tests.support.worlds.scaled_world``: three zones, a fifth of the slots racing
in groups of 8 (count 1 or 2), a tenth released, QRs in every state (not queued, waiting,
provisioning, ACTIVE with READY nodes and setup on, SUSPENDED, FAILED, DELETING) and a few
unmanaged QRs. Two memories per size:

- ``fresh``: nothing remembered, so every ACTIVE node still needs setup (the busiest pass);
- ``steady``: the memory after the plan was applied until nothing was left to do (the pass the
  controller runs every poll once things settle).

Target: median <= 100 ms for 10,000 slots (fresh). Exit status 1 when missed.

    python scripts/bench/plan_bench.py               # the curve and the target
    python scripts/bench/plan_bench.py --profile     # plus where the time goes at 10,000
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
from functools import partial

from _common import ensure_repo_on_path, median, print_header, quantile, timings

ensure_repo_on_path()

from reconciler.core.memory import Memory  # noqa: E402
from reconciler.core.plan import plan  # noqa: E402
from reconciler.model.desired import Desired  # noqa: E402
from reconciler.model.observed import Observation  # noqa: E402
from tests.support.worlds import apply_plan, scaled_world  # noqa: E402

SIZES = (10, 100, 1_000, 10_000)
TARGET_N = 10_000
TARGET_MS = 100.0


def settled(want: Desired, seen: Observation) -> tuple[Observation, Memory]:
    memory = Memory()
    for _ in range(4):
        p = plan(want, seen, memory)
        if p.empty:
            break
        seen, memory = apply_plan(p, want, seen, memory)
    return seen, memory


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", action="store_true", help="cProfile one plan at 10,000")
    args = parser.parse_args()

    print_header("plan() benchmark")
    print(f"  {'slots':>6} {'races':>5} {'memory':>6} {'actions':>7} {'runs':>5} "
          f"{'median ms':>9} {'p90 ms':>7} {'min ms':>7} {'cpu ms':>7} {'us/slot':>7}")  # fmt: skip
    missed = False
    for n in SIZES:
        want, seen = scaled_world(n, seed=1)
        steady_seen, steady_memory = settled(want, seen)
        for label, world, memory in (
            ("fresh", seen, Memory()),
            ("steady", steady_seen, steady_memory),
        ):
            actions = len(plan(want, world, memory).actions)
            t = timings(partial(plan, want, world, memory))
            med = median(t.wall) * 1000
            print(
                f"  {n:>6} {len(want.race_groups):>5} {label:>6} {actions:>7} {len(t.wall):>5} "
                f"{med:>9.2f} {quantile(t.wall, 0.9) * 1000:>7.2f} {min(t.wall) * 1000:>7.2f} "
                f"{median(t.cpu) * 1000:>7.2f} {med * 1000 / n:>7.2f}"
            )
            if n == TARGET_N and label == "fresh" and med > TARGET_MS:
                missed = True
    print()
    print("  median/p90/min: wall clock; cpu: median CPU time of this process per call")
    verdict = "MISSED" if missed else "met"
    print(f"target: median <= {TARGET_MS:.0f} ms at {TARGET_N:,} slots (fresh): {verdict}")

    if args.profile:
        want, seen = scaled_world(TARGET_N, seed=1)
        profiler = cProfile.Profile()
        profiler.runcall(plan, want, seen, Memory())
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(15)
        print(out.getvalue())
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
