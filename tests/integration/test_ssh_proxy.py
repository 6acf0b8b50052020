"""SSH through a proxy, with workers nobody can dial: real sshd in a network namespace of their
own (``tests/fixtures/hidden.py``), reached only through a relay (a proxy command) or a jump
sshd. Bootstrap, a workload with its logs, and OpenSSH (a tmux window, ``ssh``) work through
either, and fail, saying why, without.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import subprocess
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from reconciler.adapters.hostkeys import HostKeyStore
from reconciler.adapters.openssh import ssh_argv
from reconciler.adapters.ssh import SshOptions, Worker, bootstrap, resolve_scripts, workers_of
from reconciler.adapters.ssh_proxy import CommandHop, JumpHop, hop_for, jump_alias
from reconciler.adapters.ssh_routes import SshRoutes
from reconciler.adapters.statedir import StateDir
from reconciler.adapters.tmux import TmuxMirror, WantedWindow
from reconciler.adapters.workload import WorkloadRunner
from reconciler.errors import WorkloadError
from reconciler.model.load import parse_desired
from reconciler.model.names import host_key_alias
from reconciler.model.observed import NetworkEndpoint, Node, NodeState
from reconciler.model.workload import LaunchRequest
from tests.fixtures.hidden import JUMP, PORT, WORKERS, HiddenWorld, refused
from tests.support.tools import require_tool
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

ZONE = "us-central2-b"
NODE = Node(
    "hidden", ZONE, NodeState.READY, uid="77", endpoints=tuple(NetworkEndpoint(a) for a in WORKERS)
)
SCRIPT = (
    '#!/bin/sh\necho "set up worker $TPU_RECONCILER_WORKER" > {marks}/w$TPU_RECONCILER_WORKER\n'
)


def _options(world: HiddenWorld, state: Path) -> SshOptions:
    return world.workers.options(state / "known_hosts", connect_timeout=5.0, login_timeout=10.0)


def _relayed(world: HiddenWorld) -> tuple[Worker, ...]:
    """The workers, each reached through the relay (the proxy command, tokens filled in)."""
    proxy = parse_desired(_desired(world, f"{{command: {world.relay_command}}}")).slots[0].ssh_proxy
    return tuple(
        replace(w, hop=hop_for(proxy, host=w.host, port=w.port, node="hidden"))
        for w in workers_of(NODE.ips(), port=PORT)
    )


def _desired(world: HiddenWorld, proxy: str) -> str:
    return (
        "project: test-project\n"
        f"settings: {{ssh_port: {PORT}, ssh_user: {world.workers.user}}}\n"
        "slots:\n"
        f"  - {{name: hidden, zone: {ZONE}, accelerator: v4-16, want: held, ssh_proxy: {proxy}}}\n"
    )


def _scripts(tmp_path: Path) -> tuple[Path, ...]:
    (tmp_path / "marks").mkdir(exist_ok=True)
    (tmp_path / "setup.sh").write_text(SCRIPT.format(marks=tmp_path / "marks"))
    return resolve_scripts(tmp_path, ["setup.sh"])


async def test_bootstrap_reaches_the_workers_only_through_the_proxy(
    hidden_world: HiddenWorld, tmp_path: Path
) -> None:
    assert all(refused(a) for a in WORKERS)  # nothing answers a direct dial
    scripts, opts = _scripts(tmp_path), _options(hidden_world, tmp_path)
    direct = await bootstrap("hidden@77", workers_of(NODE.ips(), port=PORT), scripts,
                             tmp_path / "logs-direct", opts)  # fmt: skip
    assert not direct.ok
    assert all("Connection refused" in str(w.error) for w in direct.workers), direct

    before = len(hidden_world.through_gate())
    result = await bootstrap("hidden@77", _relayed(hidden_world), scripts, tmp_path / "logs", opts)
    assert result.ok, [str(w.error) for w in result.failed]
    marks = tmp_path / "marks"
    assert [(marks / f"w{i}").read_text() for i in (0, 1)] == [
        "set up worker 0\n", "set up worker 1\n",
    ]  # fmt: skip
    assert sorted(hidden_world.through_gate()[before:]) == [f"{a} {PORT}" for a in WORKERS]
    # each worker pinned under its own alias, none under the proxy's
    store = HostKeyStore(tmp_path / "known_hosts")
    assert sorted(store.aliases()) == [host_key_alias("hidden@77", i) for i in (0, 1)]


async def test_a_proxy_that_fails_says_what_it_said(
    hidden_world: HiddenWorld, tmp_path: Path
) -> None:
    opts = _options(hidden_world, tmp_path)
    closed = CommandHop(
        (*hidden_world.relay_command[:3], "127.0.0.1", "1", WORKERS[0], str(PORT)), "proxy relay"
    )
    missing = CommandHop(("/nonexistent/proxy", WORKERS[0]), "proxy proxy")
    result = await bootstrap(
        "hidden@77",
        (Worker(0, WORKERS[0], PORT, closed), Worker(1, WORKERS[1], PORT, missing)),
        _scripts(tmp_path), tmp_path / "logs", opts,
    )  # fmt: skip
    first, second = (str(w.error) for w in result.workers)
    assert "via proxy relay" in first and "the proxy (proxy relay) exited 1" in first, first
    assert "cannot reach 127.0.0.1:1: Connection refused" in first, first
    assert "cannot run the proxy command '/nonexistent/proxy'" in second, second


async def test_a_jump_host_carries_every_worker_on_one_login(
    hidden_world: HiddenWorld, tmp_path: Path
) -> None:
    jump = JumpHop("127.0.0.1", hidden_world.jump_port)
    workers = tuple(replace(w, hop=jump) for w in workers_of(NODE.ips(), port=PORT))
    logins = hidden_world.jump.hosts[0].log.read_text().count("Accepted publickey")
    result = await bootstrap("hidden@77", workers, _scripts(tmp_path), tmp_path / "logs",
                             _options(hidden_world, tmp_path))  # fmt: skip
    assert result.ok, [str(w.error) for w in result.failed]
    assert hidden_world.jump.hosts[0].log.read_text().count("Accepted publickey") == logins + 1
    store = HostKeyStore(tmp_path / "known_hosts")
    assert set(store.aliases()) == {
        jump_alias(jump),
        *(host_key_alias("hidden@77", i) for i in (0, 1)),
    }
    # OpenSSH through the same jump host, with the pins bootstrap wrote
    argv = ssh_argv(
        user=hidden_world.workers.user, ip=WORKERS[1], instance="hidden@77", worker=1,
        key=hidden_world.workers.client_key, known_hosts=tmp_path / "known_hosts", port=PORT,
        hop=jump,
    )  # fmt: skip
    done = _ssh(argv, "echo", "through-the-jump")
    assert done.stdout.strip() == "through-the-jump", done.stderr
    assert f"{JUMP} {PORT}" in hidden_world.through_gate()


def _ssh(argv: tuple[str, ...], *command: str) -> subprocess.CompletedProcess[str]:
    """OpenSSH run with ``argv`` (as the tmux window and ``tpu-reconciler ssh`` run it), never
    asking for anything, with a remote ``command``."""
    batch = (*argv[:-1], "-o", "BatchMode=yes", argv[-1], *command)
    return subprocess.run(
        batch, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
    )


@pytest.fixture
async def runner(hidden_world: HiddenWorld, tmp_path: Path) -> AsyncIterator[WorkloadRunner]:
    desired = parse_desired(_desired(hidden_world, f"{{command: {hidden_world.relay_command}}}"))
    made = WorkloadRunner(
        state=StateDir(tmp_path / "state").ensure(), settings=desired.settings,
        user=hidden_world.workers.user, key=hidden_world.workers.client_key,
        probe_timeout=10.0, connect_timeout=5.0, routes=SshRoutes(desired),
    )  # fmt: skip
    try:
        yield made
    finally:
        with contextlib.suppress(Exception):
            await made.stop(NODE, "hidden", "r1", 1, grace=0.2)
        await made.aclose()


async def test_a_workload_and_its_logs_go_through_the_proxy(
    runner: WorkloadRunner, hidden_world: HiddenWorld, tmp_path: Path
) -> None:
    (tmp_path / "home").mkdir()
    request = LaunchRequest(
        slot="hidden", run_id="r1", attempt=1, workers=2, workdir=str(tmp_path),
        command='echo "hello from $TPU_RECONCILER_WORKER"', env={"HOME": str(tmp_path / "home")},
        secret_env={},
    )  # fmt: skip
    direct = WorkloadRunner(
        state=StateDir(tmp_path / "direct").ensure(), settings=runner.settings,
        user=hidden_world.workers.user, key=hidden_world.workers.client_key, connect_timeout=5.0,
    )  # fmt: skip
    with pytest.raises(WorkloadError, match="Connection refused"):
        await direct.launch(NODE, request)
    await direct.aclose()

    await runner.launch(NODE, request)

    async def exited() -> bool:
        probes = await runner.probe(NODE, "hidden", "r1", 1)
        return all(p.state == "exited" and p.exit_code == 0 for p in probes)

    for _ in range(100):
        if await exited():
            break
        await asyncio.sleep(0.1)
    assert await exited()
    lines = [
        (line.worker, line.text)
        async for line in runner.logs(
            NODE, "hidden", worker=None, attempt=None, lines=10, follow=False, run_id="r1"
        )
    ]
    assert sorted(lines) == [(0, "hello from 0"), (1, "hello from 1")]


async def test_a_tmux_window_runs_openssh_through_the_proxy(
    hidden_world: HiddenWorld, tmux_mirror: TmuxMirror, tmp_path: Path
) -> None:
    require_tool("ssh")
    (worker,) = _relayed(hidden_world)[1:]
    mark = tmp_path / "tmux-ok"
    common = {
        "user": hidden_world.workers.user, "ip": worker.host, "instance": "hidden@77",
        "worker": 1, "key": hidden_world.workers.client_key,
        "known_hosts": tmp_path / "known_hosts", "port": PORT,
    }  # fmt: skip
    argv = ssh_argv(**common, hop=worker.hop)  # type: ignore[arg-type]
    remote = ("touch", shlex.quote(str(mark)), ";", "sleep", "60")
    await tmux_mirror.sync([WantedWindow("tpu-hidden", "hidden", (*argv, *remote))])
    assert await eventually(mark.exists, timeout=20), "the window's ssh did not get through"
    without = _ssh(ssh_argv(**common), "true")  # type: ignore[arg-type]
    assert without.returncode == 255 and "Connection refused" in without.stderr
