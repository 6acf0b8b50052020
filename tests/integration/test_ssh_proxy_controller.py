"""``ssh_proxy: iap`` through the real controller: an emulated v4-16 without external IPs
(``settings.internal_ips``) whose two workers are real sshd at its internal addresses,
10.128.0.3 and .4, in a network namespace nobody here can dial (``tests/fixtures/hidden.py``).

``gcloud`` on PATH is a stand-in playing IAP (``tests/support/fake_iap.py``): for ``compute
start-iap-tunnel VM PORT --listen-on-stdin ...`` it finds the VM by the name the node's guest
attributes give it and joins stdin/stdout to that worker, and it logs every tunnel. The
controller looks the VM names up once, bootstraps both workers, opens the tmux window
(OpenSSH with ``ProxyCommand=gcloud ...``) and runs the workload through it; ``logs`` and
``ssh --print`` then find their way the same way from outside the controller.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.hidden import INTERNAL, PORT, HiddenWorld
from tests.fixtures.setup_world import ZONE, SetupWorld
from tests.support.cli import clean_env, run_cli
from tests.support.tools import require_tool

pytestmark = pytest.mark.integration

FAKE = Path(__file__).resolve().parents[1] / "support" / "fake_iap.py"


@pytest.fixture
async def iap_world(
    cloud_world: Callable[[], SetupWorld],
    hidden_world: HiddenWorld,
    tmux_server: object,
    tmux_socket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[SetupWorld]:
    require_tool("tmux")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gcloud").write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n')
    (bin_dir / "gcloud").chmod(0o755)
    monkeypatch.setenv("FAKE_IAP_REAL_GCLOUD", require_tool("gcloud"))
    monkeypatch.setenv("FAKE_IAP_LOG", str(tmp_path / "iap.jsonl"))
    monkeypatch.setenv("FAKE_IAP_GATE", str(hidden_world.gate_port))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    world = cloud_world()
    monkeypatch.setenv("SSH_AUTH_SOCK", hidden_world.internal.agent_sock or "")
    home = tmp_path / "home"
    home.mkdir()
    (world.harness.path.parent / "setup.sh").write_text(
        f'#!/bin/sh\necho "set up $TPU_RECONCILER_WORKER" > {world.marks}/w$TPU_RECONCILER_WORKER\n'
    )
    world.write(
        world.desired(
            "slots:\n"
            f"  - name: alpha\n    zone: {ZONE}\n    accelerator: v4-16\n    want: held\n"
            "    workload:\n"
            '      command: echo "trained on $TPU_RECONCILER_WORKER"\n'
            f"      env: {{HOME: {home}}}\n",
            settings=(
                f"ssh_user: {hidden_world.internal.user}\n"
                f"ssh_key: {hidden_world.internal.client_key}\n"
                f"ssh_port: {PORT}\ninternal_ips: true\nssh_proxy: iap\n"
                f"setup_scripts: [setup.sh]\ntmux_socket: {tmux_socket}\n"
            ),
            defaults="{bootstrap: true, tmux: true}",
        )
    )
    await world.start()
    try:
        yield world
    finally:
        await world.stop()
        shutil.rmtree(world.marks, ignore_errors=True)


def _tunnels(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _lookups(world: SetupWorld) -> int:
    return int(world.harness.emulator.request_counts().get("POST nodes.getGuestAttributes", 0))


def _done(world: SetupWorld) -> bool:
    slot = world.slot("alpha")
    work = slot.get("workload") or {}
    return bool(
        slot["setup"]["bootstrap"] == "done"
        and slot["tmux"]["open"]
        and work.get("state") == "succeeded"
    )


async def test_the_controller_reaches_workers_without_addresses_through_iap(
    iap_world: SetupWorld, tmp_path: Path
) -> None:
    world = iap_world
    await world.until("bootstrap, tmux and the workload done through IAP", lambda: _done(world),
                      timeout=60)  # fmt: skip
    assert [(world.marks / f"w{i}").read_text() for i in (0, 1)] == ["set up 0\n", "set up 1\n"]
    assert world.slot("alpha")["ips"] == INTERNAL

    uid = int(world.slot("alpha")["instance"].partition("@")[2])
    vms = [f"t1v-n-{uid % 0x100000000:08x}-w-{i}" for i in (0, 1)]  # the emulator's VM names
    tunnels = _tunnels(tmp_path / "iap.jsonl")
    expected = {
        vm: ["gcloud", "compute", "start-iap-tunnel", vm, str(PORT), "--listen-on-stdin",
             "--project=test-project", f"--zone={ZONE}", "--verbosity=warning"]
        for vm in vms
    }  # fmt: skip
    assert {t["argv"][3] for t in tunnels} == set(vms)
    assert all(t["argv"] == expected[t["argv"][3]] for t in tunnels), tunnels
    assert any(t["by"] == "ssh" for t in tunnels), tunnels  # the tmux window's OpenSSH
    names = json.loads(world.state.worker_names.read_text())
    assert list(names.values()) == [vms]  # kept for the CLI
    # the stand-in IAP reads the guest attributes once a tunnel; the controller once in all
    assert _lookups(world) == len(tunnels) + 1

    env = clean_env()
    common = ("-f", str(world.harness.path), "--state-dir", str(world.state.root))
    logs = run_cli(*common, "logs", "alpha", env=env)
    assert logs.returncode == 0, logs.stderr
    assert "trained on 0" in logs.stdout and "trained on 1" in logs.stdout
    printed = run_cli(*common, "ssh", "alpha", "--worker", "1", "--print", env=env)
    assert printed.returncode == 0, printed.stderr
    assert (
        f"'ProxyCommand=gcloud compute start-iap-tunnel {vms[1]} {PORT} --listen-on-stdin "
        f"--project=test-project --zone={ZONE} --verbosity=warning'"
    ) in printed.stdout
    now = _tunnels(tmp_path / "iap.jsonl")
    assert len(now) == len(tunnels) + 2  # logs: one tunnel a worker
    assert _lookups(world) == len(now) + 1  # the CLI read the names the controller kept
