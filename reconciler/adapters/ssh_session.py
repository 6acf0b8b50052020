"""The asyncssh edge: pinned connections, logged remote commands, bounded fan-out.

``connect`` opens one connection to one worker: the pinned handshake of ``ssh_dial`` (nothing
read from ~/.ssh or the environment; host keys from a ``HostKeyStore`` under the node
instance's alias, pinned on first use once proved, refused when changed), carried through the
worker's hop when its slot has an ``ssh_proxy`` (``ssh_hops.route``: a proxy command's stdin and
stdout, or a jump host's channel). The key stays pinned per worker whatever carries the stream.

Every asyncssh / OS / timeout exception is translated here into ``SetupFailed`` (with worker
index and the log tail) or ``HostKeyMismatch``.

May: open SSH connections and channels, pin keys. May not: print, log command output anywhere
but the ``WorkerLog`` it is given, or put a secret on a command line (secrets go to stdin).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Final, TypeVar

import asyncssh

from reconciler.adapters.ssh_dial import ClientKeys, dial, host_key, load_client_keys, reason
from reconciler.adapters.ssh_hops import route
from reconciler.adapters.ssh_log import WorkerLog, log_path
from reconciler.adapters.ssh_values import (
    TAIL_LINES,
    SshOptions,
    Worker,
    WorkerResult,
    check_dialable,
)
from reconciler.errors import ReconcilerError, RemoteCommandFailed, SetupFailed
from reconciler.model.names import host_key_alias

_READ_CHUNK: Final = 64 * 1024

T = TypeVar("T")
R = TypeVar("R")

__all__ = [
    "ClientKeys",
    "connect",
    "describe",
    "fan_out",
    "guarded",
    "host_key",
    "load_client_keys",
    "run",
    "run_checked",
    "scrubbed",
    "translate",
]


def translate(
    exc: BaseException, what: str, *, worker: int, log: WorkerLog | None
) -> ReconcilerError:
    """An asyncssh / OS / timeout exception as SetupFailed (ReconcilerErrors pass through)."""
    if isinstance(exc, ReconcilerError):
        return exc
    why = reason(exc)
    tail = log.tail() if log is not None else ""
    if log is not None:
        with contextlib.suppress(OSError):
            log.note(f"error: {why}")
    return SetupFailed(f"{what}: {why}", worker=worker, log_tail=tail)


@contextlib.asynccontextmanager
async def connect(
    instance: str, worker: Worker, opts: SshOptions, keys: ClientKeys
) -> AsyncIterator[asyncssh.SSHClientConnection]:
    """An authenticated connection whose host key matches (or now is) the pin for
    ``host_key_alias(instance, worker.index)``, through ``worker.hop`` when it has one
    (``ssh_hops.route``). Raises HostKeyMismatch, NoMachine (an emulated node's address:
    nothing is dialled), SetupFailed saying what the proxy said when the way through it
    failed, or the raw exception for the caller to ``translate`` (it knows the log)."""
    alias = host_key_alias(instance, worker.index)
    check_dialable(instance.partition("@")[0], (worker.host,))  # NoMachine: nothing answers
    what = describe(worker, instance)
    async with route(worker, opts, keys) as way:
        try:
            conn = await dial(
                worker.host,
                worker.port,
                alias=alias,
                what=what,
                opts=opts,
                keys=keys,
                forward_agent=True,
                via=way.via,
            )
        except (asyncssh.Error, OSError, TimeoutError) as exc:
            said = await way.why()
            if not said:
                raise
            assert worker.hop is not None
            raise SetupFailed(
                f"{what}: {reason(exc)}; the proxy ({worker.hop.label}) {said}",
                worker=worker.index,
            ) from None
        try:
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
    """``worker 1 of node@7 (10.0.0.3:22)``, with ``via iap`` (its hop) when it has one."""
    via = f" via {worker.hop.label}" if worker.hop is not None else ""
    return f"worker {worker.index} of {instance} ({worker.host}:{worker.port}{via})"


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
