"""The worker side of workloads against real sshd on 127.0.0.x: an emulated v4-32 (4 workers).

Real OpenSSH servers (one per worker, one common port as ``settings.ssh_port`` requires), the
real wrapper uploaded by SFTP, real detached processes. Every test is a few seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import stat
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler.adapters.secrets import SecretStore
from reconciler.adapters.statedir import StateDir
from reconciler.adapters.status_file import write_status
from reconciler.adapters.workload import WorkloadRunner
from reconciler.errors import UnsafeName, WorkloadError
from reconciler.model.desired import Settings
from reconciler.model.observed import NetworkEndpoint, Node, NodeState
from reconciler.model.status import SlotStatus, StatusSnapshot
from reconciler.model.workload import LaunchRequest, LogLine, WorkerProbe
from tests.fixtures.setup_world import one_port
from tests.fixtures.sshd import SshCluster, SshdHost
from tests.support.cli import CLI_ARGV, clean_env
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

SLOT = "train-a"
RUN = "r20261201-0001"
SECRET = "s3cr3t-Wandb-Value-5f2e9c1d"


@dataclass
class World:
    cluster: SshCluster
    node: Node
    runner: WorkloadRunner
    state: StateDir
    marks: Path

    def request(
        self, command: str | tuple[str, ...], attempt: int = 1, **kw: object
    ) -> LaunchRequest:
        # a HOME of its own: `bash -lc` then reads an empty profile, not this machine's
        # (whose pyenv rehash serialises concurrent logins on a lock)
        env = {"HOME": str(self.marks.parent / "home"), **kw.pop("env", {})}  # type: ignore[dict-item]
        values: dict[str, object] = {
            "slot": SLOT,
            "run_id": RUN,
            "attempt": attempt,
            "command": command,
            "workdir": str(self.marks),
            "env": env,
            "secret_env": {},
            "workers": len(self.node.endpoints),
        }
        values.update(kw)
        return LaunchRequest(**values)  # type: ignore[arg-type]

    async def probe(self, attempt: int = 1) -> tuple[WorkerProbe, ...]:
        return await self.runner.probe(self.node, SLOT, RUN, attempt)

    async def until(self, what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
        assert await eventually(check, timeout=timeout, step=0.05), f"timed out: {what}"

    async def until_probe(
        self, what: str, check: Callable[[tuple[WorkerProbe, ...]], bool], attempt: int = 1
    ) -> tuple[WorkerProbe, ...]:
        deadline = time.monotonic() + 30
        while True:
            probes = await self.probe(attempt)
            if check(probes):
                return probes
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: {probes}")
            await asyncio.sleep(0.1)


def running(probes: tuple[WorkerProbe, ...]) -> bool:
    """Every worker alive with its program started (the pid is recorded just after the
    supervisor took the lock, so "alive" can come a moment before it)."""
    return all(p.state == "alive" and p.pid is not None for p in probes)


def _node(cluster: SshCluster, uid: str = "4242") -> Node:
    ips = [a for host in cluster.hosts for a, _ in host.listen]
    return Node(
        name="v4-node",
        zone="us-central2-b",
        state=NodeState.READY,
        accelerator_type="v4-32",
        uid=uid,
        endpoints=tuple(NetworkEndpoint(ip) for ip in ips),
    )


@pytest.fixture
async def world(sshd_cluster: Callable[[int], SshCluster], tmp_path: Path) -> AsyncIterator[World]:
    cluster = sshd_cluster(4)
    port = one_port(cluster)
    state = StateDir(tmp_path / "state").ensure()
    settings = Settings(ssh_port=port, ssh_concurrency=8)
    runner = WorkloadRunner(
        state=state,
        settings=settings,
        user=cluster.user,
        key=cluster.client_key,
        probe_timeout=5.0,
        connect_timeout=5.0,
    )
    marks = tmp_path / "marks"
    marks.mkdir()
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / ".profile").write_text("")
    w = World(cluster, _node(cluster), runner, state, marks)
    try:
        yield w
    finally:
        for attempt in range(1, 4):  # nothing outlives the test
            with contextlib.suppress(Exception):  # a worker may be down on purpose
                await runner.stop(w.node, SLOT, RUN, attempt, grace=0.2)
        await runner.aclose()


def _connection_handlers(host: SshdHost) -> list[int]:
    """The per-connection sshd processes the host's listener forked."""
    assert host.proc is not None
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == host.proc.pid:
                children.append(int(entry))
    return children


