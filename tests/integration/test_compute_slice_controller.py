"""A TPU7x 4x4x4 slice (16 hosts) through Compute Engine, held by the real controller: a
workload policy, an instance template and a BULK MIG whose hosts are real sshd on
127.0.0.2 ... 127.0.0.17 (the emulator's address pool, handed out as each host's internal
IP, in the order the hosts are created).

The workload runs once on all 16 hosts and each sees its worker id and the slice's hosts in
order (``TPU_WORKER_ID``, ``TPU_WORKER_HOSTNAMES``: Compute Engine does not tell them); each
host's metadata says the same. One host preempted: the slice is replaced whole (MIG deleted,
a new one made), the workload relaunched as the same run, and the old template and policy
removed. Every Compute Engine exchange is decoded with the SDK's message classes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from tests.fixtures.setup_world import SetupWorld
from tests.integration.test_multislice_controller import workers_world
from tests.integration.test_workload_controller import kill_workloads
from tests.support.compute_sdk import decode_all

pytestmark = pytest.mark.integration

HOSTS = 16
ZONE = "us-central1-c"

JOB = """\
w=$TPU_RECONCILER_WORKER
echo "$TPU_RECONCILER_ATTEMPT $w $TPU_WORKER_ID $TPU_WORKER_HOSTNAMES" >> ran-$w
while :; do [ -f exit-all ] && exit 0; sleep 0.1; done
"""


@pytest.fixture
async def world(setup_world: Callable[..., SetupWorld]) -> AsyncIterator[SetupWorld]:
    async def made(n: int) -> AsyncIterator[SetupWorld]:
        async for w in workers_world(lambda k: setup_world(k, record_responses=True), n):
            yield w

    async for w in made(HOSTS):
        yield w


def ran(world: SetupWorld) -> list[list[list[str]]]:
    out = []
    for w in range(HOSTS):
        path = world.marks / f"ran-{w}"
        lines = path.read_text().splitlines() if path.exists() else []
        out.append([line.split() for line in lines])
    return out


def running(world: SetupWorld, attempt: int) -> Callable[[], bool]:
    def now() -> bool:
        w = world.memory()["workloads"]["big"]
        return bool(w["phase"] == "running" and w["attempt"] == attempt)

    return now


async def test_a_16_host_slice_runs_one_program_with_worker_ids_in_order(
    world: SetupWorld,
) -> None:
    (world.marks / "job.sh").write_text(JOB)
    world.write(
        world.desired(
            "slots:\n"
            "  - name: big\n"
            f"    zone: {ZONE}\n"
            "    accelerator: tpu7x-128\n"
            "    mode: spot\n"
            "    want: held\n"
            f"    workload: {{command: [sh, job.sh], workdir: {world.marks}, stop_grace: 2s}}\n",
            settings="internal_ips: true",
            defaults="{bootstrap: false, tmux: false}",
        )
    )
    await world.start()
    await world.until("attempt 1 running", running(world, 1), timeout=40)
    await world.until("all sixteen started", lambda: all(ran(world)), timeout=20)

    emu = world.harness.emulator
    ips = world.ips
    joined = ",".join(ips)
    assert ran(world) == [[["1", str(w), str(w), joined]] for w in range(HOSTS)]
    group = emu.compute.group(ZONE, "big")
    assert group is not None
    assert group["targetSizePolicy"] == {"mode": "BULK"}
    assert group["instanceLifecyclePolicy"]["defaultActionOnFailure"] == "DO_NOTHING"
    assert group["status"]["appliedAcceleratorTopologies"][0] == {
        "acceleratorTopology": "4x4x4",
        "state": "ACTIVE",
    }
    policy = group["resourcePolicies"]["workloadPolicy"].rsplit("/", 1)[-1]
    [wp] = [p for p in emu.compute.policies() if p["name"] == policy]
    assert wp["workloadPolicy"] == {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "4x4x4"}
    host = emu.compute.instance(ZONE, "big-5")
    assert host is not None
    meta = {i["key"]: i["value"] for i in host["metadata"]["items"]}
    assert meta["tpu-worker-id"] == "5"
    assert meta["tpu-worker-hostnames"] == ",".join(f"big-{i}" for i in range(HOSTS))
    row = world.slot("big")
    assert (row["state"], row["node_state"], len(row["ips"])) == ("ACTIVE", "READY", HOSTS)
    template = group["instanceTemplate"].rsplit("/", 1)[-1]

    # One host preempted: the slice is lost whole, replaced, and the program relaunched.
    emu.compute.preempt_member(ZONE, "big", 5)
    assert kill_workloads(world, "1") == HOSTS  # the VMs went down with their programs
    await world.until("attempt 2 on the new slice", running(world, 2), timeout=60)
    await world.until("all sixteen restarted", lambda: all(len(r) == 2 for r in ran(world)))
    assert [r[1][:3] for r in ran(world)] == [["2", str(w), str(w)] for w in range(HOSTS)]
    assert len(world.events("action.started", slot="big", action="replace")) == 1
    await world.until(
        "the old template and policy removed",
        lambda: (
            template not in {t["name"] for t in emu.compute.templates()}
            and policy not in {p["name"] for p in emu.compute.policies()}
        ),
        timeout=20,
    )
    assert len(emu.compute.templates()) == len(emu.compute.policies()) == 1
    await world.stop()
    assert decode_all(emu.requests()) > 20
