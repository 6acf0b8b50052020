"""``doctor`` checks what a workload needs over SSH, even with no setup step at all: the key
(missing, or with a passphrase and no agent), the user, and one real login to a live worker
(a real sshd on 127.0.0.x), and says how to create and register the key a TPU VM needs.

The real CLI in a subprocess, a snapshot written by the status writer, the emulator behind
the TPU API so the other checks pass.
"""

from __future__ import annotations

import getpass
import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.adapters.statedir import StateDir
from reconciler.adapters.status_file import write_status
from reconciler.emulator import Emulator
from reconciler.model.status import SetupStatus, SlotStatus, StatusSnapshot, TmuxStatus
from tests.fixtures.emulator import gcloud_env_for
from tests.fixtures.sshd import SshCluster
from tests.support.cli import clean_env, run_cli
from tests.support.tools import require_tool

pytestmark = pytest.mark.integration


def _row(name: str, ip: str) -> SlotStatus:
    return SlotStatus(
        name=name,
        zone="us-central2-b",
        accelerator="v4-8",
        state="ACTIVE",
        ips=(ip,),
        instance=f"{name}@42",
        managed=True,
        setup=SetupStatus(),
        tmux=TmuxStatus(),
    )


def _doctor(tmp_path: Path, env: dict[str, str]) -> dict[str, dict[str, str]]:
    done = run_cli(
        "-f", str(tmp_path / "desired.yaml"), "--state-dir", str(tmp_path / "state"),
        "doctor", "--json", env=env,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return {c["name"]: c for c in json.loads(done.stdout)["checks"]}


def _write(tmp_path: Path, settings: str, ip: str) -> None:
    (tmp_path / "desired.yaml").write_text(
        "project: test-project\n"
        f"settings: {{backend: rest, {settings}}}\n"
        "defaults: {setup: {tmux: false}}\n"
        "slots:\n"
        "  - {name: train, zone: us-central2-b, accelerator: v4-8, want: held,\n"
        "     workload: {command: python3 train.py}}\n"
    )
    state = StateDir(tmp_path / "state").ensure()
    write_status(state.status, StatusSnapshot(slots=(_row("train", ip),)))


def test_a_workload_alone_is_checked_over_ssh(
    emulator: Emulator, sshd_cluster: Callable[[int], SshCluster], tmp_path: Path
) -> None:
    cluster = sshd_cluster(1)
    host = cluster.hosts[0]
    user = getpass.getuser()
    env = clean_env(gcloud_env_for(emulator, tmp_path / "gcloud"))
    env.pop("SSH_AUTH_SOCK", None)
    env["HOME"] = str(tmp_path / "home")  # no ~/.ssh/google_compute_engine there

    # The default key is missing: say so, and how to create and register one.
    _write(tmp_path, f"ssh_user: {user}, ssh_port: {host.port}", host.address)
    checks = _doctor(tmp_path, env)
    key = checks["ssh_key"]
    assert key["status"] == "fail", key
    assert "google_compute_engine not found" in key["detail"] and "train" in key["detail"]
    assert "gcloud compute os-login ssh-keys add" in key["hint"]
    assert "ssh-keygen" in key["hint"]
    assert checks["ssh_reach"]["status"] == "skip" and "ssh_key" in checks["ssh_reach"]["detail"]

    # The right key: one real login to the live worker.
    settings = f"ssh_user: {user}, ssh_port: {host.port}, ssh_key: {cluster.client_key}"
    _write(tmp_path, settings, host.address)
    checks = _doctor(tmp_path, env)
    assert checks["ssh_key"]["status"] == "ok", checks["ssh_key"]
    reach = checks["ssh_reach"]
    assert reach["status"] == "ok", reach
    assert (
        f"logged in to worker 0 of train@42 ({host.address}:{host.port}) as {user}"
        in (reach["detail"])
    )
    assert not (tmp_path / "state" / "known_hosts").exists()  # doctor pins nothing

    # A user the worker does not know: the login is refused, and doctor says so.
    _write(tmp_path, settings.replace(f"ssh_user: {user}", "ssh_user: nobody-here"), host.address)
    reach = _doctor(tmp_path, env)["ssh_reach"]
    assert reach["status"] == "fail", reach
    assert "as nobody-here" in reach["detail"] and "authentication refused" in reach["detail"]
    assert "os-login ssh-keys add" in reach["hint"]


def test_a_key_with_a_passphrase_needs_an_agent(emulator: Emulator, tmp_path: Path) -> None:
    keygen = require_tool("ssh-keygen")
    key = tmp_path / "locked"
    subprocess.run(
        [keygen, "-q", "-t", "ed25519", "-N", "secret", "-f", str(key)], check=True, timeout=30
    )
    env = clean_env(gcloud_env_for(emulator, tmp_path / "gcloud"))
    env.pop("SSH_AUTH_SOCK", None)
    _write(tmp_path, f"ssh_user: alice, ssh_key: {key}", "203.0.113.9")
    checks = _doctor(tmp_path, env)
    assert checks["ssh_key"]["status"] == "fail"
    assert "has a passphrase and no SSH agent" in checks["ssh_key"]["detail"]
    assert checks["ssh_reach"]["status"] == "skip"
    # A usable key, and the snapshot's node is emulated (a documentation address): nothing
    # is dialled, and doctor says why.
    plain = tmp_path / "plain"
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(plain)], check=True)
    _write(tmp_path, f"ssh_user: alice, ssh_key: {plain}", "203.0.113.9")
    checks = _doctor(tmp_path, env)
    assert checks["ssh_key"]["status"] == "ok"
    assert checks["ssh_reach"] == {
        "name": "ssh_reach",
        "status": "skip",
        "detail": "the live nodes are emulated (documentation addresses): nothing to dial",
        "hint": "",
    }
