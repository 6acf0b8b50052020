"""Workloads through the real controller: an emulated v4-32 whose four workers are real sshd.

The emulator grants the TPU, the controller launches the program on every worker through the
real wrapper over SSH, probes it each pass and decides. The program (``job.sh``) leaves one
marker line per start on this machine's disk and exits when the test drops a file, so each
test counts what really ran and steers how it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.setup_world import ZONE, NtfyServer, SetupWorld
from tests.support.disks import read_only_file, small_disk

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

JOB = """\
w=$TPU_RECONCILER_WORKER; a=$TPU_RECONCILER_ATTEMPT
echo "$TPU_RECONCILER_SLOT $TPU_RECONCILER_RUN_ID $a $w $TPU_RECONCILER_WORKERS $EXP" >> ran-$w
while :; do
  for f in exit-$w-$a exit-$w exit-all; do
    if [ -f "$f" ]; then exit "$(cat "$f")"; fi
  done
  [ -f quiet ] || echo "tick $w $a"
  sleep 0.1
done
"""


@pytest.fixture
async def setup_world4(
    setup_world: Callable[[int], SetupWorld],
) -> AsyncIterator[Callable[[int], SetupWorld]]:
    """``setup_world`` that, after the test, stops the controller and then kills whatever the
    workloads left running on the test hosts (detached on purpose, they outlive SSH)."""
    made: list[SetupWorld] = []

    def make(workers: int) -> SetupWorld:
        made.append(setup_world(workers))
        return made[-1]

    yield make
    for world in made:
        await world.stop()
        for _ in range(3):  # a launch that was on its way when the controller stopped
            kill_workloads(world)
            await asyncio.sleep(0.3)


def kill_workloads(world: SetupWorld, attempt: str = "*") -> int:
    """SIGKILL the process group of every attempt (or one) recorded on the test hosts."""
    assert world.cluster is not None
    killed = 0
    for pid in world.cluster.root.glob(f"host-*/home/.tpu-reconciler/w*/*/*/{attempt}/pid"):
        with contextlib.suppress(ProcessLookupError, ValueError, OSError):
            os.killpg(int(pid.read_text().split()[0]), signal.SIGKILL)
            killed += 1
    return killed


def v4_32(world: SetupWorld, workload: str, *, ntfy: NtfyServer | None = None) -> str:
    (world.marks / "job.sh").write_text(JOB)
    return world.desired(
        "slots:\n"
        "  - name: alpha\n"
        f"    zone: {ZONE}\n"
        "    accelerator: v4-32\n"
        "    want: held\n"
        "    setup: {bootstrap: false}\n"
        f"    workload: {{command: [sh, job.sh], workdir: {world.marks}, env: {{EXP: one}}, "
        f"stop_grace: 2s, {workload}}}\n",
        settings=f"ntfy_server: {ntfy.url}\nntfy_topic: wl" if ntfy else "ntfy_topic: ''",
    )


def workload(world: SetupWorld) -> dict[str, Any]:
    doc: dict[str, Any] = world.memory()["workloads"]["alpha"]
    return doc


def ran(world: SetupWorld) -> list[list[str]]:
    """Per worker, the ``run_id attempt`` of every start it saw."""
    out = []
    for w in range(4):
        path = world.marks / f"ran-{w}"
        lines = path.read_text().splitlines() if path.exists() else []
        out.append([" ".join(line.split()[1:3]) for line in lines])
    return out


def phase(world: SetupWorld, *phases: str, attempt: int | None = None) -> Callable[[], bool]:
    def check() -> bool:
        w = workload(world)
        return bool(w["phase"] in phases and (attempt is None or w["attempt"] == attempt))

    return check


async def running(
    make: Callable[[int], SetupWorld], spec: str, ntfy: NtfyServer | None = None
) -> SetupWorld:
    world = make(4)
    world.write(v4_32(world, spec, ntfy=ntfy))
    await world.start()
    await world.until("attempt 1 running", phase(world, "running", attempt=1), timeout=40)
    await world.until("its markers", lambda: all(ran(world)))
    return world


def drop(world: SetupWorld, name: str, code: int) -> None:
    (world.marks / name).write_text(f"{code}\n")


async def test_a_failing_worker_stops_the_others_relaunches_then_gives_up(
    setup_world4: Callable[[int], SetupWorld], ntfy_server: NtfyServer
) -> None:
    world = await running(setup_world4, "restart: on-failure, max_failures: 1", ntfy_server)
    run_id = workload(world)["run_id"]
    assert ran(world) == [[f"{run_id} 1"]] * 4
    first = (world.marks / "ran-0").read_text().split()
    assert first[0] == "alpha" and first[3:] == ["0", "4", "one"]

    drop(world, "exit-2-1", 1)  # worker 2 fails; 0, 1, 3 keep running until stopped
    await world.until("attempt 2 running", phase(world, "running", attempt=2), timeout=40)
    await world.until("its markers", lambda: all(len(r) == 2 for r in ran(world)))
    w = workload(world)
    assert (w["run_id"], w["failures"]) == (run_id, 1)
    assert ran(world) == [[f"{run_id} 1", f"{run_id} 2"]] * 4
    stops = world.events("action.succeeded", slot="alpha", action="stop")
    assert len(stops) == 1  # the other three were stopped before attempt 2 started

    drop(world, "exit-1-2", 3)
    await world.until("gave up", phase(world, "gave-up"), timeout=20)
    assert workload(world)["failures"] == 2 and "exit 3 on worker 1" in workload(world)["detail"]
    await world.until(
        "the others stopped",
        lambda: not any(s[1] == "alive" for s in workload(world)["workers"]),
        timeout=15,
    )
    await asyncio.sleep(2.0)  # stays down
    assert [len(r) for r in ran(world)] == [2, 2, 2, 2]
    assert workload(world)["phase"] == "gave-up"
    states = [e["after"] for e in world.events("workload.state", slot="alpha")]
    assert "failed" in states and states[-1] == "gave-up"
    shown = world.slot("alpha")["workload"]  # status --json
    assert (shown["state"], shown["run_id"], shown["attempt"]) == ("gave-up", run_id, 2)
    assert (shown["failures"], shown["max_failures"]) == (2, 1)
    assert {"index": 1, "state": "exited", "exit_code": 3} in shown["workers"]
    assert shown["last_lines"][-1] == "tick 1 2"  # worker 1's output, as it ended
    await world.until("the gave-up notice", lambda: "gave-up" in ntfy_server.events("wl"))
    assert ntfy_server.events("wl").count("gave-up") == 1


async def test_all_exit_0_succeeds_and_when_done_release_deletes_the_tpu(
    setup_world4: Callable[[int], SetupWorld], ntfy_server: NtfyServer
) -> None:
    world = await running(setup_world4, "when_done: release", ntfy_server)
    drop(world, "exit-all", 0)
    await world.until("succeeded", phase(world, "succeeded"), timeout=20)
    await world.until(
        "the QR deleted", lambda: world.harness.state_of(ZONE, "alpha") is None, timeout=30
    )
    delete = world.events("action.started", slot="alpha", action="delete")
    assert len(delete) == 1 and "when_done: release" in delete[0]["reason"]
    await asyncio.sleep(1.5)
    assert world.harness.state_of(ZONE, "alpha") is None  # not re-created
    assert [len(r) for r in ran(world)] == [1, 1, 1, 1]
    assert world.slot("alpha")["workload"]["state"] == "succeeded"
    await world.until("the notice", lambda: "succeeded" in ntfy_server.events("wl"))


async def test_a_preemption_relaunches_the_same_run_as_the_next_attempt(
    setup_world4: Callable[[int], SetupWorld], ntfy_server: NtfyServer
) -> None:
    world = await running(setup_world4, "restart: on-failure", ntfy_server)
    drop(world, "exit-3-1", 1)  # one failure first: it must survive the preemption
    await world.until("attempt 2 running", phase(world, "running", attempt=2), timeout=40)
    before = world.slot("alpha")["instance"]
    run_id = workload(world)["run_id"]
    world.harness.emulator.preempt(ZONE, "alpha")
    assert kill_workloads(world, "2") == 4  # the VM went down with them (the hosts stay)
    # A real preemption takes the wrappers too; here they record the kill first. Wait for that
    # without yielding to the controller, or its launch on the "new" node could race them.
    assert world.cluster is not None
    records = world.cluster.root.glob("host-*/home/.tpu-reconciler/w*/alpha/*/2")
    exits = [d / "exit" for d in records]
    deadline = time.monotonic() + 10
    while not all(e.exists() for e in exits) and time.monotonic() < deadline:
        time.sleep(0.02)
    await world.until(
        "attempt 3 on the new node",
        lambda: phase(world, "running", attempt=3)() and workload(world)["instance"] != before,
        timeout=40,
    )
    w = workload(world)
    assert (w["run_id"], w["failures"]) == (run_id, 1)
    await world.until("its markers", lambda: all(len(r) == 3 for r in ran(world)))
    assert ran(world) == [[f"{run_id} 1", f"{run_id} 2", f"{run_id} 3"]] * 4
    states = [e["after"] for e in world.events("workload.state", slot="alpha")]
    assert "interrupted" in states
    await world.until("the notice", lambda: "relaunched" in ntfy_server.events("wl"))


async def test_an_unreachable_worker_is_unknown_and_nothing_is_relaunched(
    setup_world4: Callable[[int], SetupWorld],
) -> None:
    world = await running(setup_world4, "restart: always")
    assert world.cluster is not None
    host = world.cluster.hosts[1]
    _kill_connections(host)
    try:
        await world.until("unknown", lambda: workload(world)["unknown"], timeout=20)
        await asyncio.sleep(2.0)
        w = workload(world)
        assert (w["phase"], w["attempt"], w["failures"]) == ("running", 1, 0)
        assert world.events("action.started", slot="alpha", action="launch")[1:] == []
    finally:
        host.start()
    await world.until("known again", lambda: not workload(world)["unknown"], timeout=30)
    assert (workload(world)["phase"], workload(world)["attempt"]) == ("running", 1)
    assert [len(r) for r in ran(world)] == [1, 1, 1, 1]


async def test_a_silent_program_stalls_and_is_relaunched(
    setup_world4: Callable[[int], SetupWorld],
) -> None:
    world = setup_world4(4)
    (world.marks / "quiet").touch()
    world.write(v4_32(world, "restart: on-failure, stall_after: 2s"))
    await world.start()
    await world.until("attempt 2", phase(world, "running", "starting", attempt=2), timeout=60)
    w = workload(world)
    assert w["failures"] == 1
    failed = [e for e in world.events("workload.state", slot="alpha") if e["after"] == "failed"]
    assert failed and "stalled" in failed[0]["detail"]


async def test_kill_9_of_the_controller_during_the_run_starts_no_second_copy(
    setup_world4: Callable[[int], SetupWorld],
) -> None:
    world = setup_world4(4)
    world.write(v4_32(world, "restart: on-failure"))
    env = {**world.harness.env, "SSH_AUTH_SOCK": os.environ.get("SSH_AUTH_SOCK", "")}
    env["PYTHONPATH"] = str(REPO)
    argv = [sys.executable, "-m", "reconciler", "-f", str(world.harness.path)]
    argv += ["--state-dir", str(world.state.root), "run"]

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            argv,
            env=env,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    proc = start()
    try:
        # Killed the moment the launch was recorded (whether or not it went out yet).
        await world.until("launch recorded", phase(world, "starting", "running"), timeout=40)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        proc = start()
        await world.until("running", phase(world, "running", attempt=1), timeout=30)
        os.kill(proc.pid, signal.SIGKILL)  # and again while it runs
        proc.wait(10)
        proc = start()
        await asyncio.sleep(3.0)
        assert (workload(world)["phase"], workload(world)["attempt"]) == ("running", 1)
        run_id = workload(world)["run_id"]
        assert ran(world) == [[f"{run_id} 1"]] * 4  # exactly one copy on each worker
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(20)
        drop(world, "exit-all", 0)


def _kill_connections(host: Any) -> None:
    from tests.integration.test_workload_worker import _kill_connections as kill

    kill(host)


async def test_mcp_workload_logs_reads_every_workers_output(
    setup_world4: Callable[[int], SetupWorld],
) -> None:
    from tests.integration.test_mcp_server import call, session

    world = await running(setup_world4, "restart: on-failure")
    args = ("reconciler.surfaces.mcp_server", "--file", str(world.harness.path))
    args += ("--state-dir", str(world.state.root))
    async with session(world.marks, *args) as s:
        everyone = await call(s, "workload_logs", name="alpha", lines=8)
        one = await call(s, "workload_logs", name="alpha", worker=2, lines=3)
        status = await call(s, "workload_status", name="alpha")
    assert everyone["run_id"] == workload(world)["run_id"]
    assert {line["worker"] for line in everyone["lines"]} == {0, 1, 2, 3}
    assert all(line["text"] == f"tick {line['worker']} 1" for line in everyone["lines"])
    assert [line["text"] for line in one["lines"]] == ["tick 2 1"] * 3
    assert status["slots"][0]["workload"]["state"] == "running"


async def test_a_generation_bump_stops_the_run_and_starts_a_new_run_id(
    setup_world4: Callable[[int], SetupWorld],
) -> None:
    world = await running(setup_world4, "restart: on-failure")
    old = workload(world)["run_id"]
    world.write(v4_32(world, "restart: on-failure, generation: 1"))
    await world.until(
        "the new run running",
        lambda: workload(world)["run_id"] != old and phase(world, "running", attempt=1)(),
        timeout=30,
    )
    new = workload(world)["run_id"]
    await world.until("its markers", lambda: all(len(r) == 2 for r in ran(world)))
    assert ran(world) == [[f"{old} 1", f"{new} 1"]] * 4
    assert world.cluster is not None
    exits = sorted(world.cluster.root.glob(f"host-*/home/.tpu-reconciler/w*/alpha/{old}/1/exit"))
    assert len(exits) == 4 and all("stopped=yes" in e.read_text() for e in exits)
    stop = world.events("action.started", slot="alpha", action="stop")
    assert len(stop) == 1 and "generation bumped 0 → 1" in stop[0]["reason"]
    assert workload(world)["failures"] == 0  # a deliberate stop is no failure


async def test_a_launch_memory_could_not_record_is_adopted_after_kill_9_never_run_twice(
    setup_world4: Callable[[int], SetupWorld],
) -> None:
    """Generation bumped while memory.json cannot be replaced (read-only over itself, as on a
    full state disk): the controller stops the old run and launches the new one but cannot save
    either. Killed -9 and restarted from the memory it last saved, it decides another run id
    for the same work: the workers start nothing for it and name the run they hold, and the
    controller takes that one over. One start of the new generation on each worker."""
    world = setup_world4(4)
    world.write(v4_32(world, "restart: on-failure"))
    env = {**world.harness.env, "SSH_AUTH_SOCK": os.environ.get("SSH_AUTH_SOCK", "")}
    env["PYTHONPATH"] = str(REPO)
    argv = [sys.executable, "-m", "reconciler", "-f", str(world.harness.path)]
    argv += ["--state-dir", str(world.state.root), "run"]

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            argv, env=env, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip

    proc = start()
    try:
        await world.until("running", phase(world, "running", attempt=1), timeout=40)
        await world.until("its markers", lambda: all(ran(world)))
        old = workload(world)["run_id"]
        with read_only_file(world.state.memory):
            world.write(v4_32(world, "restart: on-failure, generation: 1"))
            await world.until("the new run started", lambda: all(len(r) == 2 for r in ran(world)),
                              timeout=40)  # fmt: skip
            orphan = ran(world)[0][1].split()[0]
            assert orphan != old and workload(world)["run_id"] == old  # nothing saved
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        proc = start()
        await world.until(
            "the launched run adopted",
            lambda: workload(world)["run_id"] == orphan and phase(world, "running")(),
            timeout=40,
        )
        await asyncio.sleep(3.0)  # passes that could start a second copy
        assert ran(world) == [[f"{old} 1", f"{orphan} 1"]] * 4  # the new generation once
        assert (workload(world)["run_id"], workload(world)["attempt"]) == (orphan, 1)
        drop(world, "exit-all", 0)  # and it is the run that is watched: its exit is seen
        await world.until("succeeded", phase(world, "succeeded"), timeout=30)
        assert ran(world) == [[f"{old} 1", f"{orphan} 1"]] * 4
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(20)
        drop(world, "exit-all", 0)


HOG = JOB.replace(
    "while :; do\n",
    'while :; do\n  if [ -f "hog-$w-$a" ]; then cat /dev/zero > "$(cat "hog-$w-$a")"; exit 1; fi\n',
)


async def test_a_worker_whose_program_fills_its_disk_fails_the_attempt_and_it_runs_again(
    setup_world4: Callable[[int], SetupWorld],
) -> None:
    """Worker 2 keeps its records on a 64 KiB tmpfs, and its program fills it and crashes: the
    exit is still recorded, so the attempt fails (it once read ``running, failures 0`` with
    worker 2 ``missing``, forever). The relaunch cannot start there while the disk is full
    and says why; with room again it starts, once."""
    world = setup_world4(4)
    assert world.cluster is not None
    with contextlib.ExitStack() as disks:
        for home in world.cluster.root.glob("host-*/home"):
            (home / ".tpu-reconciler").mkdir(mode=0o700, exist_ok=True)
            disks.enter_context(small_disk(home / ".tpu-reconciler" / "w2" / "alpha", 64))
        try:
            world.write(v4_32(world, "restart: on-failure"))
            (world.marks / "job.sh").write_text(HOG)
            await world.start()
            await world.until("attempt 1 running", phase(world, "running", attempt=1), timeout=40)
            await world.until("its markers", lambda: all(ran(world)))
            run_id = workload(world)["run_id"]
            (disk,) = world.cluster.root.glob(f"host-*/home/.tpu-reconciler/w2/alpha/{run_id}")
            (world.marks / "hog-2-1").write_text(f"{disk.parent}/hog\n")
            await world.until("the failure", lambda: workload(world)["failures"] == 1, timeout=30)
            failed = [e for e in world.events("workload.state", slot="alpha")
                      if e["after"] == "failed"]  # fmt: skip
            assert failed[0]["detail"] == "exit 1 on worker 2"
            assert (disk / "1" / "exit").read_text().startswith("code=1 ")
            refused = lambda: [  # noqa: E731
                e for e in world.events("action.failed", slot="alpha", action="launch")
                if "is the disk full?" in e["error"]
            ]  # fmt: skip
            await world.until("attempt 2 refused on worker 2", lambda: bool(refused()), timeout=45)
            assert "worker 2 of alpha" in refused()[0]["error"]  # only worker 2 refused
            assert "more worker" not in refused()[0]["error"]
            (disk.parent / "hog").unlink()
            await world.until("attempt 2 running", phase(world, "running", attempt=2), timeout=60)
            await world.until("its markers", lambda: all(len(r) == 2 for r in ran(world)))
            assert ran(world) == [[f"{run_id} 1", f"{run_id} 2"]] * 4
            assert workload(world)["failures"] == 1
        finally:
            await world.stop()
            for _ in range(3):
                kill_workloads(world)
                await asyncio.sleep(0.3)
