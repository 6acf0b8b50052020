"""The user's program on every worker of a node: launch, probe, stop and logs over pooled SSH.

``WorkloadRunner`` is a ``WorkerPool`` (``adapters/workload_pool.py``): one asyncssh connection
per worker (``ssh_session.connect``: pinned host keys under the node instance's alias, nothing
read from ~/.ssh) open across passes; a connection that died is dropped and reopened, once
within the same call when it was a reused one (a NAT that forgot an idle connection costs no
"unknown"). What goes over it (command lines, the launch spec, probe answers, log frames) is
the pure ``adapters/workload_wire.py``.

Remote layout, per worker (several "workers" share one host in tests)::

    ~/.tpu-reconciler/w<index>/<slot>/current                      "<run_id>/<attempt>"
    ~/.tpu-reconciler/w<index>/<slot>/<run_id>/<attempt>/{launch.lock,lock,started,pid,exit,
                                                          stop,output.log}

Every call is one short remote request per worker, all workers at once:
``bash <wrapper> launch|stop|logs ...`` as an exec, and a probe as one line on the worker's
``wrapper serve`` channel, opened once per pooled connection and kept (a probe pass then costs
a request and an answer packet per worker, not a channel; any failure closes that channel).
With ``telemetry`` (``setup.telemetry``) the probe goes through the chip probe's channel
instead, which answers the wrapper's probe and the chips in one line (``adapters/telemetry.py``).

Names reaching the command line are validated first (slot: ``names.check_name``, run id, env
names, secret names); values travel on stdin as
NUL-separated records, so no user string is ever parsed by a shell, and secret values (read
from ``adapters/secrets``) are in no argv and no log.

The SSH user is a name or an async function that finds one (``LiveSetup`` passes its OS Login
resolver): it is asked only when a connection is about to be opened, so a pass whose
connections are all pooled, or a node nobody can dial, looks nothing up. A node whose address
is from a documentation range (an emulated node) is refused before anything dials: ``launch``,
``stop`` and ``logs`` raise ``NoMachine``, ``probe`` answers "unknown" with that reason.

Errors: ``probe`` never raises for a worker — a failed probe is that worker's state
``"unknown"`` with ``error`` set. ``launch`` and ``stop`` try every worker, then raise
``HostKeyMismatch`` or ``NoMachine`` (permanent) or ``WorkloadError`` (temporary, naming the
workers). ``logs`` yields what it can read; without ``follow`` it raises ``WorkloadError`` at
the end when a worker could not be read, with ``follow`` it reconnects to that worker.

May: open SSH connections and channels, upload the wrapper, read secrets. May not: print,
decide whether to launch or stop (the planner does), or put a secret on a command line.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Final, TypeVar

import asyncssh

from reconciler.adapters.secrets import SecretStore, check_secret_name
from reconciler.adapters.ssh import Worker, check_dialable
from reconciler.adapters.ssh_routes import SshRoutes
from reconciler.adapters.statedir import StateDir
from reconciler.adapters.telemetry import with_chips
from reconciler.adapters.workload_pool import WorkerPool, _Pooled
from reconciler.adapters.workload_wire import (
    _attempt_path,
    _Frames,
    attempt_dir,
    check_attempt,
    encode_spec,
    parse_probe,
    parse_stop,
    worker_dir,
)
from reconciler.errors import (
    NoMachine,
    ReconcilerError,
    SecretNotFound,
    SecretUnsafe,
    UnsafeName,
    WorkloadError,
)
from reconciler.model.desired import Settings
from reconciler.model.names import check_name
from reconciler.model.observed import Node
from reconciler.model.workload import (
    LaunchRequest,
    LogLine,
    WorkerProbe,
    check_env_name,
    check_run_id,
)

T = TypeVar("T")

_FOLLOW_RETRY: Final = (1.0, 2.0, 5.0)


class WorkloadRunner(WorkerPool):
    """Launch / probe / stop / logs of workloads; one pooled connection per worker."""

    def __init__(
        self,
        *,
        state: StateDir,
        settings: Settings,
        user: str | Callable[[], Awaitable[str]],
        key: Path,
        agent_path: str | None = None,
        probe_timeout: float = 10.0,
        command_timeout: float = 60.0,
        connect_timeout: float = 15.0,
        login_timeout: float = 30.0,
        routes: SshRoutes | None = None,
    ) -> None:
        super().__init__(
            state=state,
            settings=settings,
            user=user,
            key=key,
            agent_path=agent_path,
            connect_timeout=connect_timeout,
            login_timeout=login_timeout,
            routes=routes,
        )
        self.probe_timeout = probe_timeout
        self.command_timeout = command_timeout
        self._secrets = SecretStore.in_state_dir(state.root)

    def _secret_values(self, req: LaunchRequest) -> dict[str, bytes]:
        values: dict[str, bytes] = {}
        for env_name, secret_name in req.secret_env.items():
            check_env_name(env_name)
            try:
                values[env_name] = self._secrets.get(check_secret_name(secret_name)).reveal()
            except SecretNotFound:
                raise WorkloadError(
                    f"{req.slot}: no secret {secret_name!r} stored for {env_name}: run "
                    f"`tpu-reconciler secret set {secret_name}`",
                    delay=60.0,
                ) from None
            except SecretUnsafe as exc:
                raise WorkloadError(str(exc), delay=60.0) from None
        return values

    async def launch(self, node: Node, req: LaunchRequest) -> None:
        """Start attempt ``req.attempt`` on every worker at once. Idempotent: a worker that
        already has this attempt (running, exited or stopped) starts nothing."""
        check_name(req.slot)
        check_run_id(req.run_id)
        check_attempt(req.attempt)
        workers = self.workers(node)
        if not workers:
            raise WorkloadError(f"{node.name} has no network endpoints yet")
        check_dialable(req.slot, (w.host for w in workers))
        if req.workers != len(workers):
            raise WorkloadError(
                f"{node.name}: the request is for {req.workers} workers, the node has "
                f"{len(workers)} endpoints"
            )
        spec = encode_spec(req, self._secret_values(req))

        async def job(pooled: _Pooled, worker: Worker) -> str:
            directory = attempt_dir(pooled.base, worker.index, req.slot, req.run_id, req.attempt)
            command = pooled.command(
                "launch", directory, worker.index, req.workers, req.slot, req.run_id, req.attempt
            )
            return await self._command(pooled, command, timeout=self.command_timeout, stdin=spec)

        outcomes = await self._everywhere(node, f"launching {req.slot} on", job, slot=req.slot)
        self._raise_failures(node, f"launching {req.slot}", outcomes)

    async def probe(
        self, node: Node, slot: str, run_id: str, attempt: int, *, telemetry: bool = False
    ) -> tuple[WorkerProbe, ...]:
        """One short command per worker. Never raises: a worker whose probe failed (SSH down,
        timeout, bad answer) is ``"unknown"`` with the reason in ``error``. A node without
        endpoints gives an empty tuple."""
        try:
            workers = self.workers(node)
        except UnsafeName as exc:  # an address that is not an IP: unknown, never "gone"
            return tuple(
                WorkerProbe(i, "unknown", error=str(exc)) for i in range(len(node.endpoints))
            )
        try:
            check_dialable(slot, (w.host for w in workers))
        except NoMachine as exc:  # an emulated node: nothing to ask, and nothing is "gone"
            return tuple(WorkerProbe(w.index, "unknown", error=str(exc)) for w in workers)
        try:
            check_name(slot)
            check_run_id(run_id)
            check_attempt(attempt)
        except UnsafeName as exc:
            return tuple(WorkerProbe(w.index, "unknown", error=str(exc)) for w in workers)

        async def job(pooled: _Pooled, worker: Worker) -> WorkerProbe:
            directory = _attempt_path(pooled.base, worker.index, slot, run_id, attempt)
            # bounded by the timeout of the whole worker in _everywhere
            if not telemetry:
                answer = await pooled.ask(f"probe {directory}", None)
                return parse_probe(worker.index, answer)
            return await with_chips(pooled, worker.index, directory)

        outcomes = await self._everywhere(
            node, "probing", job, slot=slot, timeout=self.probe_timeout
        )
        return tuple(
            o if isinstance(o, WorkerProbe) else WorkerProbe(w.index, "unknown", error=str(o))
            for w, o in zip(workers, outcomes, strict=True)
        )

    async def stop(
        self, node: Node, slot: str, run_id: str, attempt: int, grace: float, *, first: int = 0
    ) -> dict[int, tuple[int, ...]]:
        """SIGTERM to the attempt's process group on every worker, SIGKILL after ``grace``
        seconds; returns when every worker has recorded the exit. An attempt that never
        started is marked so that a late launch of it starts nothing. ``first``: the index of
        ``node``'s worker 0 in the program (a race group's winner, ``core/across``).
        Returns worker -> the processes still there at the kill deadline (the wrapper's
        ``stopped left=...``), only for the workers that have some."""
        check_name(slot)
        check_run_id(run_id)
        check_attempt(attempt)
        if isinstance(grace, bool) or not isinstance(grace, int | float) or not grace >= 0:
            raise ValueError(f"grace must be a non-negative number, got {grace!r}")
        grace_ms = math.ceil(min(float(grace), 86400.0) * 1000)
        check_dialable(slot, (w.host for w in self.workers(node)))

        async def job(pooled: _Pooled, worker: Worker) -> str:
            directory = attempt_dir(pooled.base, worker.index, slot, run_id, attempt)
            return await self._command(
                pooled,
                pooled.command("stop", directory, grace_ms),
                timeout=grace_ms / 1000 + self.command_timeout,
            )

        outcomes = await self._everywhere(node, f"stopping {slot} on", job, slot=slot, first=first)
        self._raise_failures(node, f"stopping {slot}", outcomes)
        lefts = {first + i: parse_stop(o) for i, o in enumerate(outcomes) if isinstance(o, str)}
        return {worker: pids for worker, pids in lefts.items() if pids}

    # -- logs -------------------------------------------------------------------------------

    def logs(
        self,
        node: Node,
        slot: str,
        *,
        worker: int | None,
        attempt: int | None,
        lines: int,
        follow: bool,
        run_id: str | None = None,
    ) -> AsyncIterator[LogLine]:
        """The workers' output, interleaved by arrival: the last ``lines`` lines of the attempt
        (default: the latest launch on each worker; ``run_id`` default: the latest run), then,
        with ``follow``, new output as it comes, moving on to every later launch. Raises
        ``NoMachine`` at once for an emulated node's address (nothing is dialled)."""
        check_name(slot)
        if run_id is not None:
            check_run_id(run_id)
        if attempt is not None:
            check_attempt(attempt)
        if isinstance(lines, bool) or not isinstance(lines, int) or lines < 0:
            raise ValueError(f"lines must be a non-negative integer, got {lines!r}")
        workers = self.workers(node)
        if worker is not None:
            workers = tuple(w for w in workers if w.index == worker)
            if not workers:
                raise WorkloadError(f"{node.name} has no worker {worker}")
        check_dialable(slot, (w.host for w in workers))
        return self._logs(node, worker, slot, run_id, attempt, lines, follow)

    async def _logs(
        self,
        node: Node,
        only: int | None,
        slot: str,
        run_id: str | None,
        attempt: int | None,
        lines: int,
        follow: bool,
    ) -> AsyncIterator[LogLine]:
        instance = node.instance
        workers = [w for w in await self.reach(node, slot) if only is None or w.index == only]
        queue: asyncio.Queue[LogLine | ReconcilerError | None] = asyncio.Queue(maxsize=10_000)

        async def one(worker: Worker) -> None:
            frames = _Frames(worker.index)
            tail = lines
            delays = iter(_FOLLOW_RETRY)
            while True:
                try:
                    stream = functools.partial(
                        self._stream,
                        worker=worker,
                        slot=slot,
                        run_id=run_id,
                        attempt=attempt,
                        lines=tail,
                        follow=follow,
                        frames=frames,
                        queue=queue,
                    )
                    await self._with_worker(instance, worker, stream)
                    for line in frames.flush():
                        await queue.put(line)
                    if not follow:
                        break
                except (ReconcilerError, asyncssh.Error, OSError, TimeoutError, ValueError) as exc:
                    if not follow or self._closed:
                        await queue.put(self._failure(instance, worker, exc, "reading the log of"))
                        break
                tail = 0  # after a reconnect: only what is new
                await asyncio.sleep(next(delays, _FOLLOW_RETRY[-1]))
            await queue.put(None)

        tasks = [asyncio.create_task(one(w)) for w in workers]
        failures: list[ReconcilerError] = []
        try:
            pending = len(tasks)
            while pending:
                item = await queue.get()
                if item is None:
                    pending -= 1
                elif isinstance(item, ReconcilerError):
                    failures.append(item)
                else:
                    yield item
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if failures:
            raise WorkloadError(
                "; ".join(str(f) for f in failures),
                worker=getattr(failures[0], "worker", None) if len(failures) == 1 else None,
            )

    async def _stream(
        self,
        pooled: _Pooled,
        *,
        worker: Worker,
        slot: str,
        run_id: str | None,
        attempt: int | None,
        lines: int,
        follow: bool,
        frames: _Frames,
        queue: asyncio.Queue[LogLine | ReconcilerError | None],
    ) -> None:
        command = pooled.command(
            "logs",
            worker_dir(pooled.base, worker.index, slot),
            run_id or "-",
            attempt or 0,
            lines,
            1 if follow else 0,
        )
        process = await pooled.conn.create_process(command, encoding=None)
        try:
            process.stdin.write_eof()
            while header := await process.stdout.readline():
                frame = frames.header(header)
                if frame is None:
                    continue
                number, size = frame
                data = await process.stdout.readexactly(size) if size else b""
                for line in frames.feed(number, data):
                    await queue.put(line)
            completed = await process.wait()
        finally:
            process.close()
        if completed.exit_status not in (0, None) or completed.exit_signal:
            raise WorkloadError(f"the workload wrapper's logs exited {completed.exit_status}")
