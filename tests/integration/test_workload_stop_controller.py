"""Stopping means stopped, through the real controller: an emulated v4-32 whose four workers are
real sshd (as in test_workload_controller.py), the real wrapper on each.

Every attempt of the program (``job.sh``) leaves a grandchild behind that escaped its process
group (a double fork into a session of its own, ignoring SIGTERM, as a stuck data loader or a
``nohup setsid`` helper would). The test finds them by a name it chose in ``/proc``, not by the
wrapper's marker: after a failure and relaunch, and after a stop, none of the old attempt is
left, and the relaunch started only once they were gone. The crash loop (a program that exits
1 at once under ``restart: always``) is relaunched with growing delays.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fixtures.setup_world import SetupWorld
from tests.integration.test_workload_controller import (
    JOB,
    drop,
    phase,
    ran,
    setup_world4,
    v4_32,
    workload,
)
from tests.integration.test_workload_stop import processes

pytestmark = pytest.mark.integration

__all__ = ["setup_world4"]  # the fixture, used by name

# At its start each attempt says whether a grandchild of an earlier attempt on this worker is
# still there ("left=PID" on its marker line, else "left=-"), then starts its own: named
# "gc-<worker>-<attempt>" (spelt in two halves, so that no parent's command line holds it),
# deaf to SIGTERM, its pid in gc-<worker>-<attempt>.pid.
ESCAPE = JOB.replace(
    'echo "$TPU_RECONCILER_SLOT',
    "left=-\n"
    "for f in gc-$w-*.pid; do\n"
    '  old=$(cat "$f" 2>/dev/null)\n'
    '  if [ -n "$old" ] && grep -qs "gc-" "/proc/$old/cmdline"; then left=$old; fi\n'
    "done\n"
    '(setsid sh -c \'trap "" TERM; echo $$ > "$1.pid"; while :; do sleep 0.2; done\' '
    "g''c-$w-$a \"gc-$w-$a\" &)\n"
    'echo "$TPU_RECONCILER_SLOT',
).replace('$EXP" >> ran-$w', '$EXP left=$left" >> ran-$w')


def grandchildren(attempt: int) -> list[int]:
    return [pid for w in range(4) for pid in processes(f"gc-{w}-{attempt}")]


@pytest.fixture
def no_grandchildren_left() -> Iterator[None]:
    """Kill what a failed test (or a wrapper that lets them escape) left behind."""
    yield
    for pid in [p for attempt in (1, 2, 3) for p in grandchildren(attempt)]:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def left(marks: Path, attempt: int) -> list[str]:
    """What each worker's attempt ``attempt`` (of every run) found of earlier ones at its start."""
    out = []
    for w in range(4):
        lines = (marks / f"ran-{w}").read_text().splitlines()
        out += [line.split()[-1] for line in lines if line.split()[2] == str(attempt)]
    return out


async def test_no_process_of_an_attempt_outlives_its_failure_or_its_stop(
    setup_world4: Callable[[int], SetupWorld], no_grandchildren_left: None
) -> None:
    world = setup_world4(4)
    world.write(v4_32(world, "restart: on-failure"))
    (world.marks / "job.sh").write_text(ESCAPE)
    await world.start()
    await world.until("attempt 1 running", phase(world, "running", attempt=1), timeout=40)
    await world.until("its grandchildren", lambda: len(grandchildren(1)) == 4)

    drop(world, "exit-2-1", 1)  # worker 2 fails; the others are stopped; attempt 2 follows
    await world.until("attempt 2 running", phase(world, "running", attempt=2), timeout=60)
    await world.until("its markers", lambda: all(len(r) == 2 for r in ran(world)))
    assert grandchildren(1) == []  # worker 2's went with its program, the others' with stop
    assert left(world.marks, 2) == ["left=-"] * 4  # gone before attempt 2 started anywhere
    await world.until("attempt 2's grandchildren", lambda: len(grandchildren(2)) == 4)

    old = workload(world)["run_id"]
    world.write(v4_32(world, "restart: on-failure, generation: 1"))  # `workload restart`
    (world.marks / "job.sh").write_text(ESCAPE)
    await world.until(
        "the new run running",
        lambda: workload(world)["run_id"] != old and phase(world, "running", attempt=1)(),
        timeout=40,
    )
    assert grandchildren(2) == []  # stopped (SIGKILL after the 2 s grace) ...
    assert left(world.marks, 1) == ["left=-"] * 8  # ... before the new run started anywhere
    assert world.cluster is not None
    exits = list(world.cluster.root.glob(f"host-*/home/.tpu-reconciler/w*/alpha/{old}/2/exit"))
    assert len(exits) == 4 and all("stopped=yes" in e.read_text() for e in exits)
    assert not any("left=" in e.read_text() for e in exits)  # all gone before the deadline


@pytest.mark.slow
async def test_a_crash_loop_is_relaunched_with_growing_delays(
    setup_world4: Callable[[int], SetupWorld],
) -> None:
    """A program that exits 1 at once under ``restart: always``: five failures take at least
    10 + 20 + 40 s of waiting between them (once 80 s more), never a launch every pass."""
    world = setup_world4(4)
    world.write(v4_32(world, "restart: always, max_failures: 10"))
    (world.marks / "job.sh").write_text('echo "$TPU_RECONCILER_ATTEMPT $(date +%s.%N)" >> '
                                        'ran-$TPU_RECONCILER_WORKER\nexit 1\n')  # fmt: skip
    await world.start()
    first = time.monotonic()
    await world.until("5 failures", lambda: workload(world)["failures"] >= 5, timeout=400)
    took = time.monotonic() - first
    starts = [float(line.split()[1]) for line in (world.marks / "ran-0").read_text().splitlines()]
    assert len(starts) == 5 and took >= 70
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert all(gap >= want for gap, want in zip(gaps, (10, 20, 40, 80), strict=True)), gaps
    assert gaps[-1] < 80 + 30  # and not much more: the controller woke when the wait ended
    summary = lambda: world.slot("alpha")["workload"]["summary"]  # noqa: E731
    await world.until("status says when", lambda: "restarting in 2m" in summary())  # 160 s
    assert summary().startswith("pending · attempt 6 · 5/10 failures · restarting in 2m")
