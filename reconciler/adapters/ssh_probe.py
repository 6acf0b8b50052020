"""``doctor``'s look at SSH: can the key be loaded, and does one worker accept it?

``inspect_key`` says whether the private key SSH would use exists, loads, or has a passphrase
(then only an agent can use it). ``try_login`` logs in to one worker exactly as the controller
does (``ssh_session.connect``: the caller's key and agent only, host keys checked against the
state directory's pins) and runs ``true``. It pins nothing: a worker not pinned yet is checked
by the finished handshake alone and its key is not written (doctor writes nothing).

May: read the key, open one SSH connection. May not: write anything (no pin, no log), print,
or let an asyncssh / OS exception escape (they become ``SetupFailed``, ``HostKeyMismatch`` or
``NoMachine``). asyncssh is imported only when a function here runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reconciler.adapters.hostkeys import HostKey, HostKeyStore
from reconciler.adapters.ssh_values import SshOptions, Worker


@dataclass(frozen=True, slots=True)
class KeyState:
    exists: bool
    encrypted: bool = False
    public: bool = False
    problem: str | None = None


def inspect_key(path: Path) -> KeyState:
    """What ``path`` is as an SSH private key (nothing of it is kept)."""
    import asyncssh

    public = path.with_name(path.name + ".pub").is_file()
    if not path.exists():
        return KeyState(False, public=public)
    try:
        loaded = asyncssh.load_keypairs([str(path)], ignore_encrypted=True)
    except (asyncssh.KeyImportError, ValueError) as exc:
        return KeyState(True, public=public, problem=str(exc) or type(exc).__name__)
    except OSError as exc:
        return KeyState(True, public=public, problem=exc.strerror or str(exc))
    return KeyState(True, encrypted=not loaded, public=public)


class _VerifyOnly(HostKeyStore):
    """The state directory's pins, checked, never added to."""

    def check_or_pin(self, alias: str, key: HostKey, *, what: str = "") -> bool:
        return self.verify(alias, key, what=what)


async def try_login(
    instance: str,
    worker: Worker,
    *,
    user: str,
    key_path: Path,
    agent_path: str | None,
    known_hosts: Path,
    timeout: float,
) -> None:
    """Log in to ``worker`` of node ``instance`` (``name@uid``) and run ``true``; raises the
    controller's own errors (``SetupFailed`` with the reason, ``HostKeyMismatch``,
    ``NoMachine`` for a documentation address) when that is not possible."""
    import asyncssh

    from reconciler.adapters.ssh_session import (
        connect,
        describe,
        load_client_keys,
        run,
        translate,
    )
    from reconciler.errors import SetupFailed

    opts = SshOptions(
        user=user,
        known_hosts=_VerifyOnly(known_hosts),
        key_path=key_path,
        agent_path=agent_path,
        connect_timeout=timeout,
        login_timeout=timeout,
    )
    keys = load_client_keys(opts)
    what = describe(worker, instance)
    try:
        async with connect(instance, worker, opts, keys) as conn:
            status, _ = await run(conn, "true", None, timeout=timeout)
    except (asyncssh.Error, OSError, TimeoutError) as exc:
        raise translate(exc, what, worker=worker.index, log=None) from None
    if status != 0:
        raise SetupFailed(f"{what}: `true` exited {status}", worker=worker.index)
