"""Chip telemetry through the real controller: four real sshd workers, a real gRPC metrics
service per worker, a real process holding a (fake) chip device.

Each worker gets a ``RuntimeMetricService`` built on the stubs that ship in Google's
``tpu-info`` package (the same ones the probe on the worker uses), on its own port, which the
test writes into the worker's ``~/.tpu-reconciler/tpu-env`` the way the VM's ``tpu-env``
names it. ``~/.tpu-reconciler/telemetry/bin/python`` stands in for the venv that
``setup.telemetry`` installs (it runs this interpreter, which has tpu-info). The services are
scripted busy, then with their metrics gone, then idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.setup_world import ZONE, NtfyServer, SetupWorld
from tests.integration.test_mcp_server import call, session
from tests.integration.test_workload_controller import (
    JOB,
    kill_workloads,
    phase,
    ran,
    setup_world4,  # noqa: F401  (the fixture)
    workload,
)
from tests.support.cli import clean_env, run_cli
from tests.support.fake_tpu_runtime import FakeRuntime, Script, start, worker_files

pytestmark = pytest.mark.integration

GIB = 1024**3
CHIPS = 4  # a v4 worker


@pytest.fixture
def runtimes() -> Iterator[Callable[[SetupWorld], tuple[Script, list[FakeRuntime]]]]:
    """One fake RuntimeMetricService per worker of a world, its port in the worker's tpu-env."""
    servers: list[Any] = []

    def make(world: SetupWorld) -> tuple[Script, list[FakeRuntime]]:
        assert world.cluster is not None
        script = Script(chips=CHIPS)
        fakes = []
        for host in world.cluster.hosts:
            server, fake, port = start(script)
            servers.append(server)
            fakes.append(fake)
            worker_files(host.directory / "home", port)
        return script, fakes

    yield make
    for server in servers:
        server.stop(None)


def desired(world: SetupWorld, spec: str, ntfy: NtfyServer | None = None) -> str:
    (world.marks / "job.sh").write_text(JOB)
    return world.desired(
        "slots:\n"
        "  - name: alpha\n"
        f"    zone: {ZONE}\n"
        "    accelerator: v4-32\n"
        "    want: held\n"
        "    setup: {bootstrap: false, telemetry: true}\n"
        f"    workload: {{command: [sh, job.sh], workdir: {world.marks}, env: {{EXP: one}}, "
        f"stop_grace: 2s, {spec}}}\n",
        settings=f"ntfy_server: {ntfy.url}\nntfy_topic: wl" if ntfy else "ntfy_topic: ''",
    )


def shown(world: SetupWorld) -> dict[str, Any]:
    doc: dict[str, Any] = world.slot("alpha")["workload"]
    return doc


async def test_busy_chips_are_shown_vanished_metrics_fail_nothing_idle_ones_relaunch(
    setup_world4: Callable[[int], SetupWorld],  # noqa: F811
    runtimes: Callable[[SetupWorld], tuple[Script, list[FakeRuntime]]],
    ntfy_server: NtfyServer,
) -> None:
    world = setup_world4(4)
    script, fakes = runtimes(world)
    world.write(desired(world, "restart: on-failure, idle_after: 3s, idle_below: 1", ntfy_server))
    controller = await world.start()
    from reconciler.runtime.history import HistoryRecorder
    from reconciler.runtime.history_reads import history_document

    controller.history = recorder = HistoryRecorder(world.state, controller.events,
                                                    batch_seconds=0.05)  # fmt: skip
    recorder.start()
    await world.until("attempt 1 running", phase(world, "running", attempt=1), timeout=40)

    # busy: the figures of every chip of every worker, the least busy worker's in the summary
    await world.until("the figures", lambda: shown(world).get("tpu") == "TPU 97% · HBM 28/32 GiB")
    workers = shown(world)["workers"]
    assert len(workers) == 4 and all(len(w["chips"]) == CHIPS for w in workers)
    assert workers[0]["chips"][0] == {
        "index": 0,
        "duty_cycle": 97.0,
        "hbm_used": 7 * GIB,
        "hbm_total": 8 * GIB,
        "holders": [],
    }
    assert all(f.calls for f in fakes)  # every worker's own service was asked
    assert "TPU 97% · HBM 28/32 GiB" in shown(world)["summary"]
    env = clean_env()
    status = run_cli("-f", str(world.harness.path), "--state-dir", str(world.state.root), "status",
                     env=env)  # fmt: skip
    assert status.returncode == 0, status.stderr
    assert "TPU 97% · HBM 28/32 GiB" in status.stdout
    info = run_cli("-f", str(world.harness.path), "--state-dir", str(world.state.root), "info",
                   "alpha", env=env)  # fmt: skip
    assert info.returncode == 0, info.stderr
    assert "chips: TPU 97% · HBM 28/32 GiB (least busy worker)" in info.stdout
    assert "  w3: 0 97% 7.0/8.0 GiB  1 97% 7.0/8.0 GiB" in info.stdout
    files = ("--file", str(world.harness.path), "--state-dir", str(world.state.root))
    async with session(world.harness.path.parent, "reconciler.surfaces.mcp_server", *files) as s:
        doc = await call(s, "workload_status", name="alpha")
    mcp = doc["slots"][0]["workload"]
    assert mcp["tpu"] == "TPU 97% · HBM 28/32 GiB"
    assert [len(w["chips"]) for w in mcp["workers"]] == [CHIPS] * 4

    # the metrics vanish: unknown, and unknown is never idle
    with script.lock:
        script.vanished = True
    await world.until("unknown figures", lambda: shown(world).get("tpu") == "TPU ? · HBM ?")
    assert all(not w.get("chips") for w in shown(world)["workers"])  # omitted: none read
    await asyncio.sleep(4.5)  # longer than idle_after
    w = workload(world)
    assert (w["phase"], w["attempt"], w["failures"]) == ("running", 1, 0)

    # idle on every chip for idle_after: failed, stopped, relaunched, and a notice
    with script.lock:
        script.vanished, script.duty = False, 0.2
    await world.until("attempt 2 running", phase(world, "running", attempt=2), timeout=40)
    assert workload(world)["failures"] == 1
    failed = [e for e in world.events("workload.state", slot="alpha") if e["after"] == "failed"]
    assert failed and failed[0]["detail"].startswith(
        "idle: TensorCore duty cycle < 1% on all 16 chips for 3s"
    ), failed
    run_id = workload(world)["run_id"]
    await world.until("its markers", lambda: all(len(r) == 2 for r in ran(world)))
    assert ran(world) == [[f"{run_id} 1", f"{run_id} 2"]] * 4
    await world.until("the notice", lambda: "workload-idle" in ntfy_server.events("wl"))
    # attempt 1 in the capacity history, with how busy its chips were and its idle period
    assert recorder.flush()
    recorder.close()
    (first,) = history_document(world.state.history)["attempts"]
    assert (first["attempt"], first["run_id"]) == (1, run_id)
    assert first["cause"].startswith("failed: idle:")
    assert first["duty_cycle_p50"] in (0.0, 97.0)  # busy, then (after the unknown) idle
    assert first["idle_periods"] == 1 and first["idle_seconds"] >= 3.0
    with script.lock:
        script.duty = 97.0  # busy again: attempt 2 keeps running
    await asyncio.sleep(4.5)
    assert (workload(world)["phase"], workload(world)["attempt"]) == ("running", 2)
    (world.marks / "exit-all").write_text("0\n")


