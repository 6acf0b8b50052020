"""The asyncssh edge: pinned connections, logged remote commands, bounded fan-out.

``connect`` opens one connection to one worker with everything explicit: ``config=None`` (no
~/.ssh/config), the caller's key and agent socket only (never ``SSH_AUTH_SOCK`` or default
identities), and host keys from a ``HostKeyStore`` under the instance's alias. A key seen for
the first time is pinned only *after* the server proved it holds it (the handshake finished);
a different key for a pinned alias is refused. Host algorithms are offered with the pinned
ones first, then in OpenSSH's order (ed25519 first), so a server that now shows another key
type is a mismatch, not a negotiation failure.

Every asyncssh / OS / timeout exception is translated here into ``SetupFailed`` (with worker
index and the log tail) or ``HostKeyMismatch``.

May: open SSH connections and channels, pin keys. May not: print, log command output anywhere
but the ``WorkerLog`` it is given, or put a secret on a command line (secrets go to stdin).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

import asyncssh

from reconciler.adapters.hostkeys import HostKey, HostKeyStore
from reconciler.adapters.ssh_log import WorkerLog, log_path
from reconciler.adapters.ssh_values import (
    TAIL_LINES,
    SshOptions,
    Worker,
    WorkerResult,
    check_dialable,
)
from reconciler.errors import HostKeyMismatch, ReconcilerError, RemoteCommandFailed, SetupFailed
from reconciler.model.names import host_key_alias

_KEEPALIVE_INTERVAL: Final = 30.0
_KEEPALIVE_COUNT_MAX: Final = 4
_READ_CHUNK: Final = 64 * 1024
#: OpenSSH's order; asyncssh's own default would pin an RSA key first where a host has one.
_PREFERRED_HOST_KEY_ALGS: Final = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "rsa-sha2-512",
    "rsa-sha2-256",
)

#: AES-GCM first: one AEAD call per packet (AES-NI), where asyncssh's chacha20-poly1305 builds
#: several cipher contexts per packet (a 64-worker workload probe pass: ~40 -> ~28 ms of CPU).
_PREFERRED_CIPHERS: Final = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")

T = TypeVar("T")
R = TypeVar("R")


def host_key(key: asyncssh.SSHKey) -> HostKey:
    return HostKey(key.get_algorithm(), base64.b64encode(key.public_data).decode("ascii"))


class _PinningClient(asyncssh.SSHClient):
    """Called by asyncssh only for a host key that is *not* among the pinned ones."""

    def __init__(self, store: HostKeyStore, alias: str, what: str) -> None:
        self._store = store
        self._alias = alias
        self._what = what
        self.unpinned: HostKey | None = None
        self.mismatch: HostKeyMismatch | None = None

    def validate_host_public_key(self, host: str, addr: str, port: int, key: Any) -> bool:
        try:
            presented = host_key(key)
            if self._store.verify(self._alias, presented, what=self._what):
                return True  # pinned meanwhile by another worker or process
        except HostKeyMismatch as exc:
            self.mismatch = exc
            return False
        except (ReconcilerError, OSError):
            return False
        self.unpinned = presented  # first use: pinned once the handshake has proved it
        return True


@dataclass(frozen=True, slots=True)
class ClientKeys:
    """The caller's key, loaded once per setup run."""

    keys: Sequence[Any]
    agent_identities: Sequence[Any] | None


def load_client_keys(opts: SshOptions) -> ClientKeys:
    """Load ``opts.key_path``. A passphrase-protected key is left to the agent when there is
    one (and the agent is then asked for that key only, when ``<key>.pub`` exists)."""
    path = opts.key_path
    if not path.is_file():
        raise SetupFailed(
            f"SSH key {path} not found (gcloud creates ~/.ssh/google_compute_engine on the "
            "first `gcloud compute tpus tpu-vm ssh`; or set the key path)"
        )
    try:
        keys = asyncssh.load_keypairs([str(path)], ignore_encrypted=opts.agent_path is not None)
    except (asyncssh.KeyImportError, OSError, ValueError) as exc:
        raise SetupFailed(f"cannot load SSH key {path}: {exc}") from None
    if keys:
        return ClientKeys(keys, [keys[0].public_data])
    public = path.with_name(path.name + ".pub")
    identities = [str(public)] if public.is_file() else None
    return ClientKeys([str(path)], identities)