def _kill_connections(host: SshdHost) -> None:
    """Stop a worker's sshd *and* the per-connection sshd it forked (pooled connections die
    with them, as with a rebooted VM); the detached workloads are not its children."""
    children = _connection_handlers(host)
    host.stop()
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def _logins(host: SshdHost) -> int:
    return host.log.read_text().count("Accepted publickey")


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def test_runs_exactly_once_on_every_worker_with_its_environment(world: World) -> None:
    SecretStore.in_state_dir(world.state.root).set("wandb", SECRET)
    command = (
        'echo "$TPU_RECONCILER_SLOT $TPU_RECONCILER_RUN_ID $TPU_RECONCILER_ATTEMPT '
        '$TPU_RECONCILER_WORKER $TPU_RECONCILER_WORKERS $PROJECT ${#WANDB_KEY} $(pwd)" '
        '>> "ran-$TPU_RECONCILER_WORKER"; while [ ! -e go ]; do sleep 0.05; done; '
        "exit $TPU_RECONCILER_WORKER"
    )
    req = world.request(command, env={"PROJECT": "exp one"}, secret_env={"WANDB_KEY": "wandb"})
    await asyncio.gather(*(world.runner.launch(world.node, req) for _ in range(3)))
    await world.runner.launch(world.node, req)  # and once more, in sequence
    markers = [world.marks / f"ran-{i}" for i in range(4)]
    await world.until("a marker on every worker", lambda: all(m.exists() for m in markers))
    probes = await world.until_probe("all alive", running)
    assert [p.index for p in probes] == [0, 1, 2, 3]
    assert all(p.pid and p.started_at and p.started_at <= time.time() for p in probes)
    await asyncio.sleep(0.3)  # a second copy would have written by now
    for worker, marker in enumerate(markers):
        assert _lines(marker) == [f"{SLOT} {RUN} 1 {worker} 4 exp one {len(SECRET)} {world.marks}"]
    (world.marks / "go").touch()
    probes = await world.until_probe("all exited", lambda ps: all(p.state == "exited" for p in ps))
    assert [p.exit_code for p in probes] == [0, 1, 2, 3]
    await world.runner.launch(world.node, req)  # after the exit: still nothing new
    await asyncio.sleep(0.3)
    assert [len(_lines(m)) for m in markers] == [1, 1, 1, 1]
    assert [p.state for p in await world.probe(attempt=2)] == ["missing"] * 4


async def test_argv_command_is_passed_verbatim(world: World) -> None:
    tricky = "a b; $(touch pwned) `id` 'q\" *"
    req = world.request(
        ("sh", "-c", 'printf "%s\\n" "$1" > "argv-$TPU_RECONCILER_WORKER"', "x", tricky)
    )
    await world.runner.launch(world.node, req)
    await world.until_probe("all exited", lambda ps: all(p.state == "exited" for p in ps))
    assert [_lines(world.marks / f"argv-{i}") for i in range(4)] == [[tricky]] * 4
    assert not (world.marks / "pwned").exists()
    with pytest.raises(UnsafeName):
        await world.runner.launch(world.node, world.request("true", env={"TPU_RECONCILER_X": "1"}))