@pytest.fixture
async def holder(tmp_path: Path) -> AsyncIterator[tuple[subprocess.Popen[bytes], Path]]:
    """A process that keeps a fake chip device open, as a leftover ``python3`` would."""
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "accel0").write_text("")
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; f = open(sys.argv[1]); time.sleep(600)",
         str(dev / "accel0")],
        start_new_session=True,
    )  # fmt: skip
    fds = Path(f"/proc/{proc.pid}/fd")

    def targets() -> set[str]:
        """What the process has open now (a descriptor may close between list and read)."""
        out = set()
        for fd in fds.iterdir():
            with contextlib.suppress(FileNotFoundError):
                out.add(os.readlink(fd))
        return out

    for _ in range(200):
        if str(dev / "accel0") in targets():
            break
        await asyncio.sleep(0.02)
    yield proc, dev
    if proc.poll() is None:
        proc.kill()
        proc.wait(5)


async def test_a_process_holding_the_chips_blocks_the_launch_until_take_tpu_stops_it(
    setup_world4: Callable[[int], SetupWorld],  # noqa: F811
    holder: tuple[subprocess.Popen[bytes], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proc, dev = holder
    monkeypatch.setenv("TPU_RECONCILER_TPU_DEVICES", f"{dev}/accel[0-9]*")
    world = setup_world4(4)
    world.write(desired(world, "restart: on-failure"))
    await world.start()
    blocked = f"TPU held by pid {proc.pid} `python"
    await world.until("the launch waits", lambda: blocked in shown(world)["detail"], timeout=40)
    detail = shown(world)["detail"]
    assert f"(user {getpass.getuser()}, " in detail and "on worker 0" in detail, detail
    assert shown(world)["state"] == "pending"
    assert blocked in world.slot("alpha")["last_error"]

    def plan_waits() -> bool:  # the next launch waits in the plan with the reason
        deferred = world.snapshot()["plan"].get("deferred") or []
        return any(d["kind"] == "launch" and blocked in d["why"] for d in deferred)

    await world.until("the plan says why the launch waits", plan_waits, timeout=20)
    await asyncio.sleep(1.0)
    assert ran(world) == [[]] * 4 and proc.poll() is None  # nothing started, nothing stopped

    world.write(desired(world, "restart: on-failure, take_tpu: true"))
    await world.until("attempt 1 running", phase(world, "running", attempt=1), timeout=60)
    assert proc.poll() is not None  # stopped (SIGTERM was enough)
    await world.until("its markers", lambda: all(ran(world)))
    sent = world.events("action.succeeded", slot="alpha", action="launch")
    assert any(f"take_tpu stopped {proc.pid} `python" in str(e) for e in sent), sent
    kill_workloads(world)
