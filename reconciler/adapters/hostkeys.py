"""Trust-on-first-use SSH host keys, pinned per node *instance* and worker.

The pins live in the state directory's ``known_hosts`` in OpenSSH's own format, one line per
worker: ``<alias> <keytype> <base64>``, where the alias is
``names.host_key_alias(instance, worker)`` (``tpu.<node>.<uid tag>.w<N>``). OpenSSH reads the
same file (``ssh -o HostKeyAlias=<alias> -o UserKnownHostsFile=<file>
-o StrictHostKeyChecking=yes``), so the tmux windows and the asyncssh bootstrap trust exactly
the same keys. With ``HostKeyAlias`` OpenSSH looks the alias up without a ``[host]:port``
decoration, whatever the port. Hashed lines that OpenSSH may have appended itself
(``HashKnownHosts yes``, ``|1|salt|hash``) are matched too, and every line this module does not
understand is kept verbatim.

A re-created node has a new instance and so a new alias and a fresh first use; a changed key
for the *same* alias is refused with ``HostKeyMismatch``. ``forget(instance)`` drops a node's
lines once it is gone. Host checking is never switched off.

The file is believed only when the state directory's owner (the controller's user), root or
the reader owns it (``adapters/owned_files``, ``model/trust``): in a lab's group-writable
directory a member could otherwise replace it and have the controller trust their machine;
such a file raises ``UntrustedHostKeys`` and nothing is dialled. A lab member's own process
reads the controller's pins but never writes them.

May: read and atomically rewrite one known_hosts file; hold an flock on its directory (and a
thread lock) while doing so, so concurrent workers of one bootstrap — or two processes — never
lose each other's pins. May not: import asyncssh (callers convert keys to ``keytype base64``
text), talk to the network, or write anywhere but the file it was given.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import hashlib
import hmac
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from reconciler.adapters.files import atomic_write, is_read_shared_dir, is_shared_dir
from reconciler.adapters.owned_files import read_owned
from reconciler.errors import HostKeyMismatch, UnsafeName, UntrustedHostKeys
from reconciler.model.names import host_key_alias

_KEY_TYPE_RE: Final = re.compile(r"^[a-z0-9][a-z0-9@._+-]{0,63}$")
_BASE64_RE: Final = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")
#: A worker's alias (``names.host_key_alias``) or a jump host's (``ssh_proxy.jump_alias``).
_ALIAS_RE: Final = re.compile(
    r"^(?:tpu\.[a-z0-9-]+\.[a-z0-9]+\.w[0-9]+|jump\.[a-z0-9.-]+\.p[0-9]{1,5})$"
)
#: ``forget`` tries this many worker indexes against hashed lines (a v5p-1024 has 128 hosts).
_MAX_WORKERS: Final = 512

_thread_locks: dict[Path, threading.Lock] = {}
_thread_locks_guard = threading.Lock()


@dataclass(frozen=True, slots=True)
class HostKey:
    """One public host key: OpenSSH type name and base64 blob."""

    key_type: str
    base64: str

    def __post_init__(self) -> None:
        if not _KEY_TYPE_RE.fullmatch(self.key_type) or not _BASE64_RE.fullmatch(self.base64):
            raise UnsafeName(f"invalid host key {self.key_type!r}")

    @property
    def fingerprint(self) -> str:
        """``SHA256:...`` as ``ssh-keygen -l`` prints it."""
        blob = base64.b64decode(self.base64)
        digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
        return f"SHA256:{digest}"

    def __str__(self) -> str:
        return f"{self.key_type} {self.fingerprint}"


def _check_alias(alias: str) -> str:
    if not _ALIAS_RE.fullmatch(alias):
        raise UnsafeName(f"invalid host key alias {alias!r}")
    return alias


def _hashed_match(pattern: str, alias: str) -> bool:
    """OpenSSH's ``|1|base64(salt)|base64(HMAC-SHA1(salt, host))``."""
    parts = pattern.split("|")
    if len(parts) != 4 or parts[1] != "1":
        return False
    try:
        salt = base64.b64decode(parts[2], validate=True)
        want = base64.b64decode(parts[3], validate=True)
    except (binascii.Error, ValueError):
        return False
    return hmac.compare_digest(hmac.new(salt, alias.encode(), hashlib.sha1).digest(), want)


def _line_matches(line: str, alias: str) -> bool:
    fields = line.split()
    if not fields or fields[0].startswith("#") or fields[0].startswith("@"):
        return False
    return any(
        _hashed_match(p, alias) if p.startswith("|") else p == alias for p in fields[0].split(",")
    )


def _key_of(line: str) -> HostKey | None:
    fields = line.split()
    if len(fields) < 3:
        return None
    try:
        return HostKey(fields[1], fields[2])
    except UnsafeName:
        return None