async def test_secret_in_no_argv_no_log_no_readable_file(world: World, tmp_path: Path) -> None:
    SecretStore.in_state_dir(world.state.root).set("wandb", SECRET)
    req = world.request(
        "echo started; sleep 30", secret_env={"WANDB_KEY": "wandb"}, env={"PLAIN": "x"}
    )
    await world.runner.launch(world.node, req)
    probes = await world.until_probe("alive", running)
    needle = SECRET.encode()

    def delivered() -> bool:  # the program did get it, in its environment (once exec'd)
        found = 0
        for probe in probes:
            assert probe.pid is not None
            environ = Path(f"/proc/{probe.pid}/environ").read_bytes()
            found += f"WANDB_KEY={SECRET}".encode() in environ.split(b"\0")
        return found == len(probes)

    await world.until("the secret in every program's environment", delivered)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        assert needle not in cmdline, f"secret in the argv of pid {entry}: {cmdline[:200]!r}"
    for path in tmp_path.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if needle in data:
                assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
                assert path == world.state.root / "secrets" / "wandb", path


async def test_stop_terms_the_group_then_kills_what_ignores_it(world: World) -> None:
    stubborn = world.request(
        "trap '' TERM; sleep 300 & echo $! > child-$TPU_RECONCILER_WORKER; wait; wait"
    )
    await world.runner.launch(world.node, stubborn)
    children = [world.marks / f"child-{i}" for i in range(4)]
    await world.until("children started", lambda: all(_lines(c) for c in children))
    # one process holds the TPU: attempt 2 never starts over a running attempt 1
    with pytest.raises(WorkloadError, match="attempt r20261201-0001/1 is still running"):
        await world.runner.launch(world.node, world.request("sleep 300", attempt=2))
    started = time.monotonic()
    await world.runner.stop(world.node, SLOT, RUN, 1, grace=0.6)
    took = time.monotonic() - started
    assert took >= 0.6
    for child in children:
        pid = int(_lines(child)[0])
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
    probes = await world.probe()
    assert [(p.state, p.exit_code) for p in probes] == [("exited", 137)] * 4

    polite = world.request("sleep 300", attempt=2)
    await world.runner.launch(world.node, polite)
    await world.until_probe("alive", running, attempt=2)
    started = time.monotonic()
    await world.runner.stop(world.node, SLOT, RUN, 2, grace=20)
    assert time.monotonic() - started < 5  # TERM was enough: no waiting out the grace
    probes = await world.probe(attempt=2)
    assert [(p.state, p.exit_code) for p in probes] == [("exited", 143)] * 4

    await world.runner.stop(world.node, SLOT, RUN, 3, grace=1)  # never launched
    await world.runner.launch(world.node, world.request("sleep 300", attempt=3))
    assert [p.state for p in await world.probe(attempt=3)] == ["missing"] * 4


async def test_a_down_worker_is_unknown_and_comes_back_on_a_new_connection(world: World) -> None:
    await world.runner.launch(world.node, world.request("sleep 60"))
    await world.until_probe("alive", running)
    for _ in range(3):
        await world.probe()
    # one connection per worker, kept open across passes
    assert _logins(world.cluster.hosts[0]) == 1
    host = world.cluster.hosts[2]
    _kill_connections(host)
    probes = await world.until_probe(
        "worker 2 unknown", lambda ps: ps[2].state == "unknown", attempt=1
    )
    assert [p.state for p in probes] == ["alive", "alive", "unknown", "alive"]
    assert probes[2].error
    host.start()
    probes = await world.until_probe("all alive", running)
    assert probes[2].pid is not None
    assert _logins(host) == 2 and _logins(world.cluster.hosts[0]) == 1


async def _collect(
    stream: AsyncIterator[LogLine], done: Callable[[list[LogLine]], bool], timeout: float = 15
) -> list[LogLine]:
    got: list[LogLine] = []
    async with asyncio.timeout(timeout):
        async for line in stream:
            got.append(line)
            if done(got):
                break
    return got


