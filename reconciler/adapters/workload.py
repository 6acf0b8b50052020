"""The user's program on every worker of a node: launch, probe, stop and logs over pooled SSH.

``WorkloadRunner`` keeps one asyncssh connection per worker (``ssh_session.connect``: pinned
host keys under the node instance's alias, nothing read from ~/.ssh) open across passes; a
connection that died is dropped and reopened, once within the same call when it was a reused
one (a NAT that forgot an idle connection costs no "unknown"). Opening a connection holds a
place in ``settings.ssh_concurrency``; commands on open connections do not. On every new
connection the wrapper (``workload_wrapper.sh``, package data) is put by SFTP at
``~/.tpu-reconciler/bin/workload-<sha>.sh`` unless that exact version is already there.

Remote layout, per worker (several "workers" share one host in tests)::

    ~/.tpu-reconciler/w<index>/<slot>/current                      "<run_id>/<attempt>"
    ~/.tpu-reconciler/w<index>/<slot>/<run_id>/<attempt>/{launch.lock,lock,started,pid,exit,
                                                          stop,output.log}

Every call is one short remote request per worker, all workers at once:
``bash <wrapper> launch|stop|logs ...`` as an exec, and a probe as one line on the worker's
``wrapper serve`` channel, opened once per pooled connection and kept (a probe pass then costs
a request and an answer packet per worker, not a channel; any failure closes that channel).

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
import contextlib
import functools
import hashlib
import importlib.resources
import math
import posixpath
import secrets as _random
import shlex
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

import asyncssh

from reconciler.adapters.hostkeys import HostKeyStore
from reconciler.adapters.secrets import SecretStore, check_secret_name
from reconciler.adapters.ssh import SshOptions, Worker, check_dialable, workers_of
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
from reconciler.errors import (
    HostKeyMismatch,
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

WRAPPER: Final = "workload_wrapper.sh"
_MAX_ATTEMPT: Final = 1_000_000
#: Connection-level failures after which a reused connection is reopened and the call retried.
_STALE: Final = (asyncssh.ConnectionLost, asyncssh.ChannelOpenError, ConnectionError, EOFError)
_PROBE_STATES: Final = frozenset({"alive", "exited", "missing"})
_FOLLOW_RETRY: Final = (1.0, 2.0, 5.0)
_WORKER_CACHE: Final = 256


# --- values that reach the remote command line ------------------------------------------------


def check_attempt(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _MAX_ATTEMPT:
        raise UnsafeName(f"invalid attempt {value!r}: expected a positive integer")
    return value


def _no_nul(what: str, value: str) -> str:
    if not isinstance(value, str) or "\0" in value:
        raise UnsafeName(f"invalid {what}: must be a string without NUL bytes")
    return value


def worker_dir(base: str, worker: int, slot: str) -> str:
    """``<base>/w<worker>/<slot>``: everything of one slot on one worker."""
    return posixpath.join(base, f"w{int(worker)}", check_name(slot))


def attempt_dir(base: str, worker: int, slot: str, run_id: str, attempt: int) -> str:
    """``<base>/w<worker>/<slot>/<run_id>/<attempt>``, every part validated."""
    check_name(slot)
    check_run_id(run_id)
    check_attempt(attempt)
    return _attempt_path(base, worker, slot, run_id, attempt)


def _attempt_path(base: str, worker: int, slot: str, run_id: str, attempt: int) -> str:
    """``attempt_dir`` for names the caller validated already (once per call, not per worker)."""
    return f"{base}/w{int(worker)}/{slot}/{run_id}/{int(attempt)}"


def encode_spec(req: LaunchRequest, secret_values: Mapping[str, bytes]) -> bytes:
    """The wrapper's stdin: NUL-terminated ``workdir=``, ``env=NAME=VALUE``, then ``shell=CMD``
    or one ``arg=`` per argv element, framed (``frame``). Refuses what the wrapper could not
    carry (NUL bytes)."""
    records: list[bytes] = []
    if req.workdir:
        records.append(b"workdir=" + _no_nul("workdir", req.workdir).encode())
    for name, value in req.env.items():
        value = _no_nul(f"value of {check_env_name(name)}", value)
        records.append(f"env={name}=".encode() + value.encode())
    for name, secret in secret_values.items():
        if b"\0" in secret:
            raise UnsafeName(f"the secret for {name} contains a NUL byte")
        records.append(f"env={check_env_name(name)}=".encode() + secret)
    if isinstance(req.command, str):
        if not req.command.strip():
            raise UnsafeName("empty workload command")
        records.append(b"shell=" + _no_nul("command", req.command).encode())
    else:
        if not req.command:
            raise UnsafeName("empty workload argv")
        records += [b"arg=" + _no_nul("argument", a).encode() for a in req.command]
    return frame(b"".join(r + b"\0" for r in records))


def frame(body: bytes) -> bytes:
    """``body`` and its last line ``end=<bytes> <sha256>``: the wrapper refuses a spec whose
    frame is missing or does not match, so a spec cut off in transit starts nothing."""
    return body + f"end={len(body)} {hashlib.sha256(body).hexdigest()}\n".encode()


def parse_probe(index: int, output: str) -> WorkerProbe:
    """One wrapper ``probe`` line (``state=alive pid=12 started=... code=- output=...``)."""
    fields = dict(f.partition("=")[::2] for f in output.split())
    state = fields.get("state")
    if state not in _PROBE_STATES:
        return WorkerProbe(index, "unknown", error=f"unreadable probe answer {output[:200]!r}")

    def number(key: str) -> float | None:
        try:
            value = float(fields.get(key, "-"))
        except ValueError:
            return None
        return value if math.isfinite(value) else None

    pid, code = number("pid"), number("code")
    return WorkerProbe(
        index,
        "alive" if state == "alive" else "exited" if state == "exited" else "missing",
        exit_code=int(code) if code is not None and state == "exited" else None,
        pid=int(pid) if pid is not None else None,
        started_at=number("started"),
        last_output_at=number("output"),
        adopt=_adopt(fields.get("adopt")) if state == "missing" else None,
    )


def _adopt(value: str | None) -> str | None:
    """``<run_id>/<attempt>`` the wrapper names for adoption, or None when it is not one."""
    run_id, _, attempt = (value or "").partition("/")
    try:
        check_run_id(run_id)
        check_attempt(int(attempt))
    except (UnsafeName, ValueError):
        return None
    return f"{run_id}/{int(attempt)}"


class _Frames:
    """The wrapper's ``logs`` stream: ``@ <attempt> <n>`` headers, each followed by n bytes of
    that attempt's output; lines are cut at newlines, a partial line waits for its end (or for
    the attempt to change, or the stream to end)."""

    def __init__(self, worker: int) -> None:
        self.worker = worker
        self.attempt = 0
        self._partial = b""

    def header(self, line: bytes) -> tuple[int, int] | None:
        """(attempt, bytes to read), or None for a heartbeat; ValueError when malformed."""
        at, attempt, size = line.decode("ascii").split()
        if at != "@":
            raise ValueError(f"bad frame {line[:80]!r}")
        if attempt == ".":
            return None
        return int(attempt), int(size)

    def feed(self, attempt: int, data: bytes) -> list[LogLine]:
        out = self.flush() if attempt != self.attempt else []
        self.attempt = attempt
        buffer = self._partial + data
        *lines, self._partial = buffer.split(b"\n")
        return out + [self._line(raw) for raw in lines]

    def flush(self) -> list[LogLine]:
        if not self._partial:
            return []
        partial, self._partial = self._partial, b""
        return [self._line(partial)]

    def _line(self, raw: bytes) -> LogLine:
        text = raw.decode("utf-8", "replace").rstrip("\r").rsplit("\r", 1)[-1]
        return LogLine(self.worker, self.attempt, text)


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
        words = ["bash", self.wrapper, verb, *(str(a) for a in args)]
        return " ".join(shlex.quote(w) for w in words)


_Key = tuple[str, int, str, int]  # instance, worker index, host, port


def _key(instance: str, worker: Worker) -> _Key:
    return (instance, worker.index, worker.host, worker.port)


def _wrapper_bytes() -> bytes:
    return importlib.resources.files("reconciler.adapters").joinpath(WRAPPER).read_bytes()


class WorkloadRunner:
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
    ) -> None:
        self.settings = settings
        self.probe_timeout = probe_timeout
        self.command_timeout = command_timeout
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
        self._secrets = SecretStore.in_state_dir(state.root)
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
            self._evict_other_instances(instance)
            pooled = await self._open(instance, worker)
            self._pool[key] = pooled
            return pooled, False

    def _evict_other_instances(self, instance: str) -> None:
        """A re-created node has a new instance: its predecessor's connections are useless."""
        name = instance.partition("@")[0]
        for key in [k for k in self._pool if k[0] != instance and k[0].partition("@")[0] == name]:
            pooled = self._pool.pop(key)
            pooled.conn.close()
            self._opening.pop(key, None)

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
        timeout: float | None = None,
    ) -> list[T | ReconcilerError]:
        """``job`` on every worker at once; each worker's failure becomes its ReconcilerError.
        ``timeout`` bounds each worker's connecting and job together (one deadline for the
        whole batch: a timer per worker costs more than the probe itself)."""
        instance = node.instance

        async def one(worker: Worker) -> T | ReconcilerError:
            try:
                return await self._with_worker(instance, worker, lambda pooled: job(pooled, worker))
            except (ReconcilerError, asyncssh.Error, OSError, TimeoutError) as exc:
                return self._failure(instance, worker, exc, what)

        workers = self.workers(node)
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

        outcomes = await self._everywhere(node, f"launching {req.slot} on", job)
        self._raise_failures(node, f"launching {req.slot}", outcomes)

    async def probe(
        self, node: Node, slot: str, run_id: str, attempt: int
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
            answer = await pooled.ask(f"probe {directory}", None)
            return parse_probe(worker.index, answer)

        outcomes = await self._everywhere(node, "probing", job, timeout=self.probe_timeout)
        return tuple(
            o if isinstance(o, WorkerProbe) else WorkerProbe(w.index, "unknown", error=str(o))
            for w, o in zip(workers, outcomes, strict=True)
        )

    async def stop(self, node: Node, slot: str, run_id: str, attempt: int, grace: float) -> None:
        """SIGTERM to the attempt's process group on every worker, SIGKILL after ``grace``
        seconds; returns when every worker has recorded the exit. An attempt that never
        started is marked so that a late launch of it starts nothing."""
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

        outcomes = await self._everywhere(node, f"stopping {slot} on", job)
        self._raise_failures(node, f"stopping {slot}", outcomes)

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
        return self._logs(node.instance, workers, slot, run_id, attempt, lines, follow)

    async def _logs(
        self,
        instance: str,
        workers: Sequence[Worker],
        slot: str,
        run_id: str | None,
        attempt: int | None,
        lines: int,
        follow: bool,
    ) -> AsyncIterator[LogLine]:
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