def check_trusted(path: Path) -> None:
    """Raise ``UntrustedHostKeys`` when the known_hosts file at ``path`` is there but not one
    to believe (see the module docstring). For OpenSSH (the tmux windows, ``ssh``), which
    reads the file without asking whose it is."""
    try:
        owned = read_owned(path)
    except FileNotFoundError:
        return
    if owned.problem is not None:
        raise UntrustedHostKeys(owned.problem)


class HostKeyStore:
    """The pins in one known_hosts file (normally ``StateDir.known_hosts``)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"HostKeyStore({str(self.path)!r})"

    # --- reading --------------------------------------------------------------------------

    def _lines(self) -> list[str]:
        """The file's lines; ``UntrustedHostKeys`` when it is not the controller's (or the
        reader's) own file (``model/trust``): a lab member's known_hosts is never believed."""
        try:
            owned = read_owned(self.path)
        except FileNotFoundError:
            return []
        if owned.problem is not None:
            raise UntrustedHostKeys(owned.problem)
        return owned.content.decode("utf-8", errors="replace").splitlines()

    def _member_of_lab(self) -> bool:
        """Whether this process is a lab member other than the controller's user: it verifies
        against the controller's pins but never writes them (its new file would be its own,
        which the controller then refuses)."""
        directory = self.path.parent
        with contextlib.suppress(OSError):
            lab = is_shared_dir(directory) or is_read_shared_dir(directory)
            return lab and directory.stat().st_uid not in (os.geteuid(), 0)
        return False

    def pinned(self, alias: str) -> tuple[HostKey | None, ...]:
        """Every key pinned for ``alias``; ``None`` stands for a matching line that cannot be
        read, which still counts as a pin (fail closed: it is never silently replaced)."""
        _check_alias(alias)
        return tuple(_key_of(line) for line in self._lines() if _line_matches(line, alias))

    def aliases(self) -> tuple[str, ...]:
        """The plain (unhashed) aliases in the file, in file order."""
        out: list[str] = []
        for line in self._lines():
            fields = line.split()
            if fields and _ALIAS_RE.fullmatch(fields[0]) and fields[0] not in out:
                out.append(fields[0])
        return tuple(out)

    # --- writing --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        with _thread_locks_guard:
            lock = _thread_locks.setdefault(directory.resolve(), threading.Lock())
        with lock:
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # closing releases the flock

    def _verify(self, lines: list[str], alias: str, key: HostKey, what: str) -> bool:
        pinned = [_key_of(line) for line in lines if _line_matches(line, alias)]
        if key in pinned:
            return True
        if pinned:
            shown = ", ".join(str(k) if k else "an unreadable entry" for k in pinned)
            raise HostKeyMismatch(
                f"host key of {what or alias} changed: {self.path} pins {shown} for {alias}, "
                f"the host presented {key}. A re-created node gets a new alias, so this is the "
                "same node instance answering with another key — possibly an impostor. If the "
                f"change is expected, delete the {alias} line from {self.path}."
            )
        return False

    def verify(self, alias: str, key: HostKey, *, what: str = "") -> bool:
        """True when ``key`` is pinned for ``alias``, False when nothing is pinned yet (first
        use; nothing is written). Raises HostKeyMismatch when a different key is pinned.
        ``what`` names the host in the message (e.g. ``"worker 1 of node@1 (10.0.0.3:22)"``)."""
        return self._verify(self._lines(), _check_alias(alias), key, what)

    def check_or_pin(self, alias: str, key: HostKey, *, what: str = "") -> bool:
        """Like ``verify``, but pins ``key`` on first use (returning False). Call it only once
        the host has proved it holds the key (a finished handshake)."""
        _check_alias(alias)
        with self._locked():
            lines = self._lines()
            if self._verify(lines, alias, key, what):
                return True
            if self._member_of_lab():
                return False
            lines.append(f"{alias} {key.key_type} {key.base64}")
            atomic_write(self.path, "\n".join(lines) + "\n")
            return False

    def forget(self, instance: str) -> int:
        """Drop every pin of node ``instance`` (all workers). Returns the number of lines
        removed. Call it when the node is gone for good."""
        prefix = host_key_alias(instance, 0).removesuffix("0")
        candidates = [f"{prefix}{n}" for n in range(_MAX_WORKERS)]

        def belongs(line: str) -> bool:
            fields = line.split()
            if not fields or fields[0].startswith(("#", "@")):
                return False
            for pattern in fields[0].split(","):
                if pattern.startswith(prefix) and pattern[len(prefix) :].isdigit():
                    return True
                if pattern.startswith("|") and any(_hashed_match(pattern, c) for c in candidates):
                    return True
            return False

        with self._locked():
            lines = self._lines()
            kept = [line for line in lines if not belongs(line)]
            removed = len(lines) - len(kept)
            if removed and not self._member_of_lab():
                atomic_write(self.path, "".join(f"{line}\n" for line in kept))
            return removed