async def test_logs_follow_every_worker_across_attempts(world: World) -> None:
    script = (
        "for i in 1 2 3 4 5 6 7 8 9; do "
        'echo "w$TPU_RECONCILER_WORKER a$TPU_RECONCILER_ATTEMPT line $i"; sleep 0.3; '
        "done; sleep 60"
    )
    await world.runner.launch(world.node, world.request(script))
    await world.until_probe("alive", running)
    stream = world.runner.logs(world.node, SLOT, worker=None, attempt=None, lines=5, follow=True)

    def seen(lines: list[LogLine], attempt: int, n: int) -> bool:
        return all(
            sum(1 for x in lines if x.worker == w and x.attempt == attempt) >= n for w in range(4)
        )

    got = await _collect(stream, lambda ls: seen(ls, 1, 3))
    for line in got:
        assert line.text.startswith(f"w{line.worker} a1 line ")
    await world.runner.stop(world.node, SLOT, RUN, 1, grace=1)
    await world.runner.launch(world.node, world.request(script, attempt=2))
    more = await _collect(stream, lambda ls: seen(ls, 2, 2))
    assert {(x.worker, x.text) for x in more if x.attempt == 2} >= {
        (w, f"w{w} a2 line 1") for w in range(4)
    }
    await stream.aclose()  # type: ignore[attr-defined]

    one = world.runner.logs(world.node, SLOT, worker=3, attempt=1, lines=2, follow=False)
    tail = [x async for x in one]
    assert [(x.worker, x.attempt) for x in tail] == [(3, 1), (3, 1)]
    assert all(x.text.startswith("w3 a1 line ") for x in tail)


def _cli_files(world: World, tmp_path: Path) -> list[str]:
    """desired.yaml with the SSH settings, and the controller's snapshot naming the node."""
    desired = tmp_path / "desired.yaml"
    desired.write_text(
        "project: test-project\n"
        "settings:\n"
        f"  ssh_user: {world.cluster.user}\n"
        f"  ssh_key: {world.cluster.client_key}\n"
        f"  ssh_port: {world.runner.settings.ssh_port}\n"
        "slots:\n"
        f"  - {{name: {SLOT}, zone: us-central2-b, accelerator: v4-32, want: held,\n"
        "      workload: {command: ticker}}\n"  # logs refuses a slot without a workload
    )
    row = SlotStatus(
        name=SLOT,
        zone="us-central2-b",
        state="ACTIVE",
        node_state="READY",
        ips=world.node.ips(),
        instance=world.node.instance,
    )
    write_status(world.state.status, StatusSnapshot(slots=(row,)))
    return [
        *CLI_ARGV,
        "--file",
        str(desired),
        "--state-dir",
        str(world.state.root),
        "logs",
        SLOT,
    ]


async def test_logs_cli_follows_all_workers_with_prefixes(world: World, tmp_path: Path) -> None:
    ticker = (
        'i=0; while :; do i=$((i+1)); echo "tick $i of w$TPU_RECONCILER_WORKER"; sleep 0.2; done'
    )
    await world.runner.launch(world.node, world.request(ticker))
    await world.until_probe("alive", running)
    argv = _cli_files(world, tmp_path)
    env = clean_env()
    proc = await asyncio.create_subprocess_exec(
        *argv, "--follow", "--lines", "1", stdout=asyncio.subprocess.PIPE, env=env
    )
    assert proc.stdout is not None
    ticks: dict[int, list[int]] = {w: [] for w in range(4)}
    try:
        async with asyncio.timeout(20):
            while not all(len(t) >= 3 for t in ticks.values()):
                line = (await proc.stdout.readline()).decode()
                assert line, "logs --follow ended"
                prefix, _, text = line.rstrip("\n").partition(" ")
                worker = int(prefix.removeprefix("[w").removesuffix("]"))
                assert text.endswith(f" of w{worker}"), line
                ticks[worker].append(int(text.split()[1]))
    finally:
        proc.terminate()
        await proc.wait()
    for numbers in ticks.values():  # new lines, in order, as they came
        assert numbers == sorted(numbers) and numbers[-1] > numbers[0]

    one = await asyncio.create_subprocess_exec(
        *argv,
        "--worker",
        "2",
        "--attempt",
        "1",
        "--lines",
        "3",
        stdout=asyncio.subprocess.PIPE,
        env=env,
    )
    out, _ = await one.communicate()
    assert one.returncode == 0
    lines = out.decode().splitlines()
    assert len(lines) == 3 and all(x.startswith("[w2] tick ") for x in lines), lines


