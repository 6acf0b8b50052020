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
from reconciler.model.status import (
    RaceGroupStatus,
    SetupStatus,
    SlotStatus,
    StatusSnapshot,
    TmuxStatus,
    WorkloadStatus,
)
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


ACROSS = """\
project: test-project
settings: {backend: rest, ssh_user: alice}
slots:
  - {name: a1, zone: us-central2-b, accelerator: v4-16}
  - {name: a2, zone: us-central2-b, accelerator: v4-16}
race_groups:
  - name: pair
    count: 2
    slots: [a1, a2]
    workload: {command: python3 train.py, across: group}
"""


def test_info_on_a_group_whose_winners_each_run_its_workload(tmp_path: Path) -> None:
    """A race group's ``workload:`` without ``across`` runs on each winner as its own:
    ``info GROUP`` names that program and each winner's state, not "program: none"."""
    path = tmp_path / "desired.yaml"
    path.write_text(ACROSS.replace(", across: group", "").replace("count: 2", "count: 1"))
    state = StateDir(tmp_path / "state").ensure()
    base = ("--file", str(path), "--state-dir", str(state.root))
    a1 = SlotStatus(
        name="a1", zone="us-central2-b", state="ACTIVE", race_group="pair",
        workload=WorkloadStatus(state="running", summary="running 3m · attempt 1"),
    )  # fmt: skip
    group = RaceGroupStatus(name="pair", count=1, winners=("a1",), candidates=("a1", "a2"))
    write_status(state.status, StatusSnapshot(slots=(a1,), race_groups=(group,)))
    done = cli(*base, "info", "pair", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "program: python3 train.py on each winner, as its own (the group's workload)" in (
        done.stdout
    )
    assert "  a1: running 3m · attempt 1  (logs a1)" in done.stdout
    assert "program: none" not in done.stdout
    doc = json.loads(cli(*base, "info", "pair", "--json", cwd=tmp_path).stdout)
    assert doc["each_winner"] == {
        "command": "python3 train.py",
        "winners": {"a1": "running 3m · attempt 1"},
    }


def test_info_on_an_across_group_shows_its_one_program(tmp_path: Path) -> None:
    """The program of ``workload.across: group`` lives under the group's name: ``info GROUP``
    shows it (not "unknown slot"), and a candidate's ``info`` says where it is."""
    path = tmp_path / "desired.yaml"
    path.write_text(ACROSS, encoding="utf-8")
    state = StateDir(tmp_path / "state").ensure()
    base = ("--file", str(path), "--state-dir", str(state.root))
    before = cli(*base, "info", "pair", cwd=tmp_path)  # no snapshot yet: the file says it
    assert before.returncode == 0, before.stderr
    assert "program (workload.across: group): pending" in before.stdout
    program = WorkloadStatus(
        state="running", run_id="pair-0", attempt=2, summary="running 5m · attempt 2"
    )
    group = RaceGroupStatus(
        name="pair",
        count=2,
        winners=("a1", "a2"),
        candidates=("a1", "a2"),
        workload=program,
        instance="pair@abc.a1@1,a2@2",
        ips=("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"),
    )
    write_status(state.status, StatusSnapshot(race_groups=(group,)))
    done = cli(*base, "info", "pair", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "winners: a1, a2" in out
    assert "program (workload.across: group): running 5m · attempt 2" in out
    assert "run pair-0, attempt 2" in out and "w3 10.0.0.4" in out
    assert "output: tpu-reconciler logs pair" in out
    doc = json.loads(cli(*base, "info", "pair", "--json", cwd=tmp_path).stdout)
    assert doc["kind"] == "race_group" and doc["across"] is True
    assert doc["program"]["workload"]["run_id"] == "pair-0"
    assert doc["program"]["instance"] == "pair@abc.a1@1,a2@2"
    member = cli(*base, "info", "a1", cwd=tmp_path)
    assert member.returncode == 0, member.stderr
    assert "group program (pair): running 5m · attempt 2  see info pair, logs pair" in member.stdout
    ssh = cli(*base, "ssh", "pair", "--print", cwd=tmp_path)
    assert ssh.returncode != 0
    assert "'pair' is a race group: use one of its winners (a1, a2)" in ssh.stderr


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
