"""``tpu-reconciler ssh`` and ``info``, as a user runs them: a subprocess of the real CLI, a
snapshot written by the status writer, and for ``ssh`` a real sshd on 127.0.0.x — the command
is the tmux window's (agent forwarding, the node instance's pinned host key)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.adapters.hostkeys import HostKeyStore
from reconciler.adapters.statedir import StateDir
from reconciler.adapters.status_file import write_status
from reconciler.model.names import host_key_alias
from reconciler.model.status import SetupStatus, SlotStatus, StatusSnapshot, TmuxStatus
from tests.fixtures.sshd import SshCluster
from tests.support.cli import clean_env, run_cli
from tests.support.tui_world import make_world

INSTANCE = "node-a@77"

pytestmark = pytest.mark.integration


def cli(*args: str, cwd: Path, agent: str | None = None) -> subprocess.CompletedProcess[str]:
    env = clean_env()
    env.pop("SSH_AUTH_SOCK", None)
    if agent:
        env["SSH_AUTH_SOCK"] = agent
    return run_cli(*args, env=env, cwd=cwd)


def test_info_prints_workers_ssh_and_errors(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    base = ("--file", str(world.path), "--state-dir", str(world.state.root))
    done = cli(*base, "info", "od-v432-usc2b-1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "workers: w0 34.1.2.10  w1 34.1.2.11  w2 34.1.2.12  w3 34.1.2.13" in out
    assert "ssh: ssh -A -i" in out and "alice@34.1.2.10" in out
    assert "worker 2: setup/base.sh exited 1" in out and "created 2026-11-27T08:00:00Z" in out
    doc = json.loads(cli(*base, "info", "spot-v48-usc2b-2", "--json", cwd=tmp_path).stdout)
    assert doc["schema_version"] == "tpu-reconciler.mcp.v1"
    assert doc["observed"]["last_error"].startswith("code 8: There is no more capacity")
    assert doc["ssh"]["available"] is False
    missing = cli(*base, "info", "nope", cwd=tmp_path)
    assert missing.returncode == 1 and "unknown slot 'nope'" in missing.stderr


def _ssh_world(tmp_path: Path, cluster: SshCluster) -> tuple[Path, StateDir]:
    host = cluster.hosts[0]
    path = tmp_path / "desired.yaml"
    path.write_text(
        "project: test-project\n"
        f"settings: {{ssh_user: {cluster.user}, ssh_key: {cluster.client_key}, "
        f"ssh_port: {host.port}}}\n"
        "slots:\n  - {name: node-a, zone: us-central2-b, accelerator: v4-16, want: held}\n"
    )
    state = StateDir(tmp_path / "state").ensure()
    row = SlotStatus(
        name="node-a",
        zone="us-central2-b",
        accelerator="v4-16",
        state="ACTIVE",
        ips=(host.address, "10.255.255.1"),
        instance=INSTANCE,
        managed=True,
        setup=SetupStatus(),
        tmux=TmuxStatus(),
    )
    write_status(state.status, StatusSnapshot(slots=(row,)))
    return path, state


def test_ssh_execs_openssh_pinned_to_the_instance(
    sshd_cluster: Callable[[int], SshCluster], tmp_path: Path
) -> None:
    cluster = sshd_cluster(1)
    path, state = _ssh_world(tmp_path, cluster)
    base = ("--file", str(path), "--state-dir", str(state.root))
    remote = ("echo", "hello from", "$SSH_AUTH_SOCK")
    done = cli(*base, "ssh", "node-a", "--", *remote, cwd=tmp_path, agent=cluster.agent_sock)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("hello from /"), done.stdout  # the agent was forwarded
    alias = host_key_alias(INSTANCE, 0)
    assert HostKeyStore(state.known_hosts).pinned(alias)  # first use pinned, under the alias
    printed = cli(*base, "ssh", "node-a", "--print", cwd=tmp_path).stdout
    assert printed.startswith("ssh -A -i ") and f"HostKeyAlias={alias}" in printed
    assert f"-p {cluster.hosts[0].port} {cluster.user}@{cluster.hosts[0].address}" in printed
    # The tmux window's command is the same (one definition: adapters/openssh.ssh_argv).
    from reconciler.adapters.tmux import ssh_argv

    window = ssh_argv(
        user=cluster.user,
        ip=cluster.hosts[0].address,
        instance=INSTANCE,
        key=cluster.client_key,
        known_hosts=state.known_hosts,
        port=cluster.hosts[0].port,
    )
    assert printed.split() == list(window)
    other = cli(*base, "ssh", "node-a", "--worker", "2", cwd=tmp_path)
    assert other.returncode == 1 and "workers 0..1, not 2" in other.stderr