async def test_logs_cli_shows_terminal_escapes_instead_of_obeying_them(
    world: World, tmp_path: Path
) -> None:
    """A workload that writes an OSC 52 clipboard write, a window title, cursor moves and a
    bell: ``logs`` shows them escaped, ``--raw`` passes them through."""
    hostile = (
        r"printf 'copy \033]52;c;cm0gLXJmIH4=\007 title \033]0;pwned\007 up \033[2A\033[K"
        r" bell \a done\t.\r\n'; sleep 30"
    )
    await world.runner.launch(world.node, world.request(hostile))
    await world.until_probe("alive", running)
    argv = _cli_files(world, tmp_path)

    async def logs(*extra: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            *argv, "--worker", "0", *extra, stdout=asyncio.subprocess.PIPE, env=clean_env()
        )
        out, _ = await proc.communicate()
        assert proc.returncode == 0
        return out.decode()

    shown = await logs()
    assert "\x1b" not in shown and "\x07" not in shown, repr(shown)
    assert shown == (
        "[w0] copy \\x1b]52;c;cm0gLXJmIH4=\\x07 title \\x1b]0;pwned\\x07 up "
        "\\x1b[2A\\x1b[K bell \\x07 done\t.\n"
    )
    raw = await logs("--raw")
    assert "\x1b]52;c;cm0gLXJmIH4=\x07" in raw and "\x1b[2A" in raw


async def test_a_hung_worker_times_out_as_unknown_and_is_reconnected(world: World) -> None:
    await world.runner.launch(world.node, world.request("sleep 60"))
    await world.until_probe("alive", running)
    world.runner.probe_timeout = 1.0
    host = world.cluster.hosts[1]
    frozen = _connection_handlers(host)
    assert frozen
    for pid in frozen:  # the worker stops answering, its TCP connection stays up
        os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        probes = await world.probe()
        assert time.monotonic() - started < 3
        assert [p.state for p in probes] == ["alive", "unknown", "alive", "alive"]
        assert "timed out" in (probes[1].error or "")
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
    probes = await world.until_probe("all alive", running)
    assert _logins(host) == 2  # the connection that timed out was not reused


async def test_logs_follow_moves_to_a_recreated_node(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from reconciler.surfaces.cli import _logs

    ticker = 'i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 0.2; done'
    await world.runner.launch(world.node, world.request(ticker))
    await world.until_probe("alive", running)
    monkeypatch.setattr(_logs, "_RECHECK", 0.3)
    recreated = _node(world.cluster, uid="9999")  # same hosts, a new node instance
    looks: list[_logs.Target] = []

    def look() -> _logs.Target:
        looks.append(_logs.Target(world.node if len(looks) < 3 else recreated, None))
        return looks[-1]

    args = argparse.Namespace(slot=SLOT, worker=0, attempt=None, lines=100, raw=False)
    task = asyncio.create_task(_logs._follow(world.runner, args, look))

    def printed() -> list[str]:
        return [x for x in capsys.readouterr().out.splitlines() if x]

    seen: list[str] = []
    try:
        deadline = time.monotonic() + 20
        while seen.count("[w0] tick 1") < 2:  # printed again from the new node's start
            assert time.monotonic() < deadline, seen
            await asyncio.sleep(0.1)
            seen += printed()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert len(looks) >= 4 and all(x.startswith("[w0] tick ") for x in seen)
