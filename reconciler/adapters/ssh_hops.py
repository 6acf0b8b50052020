"""The way to a worker behind a proxy: a proxy command's process, or a shared jump connection.

``route(worker, opts, keys)`` is an async context manager giving a ``Route``: the keyword
arguments of ``asyncssh.connect`` that carry the SSH stream to the worker, and ``why()``, what
the proxy said when that failed.

- A direct worker: nothing (asyncssh dials ``host:port``).
- ``CommandHop`` (``iap``, a ``command``): the argument list runs as its own session
  (``start_new_session``; never through a shell) with one end of a socket pair as its stdin and
  stdout, the other end handed to asyncssh as ``sock=`` — what OpenSSH's ProxyCommand does with
  its pipes. Its stderr is kept (the last ``_STDERR_KEPT`` bytes): "exited 1: ERROR: ... 4033
  not authorized" says why a tunnel failed. Leaving the context closes the socket (the proxy
  reads end of file) and ends the process: SIGTERM after ``_EXIT_GRACE`` seconds, SIGKILL
  after as many again. asyncssh's own ``proxy_command`` (an argv list run as is, a string split
  with ``shlex``, no ``%`` expansion either way) is not used: it lets stderr through to ours
  and says only "connection lost".
- ``JumpHop``: ``tunnel=`` an SSH connection to the jump host (``ssh_dial.dial``: its key
  pinned under ``ssh_proxy.jump_alias``, the agent never forwarded to it), through which asyncssh
  opens a ``direct-tcpip`` channel to the worker. One connection per jump host (and user, key,
  agent, pins) is shared by every worker behind it while any uses it (a 64-worker slice makes
  one login to the bastion, not 64 that its sshd ``MaxStartups`` would drop), reopened when it
  has died, closed when the last user leaves.

May: start and end proxy processes, open SSH connections to jump hosts. May not: print, pin a
worker's key (``ssh_dial`` does, under the worker's own alias), or keep anything beyond the
jump connections in use.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

import asyncssh

from reconciler.adapters.ssh_dial import ClientKeys, dial, reason
from reconciler.adapters.ssh_proxy import CommandHop, JumpHop, jump_alias
from reconciler.adapters.ssh_values import SshOptions, Worker
from reconciler.errors import SetupFailed

_STDERR_KEPT: Final = 4096
_EXIT_GRACE: Final = 2.0
_WHY_WAIT: Final = 1.0


async def _nothing() -> str:
    return ""


@dataclass(frozen=True, slots=True)
class Route:
    """``via``: ``asyncssh.connect`` arguments; ``why()``: the proxy's last words, or ""."""

    via: dict[str, Any] = field(default_factory=dict)
    why: Callable[[], Awaitable[str]] = _nothing


class _Proxy:
    """A running proxy command and the end of its stderr."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.stderr = b""
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        stream = self.proc.stderr
        assert stream is not None
        while chunk := await stream.read(4096):
            self.stderr = (self.stderr + chunk)[-_STDERR_KEPT:]

    async def why(self) -> str:
        """How the proxy ended (waiting up to ``_WHY_WAIT`` for it), or "" while it runs."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_WHY_WAIT):
                await self.proc.wait()
                await self._reader
        code = self.proc.returncode
        if code is None:
            return ""
        text = self.stderr.decode("utf-8", "replace").strip().splitlines()
        said = " / ".join(line.strip() for line in text[-3:] if line.strip())
        return f"exited {code}" + (f": {said}" if said else " (it said nothing)")

    async def end(self) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_EXIT_GRACE):
                await self.proc.wait()
        for stop in (self.proc.terminate, self.proc.kill):
            if self.proc.returncode is not None:
                break
            with contextlib.suppress(ProcessLookupError):
                stop()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_EXIT_GRACE):
                    await self.proc.wait()
        self._reader.cancel()
        with contextlib.suppress(BaseException):
            await self._reader


@contextlib.asynccontextmanager
async def _command(hop: CommandHop) -> AsyncIterator[Route]:
    ours, theirs = socket.socketpair()
    try:
        proc = await asyncio.create_subprocess_exec(
            *hop.argv,
            stdin=theirs.fileno(),
            stdout=theirs.fileno(),
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        ours.close()
        raise SetupFailed(
            f"cannot run the proxy command {hop.argv[0]!r} ({hop.label}): {exc.strerror or exc}"
        ) from None
    finally:
        theirs.close()
    proxy = _Proxy(proc)
    try:
        yield Route({"sock": ours}, proxy.why)
    finally:
        with contextlib.suppress(OSError):
            ours.close()  # asyncssh closed it with the connection, or never took it
        await proxy.end()


# --- shared jump connections -------------------------------------------------------------------

_JumpKey = tuple[str, int, str, Path, str | None, Path]


@dataclass(slots=True)
class _Jump:
    conn: asyncssh.SSHClientConnection | None = None
    users: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


_jumps: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[_JumpKey, _Jump]] = (
    weakref.WeakKeyDictionary()
)


def _jump_table() -> dict[_JumpKey, _Jump]:
    return _jumps.setdefault(asyncio.get_running_loop(), {})


@contextlib.asynccontextmanager
async def _jump(hop: JumpHop, opts: SshOptions, keys: ClientKeys) -> AsyncIterator[Route]:
    user = hop.user or opts.user
    key: _JumpKey = (
        hop.host,
        hop.port,
        user,
        opts.key_path,
        opts.agent_path,
        opts.known_hosts.path,
    )
    table = _jump_table()
    entry = table.setdefault(key, _Jump())
    entry.users += 1
    try:
        async with entry.lock:
            if entry.conn is None or entry.conn.is_closed():
                what = f"jump host {user}@{hop.host}:{hop.port}"
                try:
                    entry.conn = await dial(
                        hop.host,
                        hop.port,
                        alias=jump_alias(hop),
                        what=what,
                        opts=replace(opts, user=user),
                        keys=keys,
                        forward_agent=False,
                    )
                except (asyncssh.Error, OSError, TimeoutError) as exc:
                    raise SetupFailed(f"{what}: {reason(exc)}") from None
            conn = entry.conn
        yield Route({"tunnel": conn})
    finally:
        entry.users -= 1
        if entry.users == 0:
            table.pop(key, None)
            if entry.conn is not None:
                entry.conn.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(entry.conn.wait_closed(), 5)


@contextlib.asynccontextmanager
async def route(worker: Worker, opts: SshOptions, keys: ClientKeys) -> AsyncIterator[Route]:
    """The way to ``worker`` (see the module docstring); SetupFailed when it cannot be opened
    (a proxy program that cannot start, a jump host that refuses)."""
    hop = worker.hop
    if hop is None:
        yield Route()
    elif isinstance(hop, JumpHop):
        async with _jump(hop, opts, keys) as way:
            yield way
    else:
        async with _command(hop) as way:
            yield way
