"""Multislice through the real controller: a 2-slice v4-32 (two nodes of four workers each)
whose eight workers are real sshd on 127.0.0.2 ... 127.0.0.9.

The emulator creates one queued resource with two nodes (``alpha-0``, ``alpha-1``) and hands
each slice four of the sshd addresses; the controller holds it, bootstraps all eight workers
and runs the workload once on each with its slice and the MEGASCALE variables. A preempted
slice interrupts the whole QR: it is replaced and the program relaunched as the same run.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from reconciler.model.multislice import MEGASCALE_PORT
from tests.fixtures.setup_world import ZONE, SetupWorld
from tests.integration.test_workload_controller import kill_workloads

pytestmark = pytest.mark.integration

WORKERS = 8  # 2 slices x v4-32 (4 workers each, names.worker_count)

SETUP = """\
#!/bin/sh
echo run >> {marks}/setup-$TPU_RECONCILER_WORKER
"""

JOB = """\
w=$TPU_RECONCILER_WORKER; a=$TPU_RECONCILER_ATTEMPT
echo "$TPU_RECONCILER_RUN_ID $a $w $TPU_RECONCILER_WORKERS $TPU_RECONCILER_SLICE \
$TPU_RECONCILER_SLICES $MEGASCALE_SLICE_ID $MEGASCALE_NUM_SLICES \
$MEGASCALE_COORDINATOR_ADDRESS $MEGASCALE_PORT" >> ran-$w
while :; do [ -f exit-all ] && exit 0; sleep 0.1; done
"""


async def workers_world(
    setup_world: Callable[[int], SetupWorld], workers: int
) -> AsyncIterator[SetupWorld]:
    """A world of ``workers`` sshd, its detached workloads killed at the end."""
    made = setup_world(workers)
    yield made
    await made.stop()
    for _ in range(3):  # detached on purpose: the workloads outlive SSH
        kill_workloads(made)
        await asyncio.sleep(0.3)


@pytest.fixture
async def world(setup_world: Callable[[int], SetupWorld]) -> AsyncIterator[SetupWorld]:
    async for made in workers_world(setup_world, WORKERS):
        yield made


def scripts(world: SetupWorld, job: str = JOB) -> None:
    """The setup script (marks each run per worker) and the job, next to desired.yaml."""
    world.harness.path.with_name("setup.sh").write_text(SETUP.format(marks=world.marks))
    (world.marks / "job.sh").write_text(job)


def desired(world: SetupWorld) -> str:
    scripts(world)
    return world.desired(
        "slots:\n"
        "  - name: alpha\n"
        f"    zone: {ZONE}\n"
        "    accelerator: v4-32\n"
        "    slices: 2\n"
        "    want: held\n"
        f"    workload: {{command: [sh, job.sh], workdir: {world.marks}, stop_grace: 2s}}\n",
        settings="setup_scripts: [setup.sh]",
        defaults="{bootstrap: true, tmux: false}",
    )


def ran(world: SetupWorld, workers: int = WORKERS) -> list[list[list[str]]]:
    """Per worker, the fields of every start it saw."""
    out = []
    for w in range(workers):
        path = world.marks / f"ran-{w}"
        lines = path.read_text().splitlines() if path.exists() else []
        out.append([line.split() for line in lines])
    return out


def workload(world: SetupWorld, slot: str = "alpha") -> dict[str, object]:
    doc: dict[str, object] = world.memory()["workloads"][slot]
    return doc


def running(world: SetupWorld, attempt: int, slot: str = "alpha") -> Callable[[], bool]:
    def now() -> bool:
        w = workload(world, slot)
        return w["phase"] == "running" and w["attempt"] == attempt

    return now


async def test_two_slices_are_held_set_up_everywhere_and_run_one_program(
    world: SetupWorld,
) -> None:
    world.write(desired(world))
    await world.start()
    await world.until("attempt 1 running", running(world, 1), timeout=60)
    await world.until("all eight started", lambda: all(ran(world)), timeout=20)

    emulator = world.harness.emulator
    qr = emulator.queued_resource(ZONE, "alpha")
    assert qr is not None
    assert qr["tpu"]["nodeSpec"][0]["multisliceParams"] == {"nodeCount": 2, "nodeIdPrefix": "alpha"}
    nodes = [emulator.node(ZONE, f"alpha-{i}") for i in range(2)]
    assert all(n is not None and n["multisliceNode"] for n in nodes)
    internal = nodes[0]["networkEndpoints"][0]["ipAddress"]  # type: ignore[index]

    assert world.markers("setup") == [1] * WORKERS  # setup ran on every worker of each slice
    run_id = str(workload(world)["run_id"])
    for w, starts in enumerate(ran(world)):
        assert starts == [
            [
                run_id, "1", str(w), "8", str(w // 4), "2", str(w // 4), "2",
                f"{internal}:{MEGASCALE_PORT}", str(MEGASCALE_PORT),
            ]
        ]  # fmt: skip

    row = world.slot("alpha")  # status --json
    assert (row["state"], row["node_state"]) == ("ACTIVE", "READY")
    assert [(s["node"], s["state"], s["workers"]) for s in row["slices"]] == [
        ("alpha-0", "READY", 4),
        ("alpha-1", "READY", 4),
    ]
    assert row["slices"][0]["ips"] + row["slices"][1]["ips"] == world.ips
    assert len(row["ips"]) == WORKERS

    # One slice goes: the whole QR is interrupted, replaced, and the program relaunched.
    before = row["instance"]
    emulator.preempt(ZONE, "alpha-1")
    assert kill_workloads(world, "1") == WORKERS  # the VMs went down with them
    await world.until(
        "attempt 2 on the new slices",
        lambda: running(world, 2)() and workload(world)["instance"] != before,
        timeout=60,
    )
    assert workload(world)["run_id"] == run_id
    await world.until("all eight restarted", lambda: all(len(r) == 2 for r in ran(world)))
    assert [[s[:3] for s in r] for r in ran(world)] == [
        [[run_id, "1", str(w)], [run_id, "2", str(w)]] for w in range(WORKERS)
    ]
    replaced = world.events("action.started", slot="alpha", action="replace")
    assert len(replaced) == 1
    assert world.markers("setup") == [2] * WORKERS  # the new slices were set up again
