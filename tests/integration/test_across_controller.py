"""One program across a race group's winners through the real controller: a race group of two
v4-16 candidates (two workers each), ``count: 2, workload.across: group``, whose four workers
are real sshd on 127.0.0.2 ... 127.0.0.5.

Once both winners are set up the program is launched once over all four workers with the
MEGASCALE values (coordinator: winner ``a``'s worker 0, slice ids by name), which give every
worker a distinct JAX process id (``worker + slice_id * workers_per_slice``). A preempted
winner (slice 0) stops the program on the other one too (under the worker numbers it was
launched with: 2 and 3); the group re-races it and the program is relaunched over both as
the same run.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator, Callable

import pytest

from reconciler.model.multislice import MEGASCALE_PORT
from tests.fixtures.setup_world import ZONE, SetupWorld
from tests.integration import test_multislice_controller as multislice

pytestmark = pytest.mark.integration

WORKERS = 4  # 2 winners x v4-16 (2 workers each)
PER = 2

JOB = """\
w=$TPU_RECONCILER_WORKER; a=$TPU_RECONCILER_ATTEMPT
echo "$TPU_RECONCILER_RUN_ID $a $w $TPU_RECONCILER_WORKERS $TPU_RECONCILER_SLICES \
$MEGASCALE_SLICE_ID $MEGASCALE_NUM_SLICES $MEGASCALE_COORDINATOR_ADDRESS $MEGASCALE_PORT" \
>> ran-$w
while :; do [ -f exit-all ] && exit 0; sleep 0.1; done
"""


@pytest.fixture
async def world(setup_world: Callable[[int], SetupWorld]) -> AsyncIterator[SetupWorld]:
    async for made in multislice.workers_world(setup_world, WORKERS):
        yield made


def desired(world: SetupWorld) -> str:
    multislice.scripts(world, JOB)
    return world.desired(
        "slots:\n"
        f"  - {{name: b, zone: {ZONE}, accelerator: v4-16}}\n"
        f"  - {{name: a, zone: {ZONE}, accelerator: v4-16}}\n"
        "race_groups:\n"
        "  - name: g\n"
        "    count: 2\n"
        "    slots: [a, b]\n"
        f"    workload: {{command: [sh, job.sh], workdir: {world.marks}, stop_grace: 2s, "
        "across: group}\n",
        settings="setup_scripts: [setup.sh]",
        defaults="{bootstrap: true, tmux: false}",
    )


def ran(world: SetupWorld) -> list[list[list[str]]]:
    return multislice.ran(world, WORKERS)


def workload(world: SetupWorld) -> dict[str, object]:
    return multislice.workload(world, "g")


def running(world: SetupWorld, attempt: int) -> Callable[[], bool]:
    return multislice.running(world, attempt, "g")


def kill_slice(world: SetupWorld, workers: range) -> int:
    """SIGKILL attempt 1 on these (global) workers: their VM went down with them."""
    assert world.cluster is not None
    killed = 0
    for w in workers:
        for pid in world.cluster.root.glob(f"host-*/home/.tpu-reconciler/w{w}/g/*/1/pid"):
            with contextlib.suppress(ProcessLookupError, ValueError, OSError):
                os.killpg(int(pid.read_text().split()[0]), signal.SIGKILL)
                killed += 1
    return killed


async def test_one_program_over_both_winners_stopped_everywhere_and_relaunched(
    world: SetupWorld,
) -> None:
    world.write(desired(world))
    await world.start()
    await world.until("attempt 1 running", running(world, 1), timeout=60)
    await world.until("all four started", lambda: all(ran(world)), timeout=20)
    # each winner was set up first (setup numbers the workers of its own node: 0 and 1)
    assert world.markers("setup") == [2, 2, 0, 0]

    emulator = world.harness.emulator
    node_a = emulator.node(ZONE, "a")
    assert node_a is not None
    internal = node_a["networkEndpoints"][0]["ipAddress"]
    run_id = str(workload(world)["run_id"])
    pids = set()
    for w, starts in enumerate(ran(world)):
        assert starts == [
            [
                run_id, "1", str(w), "4", "2", str(w // PER), "2",
                f"{internal}:{MEGASCALE_PORT}", str(MEGASCALE_PORT),
            ]
        ]  # fmt: skip
        slice_id, per = int(starts[0][5]), WORKERS // int(starts[0][6])
        pids.add(w % per + slice_id * per)  # JAX's process id from the MEGASCALE values
    assert pids == set(range(WORKERS))
    assert world.events("action.started", slot="a", action="launch") == []  # no copy per winner

    # Winner a (slice 0) is preempted: the program is stopped on b too (its workers 2 and 3,
    # as launched), a re-raced, and all relaunched.
    emulator.preempt(ZONE, "a")
    assert kill_slice(world, range(PER)) == PER
    await world.until(
        "the rest stopped on a",
        lambda: bool(world.events("action.started", slot="g", action="stop")),
        timeout=60,
    )
    await world.until("attempt 2 running", running(world, 2), timeout=90)
    assert workload(world)["run_id"] == run_id
    await world.until("all four restarted", lambda: all(len(r) == 2 for r in ran(world)))
    assert [[s[:3] for s in r] for r in ran(world)] == [
        [[run_id, "1", str(w)], [run_id, "2", str(w)]] for w in range(WORKERS)
    ]
    assert world.cluster is not None
    stopped = [
        p.read_text()
        for w in range(PER, 2 * PER)
        for p in world.cluster.root.glob(f"host-*/home/.tpu-reconciler/w{w}/g/{run_id}/1/exit")
    ]
    assert len(stopped) == PER and all("stopped=yes" in s for s in stopped)
    [stop] = world.events("action.started", slot="g", action="stop")
    assert "winner a lost" in str(stop["reason"])