def translate(
    exc: BaseException, what: str, *, worker: int, log: WorkerLog | None
) -> ReconcilerError:
    """An asyncssh / OS / timeout exception as SetupFailed (ReconcilerErrors pass through)."""
    if isinstance(exc, ReconcilerError):
        return exc
    if isinstance(exc, asyncssh.PermissionDenied):
        reason = "authentication refused (check the user, the key and OS Login access)"
    elif isinstance(exc, asyncssh.Error):
        reason = f"{type(exc).__name__}: {exc.reason}"
    elif isinstance(exc, TimeoutError):
        reason = "timed out"
    elif isinstance(exc, OSError):
        reason = exc.strerror or str(exc) or type(exc).__name__
    else:
        reason = f"{type(exc).__name__}: {exc}"
    tail = log.tail() if log is not None else ""
    if log is not None:
        with contextlib.suppress(OSError):
            log.note(f"error: {reason}")
    return SetupFailed(f"{what}: {reason}", worker=worker, log_tail=tail)


@contextlib.asynccontextmanager
async def connect(
    instance: str, worker: Worker, opts: SshOptions, keys: ClientKeys
) -> AsyncIterator[asyncssh.SSHClientConnection]:
    """An authenticated connection whose host key matches (or now is) the pin for
    ``host_key_alias(instance, worker.index)``. Raises HostKeyMismatch, NoMachine (an
    emulated node's address: nothing is dialled), or the raw exception for the caller to
    ``translate`` (it knows the log)."""
    alias = host_key_alias(instance, worker.index)
    check_dialable(instance.partition("@")[0], (worker.host,))  # NoMachine: nothing answers
    store = opts.known_hosts
    pinned = [k for k in store.pinned(alias) if k is not None]
    trusted = [asyncssh.import_public_key(f"{k.key_type} {k.base64}") for k in pinned]
    algs: list[str] = []
    for key in trusted:
        algs.extend(a.decode() for a in key.sig_algorithms)
    defaults = [a.decode() for a in asyncssh.public_key.get_default_public_key_algs()]
    ciphers = [a.decode() for a in asyncssh.encryption.get_default_encryption_algs()]
    ciphers.sort(key=lambda a: a not in _PREFERRED_CIPHERS)  # stable: the rest keep order
    for alg in (*_PREFERRED_HOST_KEY_ALGS, *defaults):
        if alg in defaults and alg not in algs:
            algs.append(alg)
    what = describe(worker, instance)
    client: list[_PinningClient] = []

    def factory() -> _PinningClient:
        client.append(_PinningClient(store, alias, what))
        return client[-1]

    try:
        conn = await asyncssh.connect(
            worker.host,
            worker.port,
            config=None,
            username=opts.user,
            client_factory=factory,
            known_hosts=(trusted, [], []),
            host_key_alias=alias,
            server_host_key_algs=algs,
            encryption_algs=ciphers,
            client_keys=keys.keys,
            ignore_encrypted=opts.agent_path is not None,
            agent_path=opts.agent_path or "",
            agent_identities=keys.agent_identities,
            agent_forwarding=opts.agent_path is not None,
            preferred_auth="publickey",
            gss_auth=False,
            gss_kex=False,
            connect_timeout=opts.connect_timeout,
            login_timeout=opts.login_timeout,
            keepalive_interval=_KEEPALIVE_INTERVAL,
            keepalive_count_max=_KEEPALIVE_COUNT_MAX,
        )
    except asyncssh.HostKeyNotVerifiable:
        if client and client[-1].mismatch is not None:
            raise client[-1].mismatch from None
        raise
    try:
        first_use = client[-1].unpinned if client else None
        if first_use is not None:  # proved by the finished handshake: pin it now
            await asyncio.to_thread(store.check_or_pin, alias, first_use, what=what)
        yield conn
    finally:
        conn.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(conn.wait_closed(), 5)


