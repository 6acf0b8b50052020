"""Join a node's workers to a tailnet over SSH, the auth key travelling on stdin only.

Per worker: ``tailscale status --json`` first; a worker whose ``BackendState`` is ``Running``
(or ``Starting``) is left alone (``changed=False``). Otherwise::

    tailscale up --auth-key=file:/dev/stdin --hostname=<name> --timeout=<n>s

(through ``sudo -n`` unless the SSH user is root) with the key written to the channel's stdin
and closed: the real CLI reads ``file:`` values with ``os.ReadFile`` and trims them
(``cmd/tailscale/cli/up.go``), so the key is on no command line, local or remote. It also
never reaches a log or an exception text: the worker log redacts it should the remote side
ever echo it, and ``Secret`` hides it from ``repr``. The hostname is the slot name for worker 0
and ``<slot>-w<N>`` for the others (validated, at most 63 characters).

Installing tailscale is left to the bootstrap scripts: a worker without it fails with a clear
message. Logs go to the same ``worker-<N>.log`` as the bootstrap.

May: run ``tailscale status`` / ``tailscale up`` on the given workers through ``ssh_session``.
May not: pass the key anywhere but stdin, print, or raise for a worker (results per worker).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from reconciler.adapters.secrets import TAILSCALE, Secret, SecretStore
from reconciler.adapters.ssh_values import SetupResult, SshOptions, Worker, WorkerResult
from reconciler.errors import SecretNotFound, SetupFailed
from reconciler.model.names import check_name, host_key_alias

if TYPE_CHECKING:
    from reconciler.adapters.ssh_log import WorkerLog
    from reconciler.adapters.ssh_session import ClientKeys

JOINED_STATES: Final = frozenset({"Running", "Starting"})
_NOT_FOUND: Final = 127


def hostname_for(slot: str, worker: int) -> str:
    """``slot`` for worker 0, ``slot-wN`` for the others, cut to a 63-character DNS label."""
    check_name(slot)
    if worker == 0:
        return slot
    suffix = f"-w{int(worker)}"
    return check_name(slot[: 63 - len(suffix)].rstrip("-") + suffix)


def up_command(hostname: str, *, timeout: float) -> str:
    """The remote command line (sudo unless already root). No secret in it: the key is read
    from stdin."""
    seconds = max(1, math.ceil(timeout))
    up = f"tailscale up --auth-key=file:/dev/stdin --hostname={check_name(hostname)}"
    up += f" --timeout={seconds}s"
    return f'if [ "$(id -u)" -eq 0 ]; then exec {up}; else exec sudo -n {up}; fi'


def auth_key(store: SecretStore) -> Secret:
    """The stored Tailscale key, or SetupFailed telling the user how to store one."""
    try:
        return store.get(TAILSCALE)
    except SecretNotFound:
        raise SetupFailed(
            "no Tailscale auth key stored: run `tpu-reconciler secret set tailscale`"
        ) from None
    except PermissionError as exc:
        raise SetupFailed(str(exc)) from None


def backend_state(status_json: bytes) -> str | None:
    """``BackendState`` of ``tailscale status --json`` output, None when unreadable."""
    try:
        doc = json.loads(status_json)
    except ValueError:
        return None
    state = doc.get("BackendState") if isinstance(doc, dict) else None
    return state if isinstance(state, str) else None


async def join(
    instance: str,
    workers: Sequence[Worker],
    key: Secret,
    *,
    hostname: str,
    log_dir: Path,
    opts: SshOptions,
) -> SetupResult:
    """Join every worker in ``workers`` (pass ``workers[:1]`` for worker 0 only); ``hostname``
    is the slot name (see ``hostname_for``)."""
    from reconciler.adapters import ssh_run, ssh_session

    slot = hostname
    for w in workers:
        hostname_for(slot, w.index)  # every name validated before anything connects
    host_key_alias(instance, 0)
    keys = ssh_session.load_client_keys(opts)
    slots = asyncio.Semaphore(opts.concurrency)
    secret = key.reveal()

    async def one(worker: Worker) -> WorkerResult:
        body = functools.partial(_join_one, instance, slot, worker, secret, opts, keys, slots)
        what = ssh_session.describe(worker, instance)
        return await ssh_session.guarded(worker, log_dir, what, body, redact=secret)

    outcomes = await ssh_session.fan_out(workers, one)
    return SetupResult(instance, ssh_run.collect(instance, workers, outcomes, log_dir))


async def _join_one(
    instance: str,
    slot: str,
    worker: Worker,
    secret: bytes,
    opts: SshOptions,
    keys: ClientKeys,
    slots: asyncio.Semaphore,
    log: WorkerLog,
) -> WorkerResult:
    from reconciler.adapters import ssh_session

    what = ssh_session.describe(worker, instance)
    hostname = hostname_for(slot, worker.index)
    log.note(f"tailscale join {what} as {opts.user}, hostname {hostname}")
    async with contextlib.AsyncExitStack() as stack:
        async with slots:
            conn = await stack.enter_async_context(
                ssh_session.connect(instance, worker, opts, keys)
            )
        status, out = await ssh_session.run(
            conn, "tailscale status --json", log, timeout=opts.login_timeout, capture=True
        )
        if status == _NOT_FOUND:
            raise SetupFailed(
                f"{what}: tailscale is not installed (install it in a bootstrap script)",
                worker=worker.index,
                log_tail=log.tail(),
            )
        state = backend_state(out)
        log.note(f"tailscale status: exit {status}, BackendState {state or 'unknown'}")
        if state in JOINED_STATES:
            log.note("already on the tailnet: left alone")
            return WorkerResult(worker.index, True, 0, log.path, log.tail(), changed=False)
        command = up_command(hostname, timeout=opts.script_timeout)
        log.note(f"running: {command}  (auth key on stdin)")
        await ssh_session.run_checked(
            conn,
            command,
            log,
            what=what,
            label="tailscale up",
            worker=worker.index,
            timeout=opts.script_timeout + 10,
            stdin=secret + b"\n",
        )
    return WorkerResult(worker.index, True, 0, log.path, log.tail())
