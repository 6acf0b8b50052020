"""The workload runner's SSH pool: one connection per worker, kept across passes.

``WorkerPool`` keeps one asyncssh connection per worker (``ssh_session.connect``: pinned host
keys under the node instance's alias, nothing read from ~/.ssh; through the worker's hop when
its slot has an ``ssh_proxy``, as ``routes``, an ``ssh_routes.SshRoutes``, says); a connection
that died is dropped and reopened, once within the same call when it was a reused one. Opening
a connection holds a place in ``settings.ssh_concurrency``; commands on open connections do
not. On every new connection the wrapper (``workload_wrapper.sh``, package data) is put by SFTP
at ``~/.tpu-reconciler/bin/workload-<sha>.sh`` unless that exact version is already there.
``_everywhere`` runs one job on every worker of a node at once and turns each worker's failure
into its ``ReconcilerError``. What the jobs send and read is ``adapters/workload_wire.py``;
which jobs there are (launch, probe, stop, logs) is ``adapters/workload.py``.

May: open SSH connections and channels, upload the wrapper. May not: print, read secrets, or
decide what runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import importlib.resources
import posixpath
import secrets as _random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, TypeVar

import asyncssh

from reconciler.adapters.hostkeys import HostKeyStore
from reconciler.adapters.ssh import SshOptions, Worker, check_dialable, workers_of
from reconciler.adapters.ssh_proxy import Hop
from reconciler.adapters.ssh_routes import SshRoutes
from reconciler.adapters.ssh_run import REMOTE_DIR, _private_dir
from reconciler.adapters.ssh_session import (
    ClientKeys,
    connect,
    describe,
    load_client_keys,
    run,
    translate,
)
from reconciler.adapters.statedir import StateDir
from reconciler.adapters.workload_wire import command_line
from reconciler.errors import HostKeyMismatch, NoMachine, ReconcilerError, WorkloadError
from reconciler.model.desired import Settings
from reconciler.model.observed import Node

T = TypeVar("T")

WRAPPER: Final = "workload_wrapper.sh"
#: Connection-level failures after which a reused connection is reopened and the call retried.
_STALE: Final = (asyncssh.ConnectionLost, asyncssh.ChannelOpenError, ConnectionError, EOFError)
_WORKER_CACHE: Final = 256


# --- the pool ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Pooled:
    conn: asyncssh.SSHClientConnection
    stack: contextlib.AsyncExitStack
    base: str  # absolute ~/.tpu-reconciler on the worker
    wrapper: str  # absolute path of this version of the wrapper there
    #: ``wrapper serve`` on its own channel: one request line and one answer per probe
    prober: asyncssh.SSHClientProcess[bytes] | None = None
    probe_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: other long-lived channels on this connection, by name (``adapters/telemetry.py``)
    channels: dict[str, Any] = field(default_factory=dict)

    async def ask(self, request: str, timeout: float | None) -> str:
        """One answer of the probe channel (opened on first use). Any failure closes the
        channel (a late answer must never be read as the next one's)."""
        async with self.probe_lock:
            if self.prober is None:
                self.prober = await self.conn.create_process(
                    self.command("serve"), encoding=None, stderr=asyncssh.DEVNULL
                )
            try:
                self.prober.stdin.write(request.encode() + b"\n")
                async with asyncio.timeout(timeout):
                    answer = await self.prober.stdout.readline()
                if not answer.endswith(b"\n"):
                    raise EOFError("the probe channel closed")
            except BaseException:
                self.prober.close()
                self.prober = None
                raise
        return answer.decode("utf-8", "replace").strip()

    def command(self, verb: str, *args: str | int) -> str:
        return command_line(self.wrapper, verb, *args)


_Key = tuple[str, int, str, int, Hop | None]  # instance, worker index, host, port, hop


def _key(instance: str, worker: Worker) -> _Key:
    return (instance, worker.index, worker.host, worker.port, worker.hop)


def _wrapper_bytes() -> bytes:
    return importlib.resources.files("reconciler.adapters").joinpath(WRAPPER).read_bytes()


class WorkerPool:
    """One pooled SSH connection per worker, and jobs on every worker of a node at once."""

    def __init__(
        self,
        *,
        state: StateDir,
        settings: Settings,
        user: str | Callable[[], Awaitable[str]],
        key: Path,
        agent_path: str | None = None,
        connect_timeout: float = 15.0,
        login_timeout: float = 30.0,
        routes: SshRoutes | None = None,
    ) -> None:
        self.settings = settings
        #: how each slot's workers are reached (``ssh_proxy``); its owner may replace it
        self.routes = routes or SshRoutes(None, settings=settings)
        self._user = user
        self._ssh = functools.partial(
            SshOptions,
            known_hosts=HostKeyStore(state.known_hosts),
            key_path=key,
            agent_path=agent_path,
            connect_timeout=connect_timeout,
            login_timeout=login_timeout,
            concurrency=settings.ssh_concurrency,
        )
        self._opts: SshOptions | None = self._ssh(user=user) if isinstance(user, str) else None
        self._keys: ClientKeys | None = None
        self._slots = asyncio.Semaphore(settings.ssh_concurrency)
        self._pool: dict[_Key, _Pooled] = {}
        self._opening: dict[_Key, asyncio.Lock] = {}
        self._workers: dict[tuple[str, tuple[str, ...]], tuple[Worker, ...]] = {}
        self._closed = False
        self._wrapper = _wrapper_bytes()
        self._wrapper_name = f"workload-{hashlib.sha256(self._wrapper).hexdigest()[:12]}.sh"

    # -- connections ------------------------------------------------------------------------

    def workers(self, node: Node) -> tuple[Worker, ...]:
        """The node's workers as ``settings`` reaches them (internal or external IPs); kept
        per node instance and addresses (validating 64 addresses each pass costs ~4 ms)."""
        ips = node.ips(internal=self.settings.internal_ips)
        key = (node.instance, ips)
        workers = self._workers.get(key)
        if workers is None:
            workers = workers_of(ips, port=self.settings.ssh_port)
            if len(self._workers) >= _WORKER_CACHE:
                self._workers.clear()
            self._workers[key] = workers
        return workers

    async def reach(self, node: Node, slot: str) -> tuple[Worker, ...]:
        """``workers(node)`` with the hop each is reached by (``slot``'s ``ssh_proxy``)."""
        return await self.routes.workers(node, slot, self.workers(node))

    async def _options(self) -> SshOptions:
        """The SSH options, the user found now if it was given as a function (asked again
        each time until it answers: a failed OS Login lookup is the resolver's to back off)."""
        if self._opts is None:
            assert not isinstance(self._user, str)
            self._opts = self._ssh(user=await self._user())
        return self._opts

    async def _open(self, instance: str, worker: Worker) -> _Pooled:
        check_dialable(instance.partition("@")[0], (worker.host,))
        opts = await self._options()
        if self._keys is None:
            self._keys = load_client_keys(opts)
        async with contextlib.AsyncExitStack() as stack:
            async with self._slots:
                conn = await stack.enter_async_context(connect(instance, worker, opts, self._keys))
                async with asyncio.timeout(opts.login_timeout):
                    base, wrapper = await self._install(conn)
            pooled = _Pooled(conn, stack.pop_all(), base, wrapper)
        return pooled

    async def _install(self, conn: asyncssh.SSHClientConnection) -> tuple[str, str]:
        """``~/.tpu-reconciler`` (0700) and this version of the wrapper in its ``bin``."""
        async with conn.start_sftp_client() as sftp:
            base = posixpath.join(await sftp.realpath("."), REMOTE_DIR)
            if "\n" in base or "\0" in base:
                raise WorkloadError(f"unusable home directory {base!r} on the worker")
            await _private_dir(sftp, base)
            bin_dir = posixpath.join(base, "bin")
            await _private_dir(sftp, bin_dir)
            path = posixpath.join(bin_dir, self._wrapper_name)
            with contextlib.suppress(asyncssh.SFTPError):
                if (await sftp.stat(path)).size == len(self._wrapper):
                    return base, path
            partial = f"{path}.part-{_random.token_hex(4)}"
            async with sftp.open(partial, "wb", asyncssh.SFTPAttrs(permissions=0o700)) as f:
                await f.write(self._wrapper)
            await sftp.chmod(partial, 0o700)
            try:
                await sftp.posix_rename(partial, path)
            except asyncssh.SFTPError:
                await sftp.rename(partial, path)
        return base, path

    async def _connection(self, instance: str, worker: Worker) -> tuple[_Pooled, bool]:
        """The pooled connection (reused: True) or a fresh one."""
        key = _key(instance, worker)
        pooled = self._pool.get(key)
        if pooled is not None and not pooled.conn.is_closed():  # the common case: no lock
            return pooled, True
        if self._closed:  # e.g. a log follower still retrying after aclose: open nothing
            raise WorkloadError("the workload runner is closed")
        lock = self._opening.setdefault(key, asyncio.Lock())
        async with lock:
            pooled = self._pool.get(key)
            if pooled is not None and not pooled.conn.is_closed():
                return pooled, True
            if pooled is not None:
                await self._drop(key)
            self._evict_stale(key)
            pooled = await self._open(instance, worker)
            self._pool[key] = pooled
            return pooled, False

    def _evict_stale(self, key: _Key) -> None:
        """Connections ``key`` replaces: a re-created node's predecessor's (a new instance),
        and this worker's own reached another way (a new address, port or ``ssh_proxy``)."""
        instance, index = key[0], key[1]
        name = instance.partition("@")[0]
        for other in [
            k
            for k in self._pool
            if (k[0] != instance and k[0].partition("@")[0] == name)
            or (k[:2] == (instance, index) and k != key)
        ]:
            pooled = self._pool.pop(other)
            pooled.conn.close()
            self._opening.pop(other, None)

    async def _drop(self, key: _Key) -> None:
        pooled = self._pool.pop(key, None)
        if pooled is not None:
            with contextlib.suppress(Exception):
                await pooled.stack.aclose()

    async def _with_worker(
        self, instance: str, worker: Worker, job: Callable[[_Pooled], Awaitable[T]]
    ) -> T:
        """``job`` on the worker's connection; a reused connection that turns out dead is
        reopened once. A timeout or a dead connection drops it from the pool."""
        key = _key(instance, worker)
        for retry in (True, False):
            pooled, reused = await self._connection(instance, worker)
            try:
                return await job(pooled)
            except _STALE:
                await self._drop(key)
                if not (reused and retry):
                    raise
            except (TimeoutError, asyncssh.Error, OSError):
                await self._drop(key)
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        """Close every pooled connection; the runner opens none after this."""
        self._closed = True
        for key in list(self._pool):
            await self._drop(key)
        self._opening.clear()

    # -- commands ---------------------------------------------------------------------------

    async def _command(
        self, pooled: _Pooled, command: str, *, timeout: float, stdin: bytes = b""
    ) -> str:
        status, out = await run(
            pooled.conn, command, None, timeout=timeout, stdin=stdin, capture=True
        )
        text = out.decode("utf-8", "replace").strip()
        if status != 0:
            detail = text.removeprefix("error ") or f"exit status {status}"
            raise WorkloadError(f"the workload wrapper refused: {detail}")
        return text

    def _failure(
        self, instance: str, worker: Worker, exc: BaseException, what: str
    ) -> ReconcilerError:
        if isinstance(exc, HostKeyMismatch | NoMachine):
            return exc
        if isinstance(exc, WorkloadError):
            return WorkloadError(f"{what} {describe(worker, instance)}: {exc}", worker=worker.index)
        error = translate(
            exc, f"{what} {describe(worker, instance)}", worker=worker.index, log=None
        )
        return WorkloadError(str(error), worker=worker.index)

    async def _everywhere(
        self,
        node: Node,
        what: str,
        job: Callable[[_Pooled, Worker], Awaitable[T]],
        *,
        slot: str,
        timeout: float | None = None,
        first: int = 0,
    ) -> list[T | ReconcilerError]:
        """``job`` on every worker at once, reached as ``slot``'s ``ssh_proxy`` says; each
        worker's failure becomes its ReconcilerError (a way that cannot be found, an IAP VM
        name not known, is every worker's). ``timeout`` bounds each worker's connecting and job
        together (one deadline for the whole batch: a timer per worker costs more than the
        probe itself)."""
        instance = node.instance

        async def one(worker: Worker) -> T | ReconcilerError:
            try:
                return await self._with_worker(instance, worker, lambda pooled: job(pooled, worker))
            except (ReconcilerError, asyncssh.Error, OSError, TimeoutError) as exc:
                return self._failure(instance, worker, exc, what)

        try:
            workers = await self.reach(node, slot)
        except ReconcilerError as exc:
            return [exc for _ in self.workers(node)]
        if first:  # a slice of a larger program: its workers' indices as that program has them
            workers = tuple(replace(w, index=w.index + first) for w in workers)
        tasks = [asyncio.create_task(one(w)) for w in workers]
        late: set[asyncio.Task[T | ReconcilerError]] = set()
        try:
            if tasks:
                _, late = await asyncio.wait(tasks, timeout=timeout)
        finally:
            for task in tasks:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        results: list[T | ReconcilerError] = []
        for worker, task in zip(workers, tasks, strict=True):
            if task in late:  # a silent partition: that connection is not reused
                await self._drop(_key(instance, worker))
                results.append(self._failure(instance, worker, TimeoutError(), what))
                continue
            error = task.exception()
            if error is None:
                results.append(task.result())
            elif isinstance(error, KeyboardInterrupt | SystemExit):
                raise error
            else:  # a bug, not a worker problem: still shown as that worker's failure
                results.append(
                    WorkloadError(
                        f"{what} {describe(worker, instance)}: unexpected "
                        f"{type(error).__name__}: {error}",
                        worker=worker.index,
                    )
                )
        return results

    @staticmethod
    def _raise_failures(node: Node, what: str, outcomes: Sequence[object]) -> None:
        errors = [o for o in outcomes if isinstance(o, ReconcilerError)]
        for error in errors:
            if isinstance(error, HostKeyMismatch | NoMachine):
                raise error
        if errors:
            first = errors[0]
            others = len(errors) - 1
            more = f" (and {others} more worker{'' if others == 1 else 's'})" if others else ""
            raise WorkloadError(
                f"{what} on {node.name}: {first}{more}",
                worker=getattr(first, "worker", None) if len(errors) == 1 else None,
            )