async def run(
    conn: asyncssh.SSHClientConnection,
    command: str,
    log: WorkerLog | None,
    *,
    timeout: float,
    stdin: bytes = b"",
    capture: bool = False,
    capture_limit: int = 1 << 20,
) -> tuple[int | None, bytes]:
    """Run ``command``; stream stdout+stderr into ``log`` (or, with ``capture``, return it
    instead, up to ``capture_limit`` bytes). ``stdin`` is written and closed. Returns the exit
    status (None when killed by a signal) and the captured bytes. TimeoutError on timeout."""
    captured = bytearray()
    process = await conn.create_process(command, stderr=asyncssh.STDOUT, encoding=None)
    try:
        async with asyncio.timeout(timeout):
            if stdin:
                process.stdin.write(stdin)
            process.stdin.write_eof()
            while chunk := await process.stdout.read(_READ_CHUNK):
                if capture:
                    captured += chunk[: max(capture_limit - len(captured), 0)]
                elif log is not None:
                    log.write(chunk)
            completed = await process.wait()
    except TimeoutError:
        with contextlib.suppress(Exception):  # OpenSSH delivers it to the session's process
            process.terminate()
        raise
    finally:
        process.close()
        if log is not None:
            log.flush_line()
    status = completed.exit_status
    if status is None and completed.exit_signal:
        signal_name = completed.exit_signal[0]
        if log is not None:
            log.note(f"killed by signal {signal_name}")
    return status, bytes(captured)


async def run_checked(
    conn: asyncssh.SSHClientConnection,
    command: str,
    log: WorkerLog,
    *,
    what: str,
    label: str,
    worker: int,
    timeout: float,
    stdin: bytes = b"",
) -> None:
    """``run`` whose timeout or non-zero exit raises RemoteCommandFailed (with the tail)."""
    try:
        status, _ = await run(conn, command, log, timeout=timeout, stdin=stdin)
    except TimeoutError:
        raise RemoteCommandFailed(
            f"{what}: {label} timed out after {timeout:g}s",
            exit_status=None,
            worker=worker,
            log_tail=log.tail(),
        ) from None
    log.note(f"{label} exited {status}")
    if status != 0:
        raise RemoteCommandFailed(
            f"{what}: {label} exited {status}",
            exit_status=status,
            worker=worker,
            log_tail=log.tail(),
        )


def describe(worker: Worker, instance: str) -> str:
    return f"worker {worker.index} of {instance} ({worker.host}:{worker.port})"


async def guarded(
    worker: Worker,
    log_dir: Path,
    what: str,
    body: Callable[[WorkerLog], Awaitable[WorkerResult]],
    *,
    redact: bytes = b"",
) -> WorkerResult:
    """Open the worker's log, run ``body`` with it, and turn every expected failure into a
    failed WorkerResult (asyncssh / OS / timeout errors translated; ``redact`` scrubbed from
    the log and from error texts)."""
    try:
        log = WorkerLog(log_dir, worker.index, tail_lines=TAIL_LINES, redact=redact)
    except OSError as exc:
        error = SetupFailed(f"{what}: cannot open its log: {exc.strerror}", worker=worker.index)
        return WorkerResult(worker.index, False, None, log_path(log_dir, worker.index), "", error)
    try:
        return await body(log)
    except ReconcilerError as exc:
        failure: ReconcilerError = exc
        if not isinstance(exc, SetupFailed):
            with contextlib.suppress(OSError):
                log.note(f"error: {exc}")
    except (asyncssh.Error, OSError, TimeoutError) as exc:
        failure = translate(exc, what, worker=worker.index, log=log)
    finally:
        with contextlib.suppress(OSError):
            log.close()
    status = failure.exit_status if isinstance(failure, RemoteCommandFailed) else None
    return WorkerResult(
        worker.index, False, status, log.path, log.tail(), scrubbed(failure, redact)
    )


def scrubbed(error: ReconcilerError, secret: bytes) -> ReconcilerError:
    """The error, or a SetupFailed without ``secret`` should its text somehow contain it."""
    text = secret.decode("ascii", "replace")
    tail = error.log_tail if isinstance(error, SetupFailed) else ""
    if not text or (text not in str(error) and text not in tail):
        return error
    return SetupFailed(
        str(error).replace(text, "***"),
        worker=error.worker if isinstance(error, SetupFailed) else None,
        log_tail=tail.replace(text, "***"),
    )


async def fan_out(items: Sequence[T], job: Callable[[T], Awaitable[R]]) -> list[R | BaseException]:
    """``job`` for every item concurrently; an exception in one never cancels the others."""
    return list(await asyncio.gather(*(job(i) for i in items), return_exceptions=True))
