"""The bootstrap of one node, worker by worker (behind ``ssh.bootstrap``).

Per worker: connect (pinned host key), create ``~/.tpu-reconciler`` (0700, refused when it is
a symlink) and a fresh ``run-<random>`` directory in it by SFTP, upload the scripts (0700),
run them in order with output streamed into the worker's log, stop at the first failure,
remove the run directory. Only connecting and uploading hold a place in the concurrency bound.

May: everything ``ssh_session`` may. May not: raise for a worker (each ends as a
``WorkerResult``), or keep anything between calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import posixpath
import secrets
import shlex
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import asyncssh

from reconciler.adapters.ssh_log import WorkerLog, log_path
from reconciler.adapters.ssh_session import (
    ClientKeys,
    connect,
    describe,
    fan_out,
    guarded,
    load_client_keys,
    run_checked,
)
from reconciler.adapters.ssh_values import SetupResult, SshOptions, Worker, WorkerResult
from reconciler.errors import SetupFailed

REMOTE_DIR: Final = ".tpu-reconciler"
_CLEANUP_TIMEOUT: Final = 10.0


async def _private_dir(sftp: asyncssh.SFTPClient, path: str) -> None:
    try:
        await sftp.mkdir(path, asyncssh.SFTPAttrs(permissions=0o700))
        return
    except asyncssh.SFTPError:
        pass  # exists (OpenSSH answers a plain failure), or cannot be made: look
    attrs = await sftp.lstat(path)
    mode = attrs.permissions or 0
    if not stat.S_ISDIR(mode):
        raise SetupFailed(f"remote {path} exists and is not a directory (or is a symlink)")
    if mode & 0o077:
        await sftp.chmod(path, 0o700)


async def upload(
    sftp: asyncssh.SFTPClient, payloads: Sequence[tuple[str, bytes]]
) -> tuple[str, tuple[str, ...]]:
    """Upload into a fresh private run directory; returns it and the remote script paths."""
    home = await sftp.realpath(".")
    base = posixpath.join(home, REMOTE_DIR)
    await _private_dir(sftp, base)
    run_dir = posixpath.join(base, f"run-{secrets.token_hex(8)}")
    await sftp.mkdir(run_dir, asyncssh.SFTPAttrs(permissions=0o700))
    paths = []
    for name, data in payloads:
        remote = posixpath.join(run_dir, name)
        async with sftp.open(remote, "wb", asyncssh.SFTPAttrs(permissions=0o700)) as f:
            await f.write(data)
        await sftp.chmod(remote, 0o700)
        paths.append(remote)
    return run_dir, tuple(paths)


def script_command(worker: Worker, remote_path: str) -> str:
    return f"TPU_RECONCILER_WORKER={int(worker.index)} exec {shlex.quote(remote_path)}"


async def _one(
    instance: str,
    worker: Worker,
    payloads: Sequence[tuple[str, bytes]],
    opts: SshOptions,
    keys: ClientKeys,
    slots: asyncio.Semaphore,
    log: WorkerLog,
) -> WorkerResult:
    what = describe(worker, instance)
    log.note(f"bootstrap {what} as {opts.user}: {len(payloads)} script(s)")
    async with contextlib.AsyncExitStack() as stack:
        async with slots:
            conn = await stack.enter_async_context(connect(instance, worker, opts, keys))
            async with asyncio.timeout(opts.login_timeout):
                sftp = await stack.enter_async_context(conn.start_sftp_client())
                run_dir, remote = await upload(sftp, payloads)
        try:
            for position, ((name, _), path) in enumerate(zip(payloads, remote, strict=True)):
                label = f"[{position + 1}/{len(payloads)}] {name}"
                log.note(label)
                await run_checked(
                    conn,
                    script_command(worker, path),
                    log,
                    what=what,
                    label=label,
                    worker=worker.index,
                    timeout=opts.script_timeout,
                )
        finally:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(_CLEANUP_TIMEOUT):
                    await sftp.rmtree(run_dir)
    log.note("bootstrap done")
    return WorkerResult(worker.index, True, 0, log.path, log.tail())


async def bootstrap(
    instance: str,
    workers: Sequence[Worker],
    payloads: Sequence[tuple[str, bytes]],
    log_dir: Path,
    opts: SshOptions,
) -> SetupResult:
    keys = load_client_keys(opts)
    slots = asyncio.Semaphore(opts.concurrency)

    async def one(worker: Worker) -> WorkerResult:
        return await guarded(
            worker,
            log_dir,
            describe(worker, instance),
            functools.partial(_one, instance, worker, payloads, opts, keys, slots),
        )

    outcomes = await fan_out(workers, one)
    return SetupResult(instance, collect(instance, workers, outcomes, log_dir))


def collect(
    instance: str,
    workers: Sequence[Worker],
    outcomes: Sequence[WorkerResult | BaseException],
    log_dir: Path,
) -> tuple[WorkerResult, ...]:
    """Results in worker order; an unexpected exception becomes that worker's failure."""
    results = []
    for worker, outcome in zip(workers, outcomes, strict=True):
        if isinstance(outcome, WorkerResult):
            results.append(outcome)
            continue
        if isinstance(outcome, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
            raise outcome
        error = SetupFailed(
            f"worker {worker.index} of {instance}: unexpected {type(outcome).__name__}",
            worker=worker.index,
        )
        results.append(
            WorkerResult(worker.index, False, None, log_path(log_dir, worker.index), "", error)
        )
    return tuple(sorted(results, key=lambda r: r.index))
