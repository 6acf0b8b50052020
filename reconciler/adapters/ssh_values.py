"""SSH value types: workers, options and per-worker results (no I/O, no asyncssh).

Their own module so ``ssh`` (the public surface), ``ssh_run`` and ``ssh_session`` (the asyncssh
edge) all import them from below instead of from each other. ``ssh`` re-exports them.

``check_dialable`` (an emulated node's documentation address is refused before anything
dials) is here for the same reason: ``ssh`` and ``ssh_session`` both call it.

May: validate values. May not: connect, read files, or import asyncssh.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from reconciler.adapters.hostkeys import HostKeyStore
from reconciler.adapters.ssh_proxy import Hop
from reconciler.errors import HostKeyMismatch, NoMachine, ReconcilerError, SetupFailed, UnsafeName
from reconciler.model.addresses import is_documentation_address
from reconciler.model.names import check_user

#: Lines of each worker's log kept in its result.
TAIL_LINES: Final = 20
DEFAULT_KEY: Final = Path("~/.ssh/google_compute_engine")


@dataclass(frozen=True, slots=True)
class Worker:
    """One SSH host of a node: ``index`` as in ``networkEndpoints[]`` (worker 0 first);
    ``hop`` how it is reached when not dialled directly (``adapters/ssh_proxy.py``)."""

    index: int
    host: str
    port: int = 22
    hop: Hop | None = None

    def __post_init__(self) -> None:
        if isinstance(self.index, bool) or not isinstance(self.index, int) or self.index < 0:
            raise UnsafeName(f"invalid worker index {self.index!r}")
        try:
            host = str(ipaddress.ip_address(self.host))
        except ValueError:
            raise UnsafeName(f"invalid worker address {self.host!r}: expected an IP") from None
        object.__setattr__(self, "host", host)
        if isinstance(self.port, bool) or not isinstance(self.port, int):
            raise UnsafeName(f"invalid SSH port {self.port!r}")
        if not 0 < self.port < 65536:
            raise UnsafeName(f"invalid SSH port {self.port!r}")


def workers_of(ips: Sequence[str], *, port: int = 22) -> tuple[Worker, ...]:
    """Workers from ``Node.ips()`` (one address per worker, worker 0 first)."""
    return tuple(Worker(i, ip, port) for i, ip in enumerate(ips))


def _positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class SshOptions:
    """How to reach workers. Everything is explicit; nothing comes from ~/.ssh or the env."""

    user: str
    known_hosts: HostKeyStore
    key_path: Path = DEFAULT_KEY
    agent_path: str | None = None  # an ssh-agent socket: used for auth and forwarded
    connect_timeout: float = 15.0
    login_timeout: float = 30.0
    script_timeout: float = 1800.0
    concurrency: int = 32

    def __post_init__(self) -> None:
        check_user(self.user)
        if not isinstance(self.known_hosts, HostKeyStore):
            raise TypeError("known_hosts must be a HostKeyStore (host checking is never off)")
        object.__setattr__(self, "key_path", Path(self.key_path).expanduser())
        if self.agent_path is not None and (
            not self.agent_path or "\0" in self.agent_path or not self.agent_path.startswith("/")
        ):
            raise UnsafeName(f"invalid agent socket path {self.agent_path!r}")
        for name in ("connect_timeout", "login_timeout", "script_timeout"):
            _positive(name, getattr(self, name))
        if isinstance(self.concurrency, bool) or not isinstance(self.concurrency, int):
            raise ValueError("concurrency must be an integer")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {self.concurrency}")


@dataclass(frozen=True, slots=True)
class WorkerResult:
    """What one worker did. ``changed`` is False when there was nothing to do (e.g. a node
    already on the tailnet). ``error`` is the SetupFailed / HostKeyMismatch behind a failure."""

    index: int
    ok: bool
    exit_status: int | None
    log_path: Path
    tail: str = ""
    error: ReconcilerError | None = None
    changed: bool = True


@dataclass(frozen=True, slots=True)
class SetupResult:
    """Per-worker results of one setup step on one node instance, worker 0 first."""

    instance: str
    workers: tuple[WorkerResult, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(w.ok for w in self.workers)

    @property
    def failed(self) -> tuple[WorkerResult, ...]:
        return tuple(w for w in self.workers if not w.ok)

    def raise_for_failure(self) -> None:
        """Raise the most serious failure: a HostKeyMismatch (permanent) before a SetupFailed
        (temporary, carrying the worker index and log tail). Nothing when all went well."""
        errors = [w.error for w in self.failed if w.error is not None]
        for error in errors:
            if isinstance(error, HostKeyMismatch):
                raise error
        if errors:
            raise errors[0]
        if self.failed:  # pragma: no cover - every failed result carries its error
            raise SetupFailed(f"setup failed on {self.instance}")


def check_dialable(what: str, addresses: Iterable[str]) -> None:
    """Raise ``NoMachine`` when one of ``addresses`` is from a documentation range (RFC 5737:
    an emulated node's): nothing answers there, so saying so beats dialling and waiting for a
    timeout. ``what`` names the slot (or node) in the message. Called before anything dials,
    and before the OS Login user is looked up for it."""
    for address in addresses:
        if is_documentation_address(address):
            raise NoMachine(
                f"{what}: {address} is an emulated node's address (a documentation range): "
                "no machine stands behind it"
            )
