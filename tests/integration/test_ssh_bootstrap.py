"""Bootstrap of an emulated v4-32-like node: 4 real sshd workers at 127.0.0.2-127.0.0.5."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.adapters.hostkeys import HostKeyStore
from reconciler.adapters.ssh import bootstrap, resolve_scripts
from reconciler.errors import HostKeyMismatch, SetupFailed
from reconciler.model.names import host_key_alias
from tests.fixtures.sshd import KEY_COMMENT, SshCluster
from tests.support.tools import require_tool

pytestmark = pytest.mark.integration

INSTANCE = "v4-node@4242"


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    """Where the scripts leave their markers (the workers share this machine's disk)."""
    (tmp_path / "marks").mkdir()
    return tmp_path / "marks"


def _scripts(base: Path, **texts: str) -> tuple[Path, ...]:
    base.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (base / f"{name}.sh").write_text("#!/bin/sh\n" + text)
    return resolve_scripts(base, [f"{name}.sh" for name in texts])


def _openssh_accepts(cluster: SshCluster, worker: int, known_hosts: Path) -> bool:
    """Does OpenSSH itself, strictly checking, trust the pins bootstrap wrote?"""
    w = cluster.workers()[worker]
    argv = [
        require_tool("ssh"),
        "-F",
        "/dev/null",
        "-o",
        f"HostKeyAlias={host_key_alias(INSTANCE, worker)}",
        "-o",
        f"UserKnownHostsFile={known_hosts}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "IdentitiesOnly=yes",
        "-i",
        str(cluster.client_key),
        "-p",
        str(w.port),
        f"{cluster.user}@{w.host}",
        "true",
    ]
    done = subprocess.run(argv, capture_output=True, timeout=30, env={"PATH": os.defpath})
    return done.returncode == 0


async def test_scripts_run_in_order_on_all_four_workers(
    sshd_cluster: Callable[[int], SshCluster], tmp_path: Path, marks: Path
) -> None:
    cluster = sshd_cluster(4)
    scripts = _scripts(
        tmp_path / "desired",
        first=f'echo "first on $TPU_RECONCILER_WORKER"; echo 1 > {marks}/$TPU_RECONCILER_WORKER\n',
        second=f"test -f {marks}/$TPU_RECONCILER_WORKER && echo 2 >> {marks}/$TPU_RECONCILER_WORKER"
        "\necho second >&2\n",
    )
    log_dir = tmp_path / "logs" / "slot" / "inst"
    known = tmp_path / "known_hosts"

    result = await bootstrap(INSTANCE, cluster.workers(), scripts, log_dir, cluster.options(known))

    assert result.ok, [w.error for w in result.workers]
    assert [w.index for w in result.workers] == [0, 1, 2, 3]
    for i in range(4):
        assert (marks / str(i)).read_text() == "1\n2\n"
        log = log_dir / f"worker-{i}.log"
        assert stat.S_IMODE(log.stat().st_mode) == 0o600
        text = log.read_text()
        assert f"first on {i}" in text and "second" in text  # stdout and stderr both logged
        assert "second" in result.workers[i].tail
    assert stat.S_IMODE(log_dir.stat().st_mode) == 0o700
    assert set(HostKeyStore(known).aliases()) == {host_key_alias(INSTANCE, i) for i in range(4)}
    for host in cluster.hosts:  # the private run directory is removed afterwards
        remote = host.directory / "home" / ".tpu-reconciler"
        assert stat.S_IMODE(remote.stat().st_mode) == 0o700
        assert list(remote.iterdir()) == []
    assert _openssh_accepts(cluster, 0, known)


async def test_failing_worker_is_reported_while_the_others_succeed(
    sshd_cluster: Callable[[int], SshCluster], tmp_path: Path, marks: Path
) -> None:
    cluster = sshd_cluster(4)
    scripts = _scripts(
        tmp_path / "desired",
        a='if [ "$TPU_RECONCILER_WORKER" = 2 ]; then echo "boom on two"; exit 3; fi\n',
        b=f"touch {marks}/$TPU_RECONCILER_WORKER\n",
    )
    log_dir = tmp_path / "logs"

    result = await bootstrap(INSTANCE, cluster.workers(), scripts, log_dir, cluster.options())

    assert not result.ok
    assert [w.index for w in result.failed] == [2]
    bad = result.workers[2]
    assert bad.exit_status == 3
    assert "boom on two" in bad.tail
    assert isinstance(bad.error, SetupFailed) and bad.error.worker == 2
    assert sorted(p.name for p in marks.iterdir()) == ["0", "1", "3"]  # stopped at the failure
    with pytest.raises(SetupFailed) as raised:
        result.raise_for_failure()
    assert raised.value.worker == 2 and "boom on two" in raised.value.log_tail


async def test_changed_host_key_is_refused_and_openssh_agrees(
    sshd_cluster: Callable[[int], SshCluster], tmp_path: Path, marks: Path
) -> None:
    cluster = sshd_cluster(4)
    scripts = _scripts(tmp_path / "desired", m=f"echo x >> {marks}/$TPU_RECONCILER_WORKER\n")
    known = tmp_path / "known_hosts"
    opts = cluster.options(known)
    first = await bootstrap(INSTANCE, cluster.workers(), scripts, tmp_path / "logs", opts)
    assert first.ok
    pins_before = known.read_text()

    cluster.hosts[1].restart(new_host_key=True)
    second = await bootstrap(INSTANCE, cluster.workers(), scripts, tmp_path / "logs", opts)

    assert [w.index for w in second.failed] == [1]
    error = second.workers[1].error
    assert isinstance(error, HostKeyMismatch)
    assert host_key_alias(INSTANCE, 1) in str(error) and "changed" in str(error)
    assert (marks / "1").read_text() == "x\n"  # nothing ran on the impostor
    assert (marks / "0").read_text() == "x\nx\n"
    assert known.read_text() == pins_before  # the pin was not replaced
    with pytest.raises(HostKeyMismatch):
        second.raise_for_failure()
    assert _openssh_accepts(cluster, 0, known)
    assert not _openssh_accepts(cluster, 1, known)

    # the node is gone for good: its pins are dropped and a new first use is accepted
    assert HostKeyStore(known).forget(INSTANCE) == 4
    third = await bootstrap(INSTANCE, cluster.workers()[1:2], scripts, tmp_path / "logs", opts)
    assert third.ok


async def test_agent_is_forwarded_only_when_given(
    sshd_cluster: Callable[[int], SshCluster], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = sshd_cluster(2)
    scripts = _scripts(tmp_path / "desired", agent="ssh-add -l\n")

    forwarded = await bootstrap(
        INSTANCE, cluster.workers(), scripts, tmp_path / "with", cluster.options()
    )
    assert forwarded.ok, [w.tail for w in forwarded.workers]
    assert all(KEY_COMMENT in w.tail for w in forwarded.workers)

    # an agent in the environment is not picked up implicitly
    assert cluster.agent_sock is not None
    monkeypatch.setenv("SSH_AUTH_SOCK", cluster.agent_sock)
    plain = await bootstrap(
        INSTANCE,
        cluster.workers()[:1],
        scripts,
        tmp_path / "without",
        cluster.options(agent_path=None),
    )
    assert not plain.ok
    assert plain.workers[0].exit_status == 2  # ssh-add: cannot reach an agent
    assert KEY_COMMENT not in plain.workers[0].tail


async def test_script_timeout_and_unreachable_worker_fail_cleanly(
    sshd_cluster: Callable[[int], SshCluster], tmp_path: Path
) -> None:
    cluster = sshd_cluster(1)
    scripts = _scripts(tmp_path / "desired", slow="echo started; sleep 30\n")
    down = cluster.workers()[0].__class__(1, "127.0.0.250", cluster.workers()[0].port)

    result = await bootstrap(
        INSTANCE,
        (*cluster.workers(), down),
        scripts,
        tmp_path / "logs",
        cluster.options(script_timeout=1.0),
    )

    slow, refused = result.workers
    assert isinstance(slow.error, SetupFailed) and "timed out" in str(slow.error)
    assert "started" in slow.tail
    assert isinstance(refused.error, SetupFailed) and refused.error.worker == 1
    assert "127.0.0.250" in str(refused.error)
