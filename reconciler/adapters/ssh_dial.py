"""One pinned, authenticated asyncssh connection: the handshake every SSH use shares.

``dial(host, port, alias=..., ...)`` connects with everything explicit: ``config=None`` (no
~/.ssh/config), the caller's key and agent socket only (never ``SSH_AUTH_SOCK`` or default
identities), host keys from a ``HostKeyStore`` under ``alias``. A key seen for the first time is
pinned only *after* the server proved it holds it (the handshake finished); a different key
for a pinned alias is refused (``HostKeyMismatch``). Host algorithms are offered with the
pinned ones first, then in OpenSSH's order (ed25519 first), so a server that now shows another
key type is a mismatch, not a negotiation failure. ``via`` is how the bytes get there (the
keyword arguments ``ssh_hops.route`` gives: a socket to a proxy command, a jump host's
connection), never how the server is trusted: a worker is pinned under its own alias whatever
carries its stream. Workers (``ssh_session.connect``) and jump hosts (``ssh_hops``) both dial
here.

May: open an SSH connection, pin a proved key. May not: print, or translate exceptions (the
caller knows the log and the words).
"""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import asyncssh

from reconciler.adapters.hostkeys import HostKey, HostKeyStore
from reconciler.adapters.ssh_values import SshOptions
from reconciler.errors import HostKeyMismatch, ReconcilerError, SetupFailed

_KEEPALIVE_INTERVAL: Final = 30.0
_KEEPALIVE_COUNT_MAX: Final = 4
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


def reason(exc: BaseException) -> str:
    """Why a connection failed, in a few words (an asyncssh / OS / timeout exception)."""
    if isinstance(exc, asyncssh.PermissionDenied):
        return "authentication refused (check the user, the key and OS Login access)"
    if isinstance(exc, asyncssh.Error):
        return f"{type(exc).__name__}: {exc.reason}"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, OSError):  # asyncio says "Connect call failed (addr)": say the errno's
        return (os.strerror(exc.errno) if exc.errno else exc.strerror) or str(exc) or "OSError"
    return f"{type(exc).__name__}: {exc}"


async def dial(
    host: str,
    port: int,
    *,
    alias: str,
    what: str,
    opts: SshOptions,
    keys: ClientKeys,
    forward_agent: bool,
    via: Mapping[str, Any] | None = None,
) -> asyncssh.SSHClientConnection:
    """An authenticated connection to ``host``:``port`` whose host key matches (or now is)
    the pin for ``alias``. Raises HostKeyMismatch, or the raw exception for the caller to
    translate. ``forward_agent``: offer the agent to the server (workers, never a jump host)."""
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
    client: list[_PinningClient] = []

    def factory() -> _PinningClient:
        client.append(_PinningClient(store, alias, what))
        return client[-1]

    try:
        conn = await asyncssh.connect(
            host,
            port,
            **dict(via or {}),
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
            agent_forwarding=forward_agent and opts.agent_path is not None,
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
    except BaseException:
        conn.close()
        raise
    return conn
