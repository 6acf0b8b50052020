"""Secrets (the Tailscale auth key) in private files under the state directory.

Layout: ``<state dir>/secrets/`` is 0700 and holds one 0600 file per secret, named after it
(``secrets/tailscale``). A secret never appears in desired.yaml, a log, the event log, an argv
or an exception text: values are wrapped in ``Secret``, whose ``repr`` and ``str`` hide them,
and every message here names the secret, never its value.

May: create, read, list and delete files in one secrets directory (atomic writes, 0600), and
refuse to read a secret whose file others could read. May not: print, log, or pass a value
anywhere but to the caller who asked for it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Final

from reconciler.adapters.files import PRIVATE_FILE, atomic_write, ensure_private_dir
from reconciler.errors import SecretNotFound, SecretUnsafe
from reconciler.model.workload import SECRET_NAME_RE as _NAME_RE
from reconciler.model.workload import check_secret_name as check_secret_name

_MAX_BYTES: Final = 4096

#: The secret the Tailscale join reads.
TAILSCALE: Final = "tailscale"


class Secret:
    """A secret value that does not show itself: ``repr``/``str`` print ``Secret(name=***)``."""

    __slots__ = ("_value", "name")

    def __init__(self, name: str, value: bytes) -> None:
        self.name = name
        self._value = value

    def reveal(self) -> bytes:
        """The value; hand it straight to the one place that needs it (e.g. a stdin pipe)."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret(name={self.name!r}, value=***)"

    __str__ = __repr__

    def __reduce__(self) -> str:  # never pickled into a queue, a cache or a log
        raise TypeError("Secret values are not serialisable")


def clean_value(raw: bytes | str) -> bytes:
    """Strip surrounding whitespace; refuse empty, multi-line or non-printable values. Messages
    never include the value."""
    data = raw.encode("utf-8") if isinstance(raw, str) else bytes(raw)
    data = data.strip()
    if not data:
        raise ValueError("the secret is empty")
    if len(data) > _MAX_BYTES:
        raise ValueError(f"the secret is longer than {_MAX_BYTES} bytes")
    if any(b < 0x21 or b > 0x7E for b in data):
        raise ValueError(
            "the secret contains whitespace or non-printable characters (value not shown)"
        )
    return data


class SecretStore:
    """The secrets of one state directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    @classmethod
    def in_state_dir(cls, state_root: Path) -> SecretStore:
        return cls(Path(state_root) / "secrets")

    def path(self, name: str) -> Path:
        return self.directory / check_secret_name(name)

    def set(self, name: str, value: bytes | str) -> None:
        data = clean_value(value)
        path = self.path(name)
        ensure_private_dir(self.directory.parent)
        ensure_private_dir(self.directory)
        atomic_write(path, data, mode=PRIVATE_FILE)

    def get(self, name: str) -> Secret:
        """The secret; SecretNotFound when absent, SecretUnsafe when others can read it."""
        path = self.path(name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise SecretNotFound(f"no secret {name!r} in {self.directory}") from None
        except OSError as exc:  # ELOOP: a symlink where a secret should be
            raise SecretUnsafe(f"cannot open secret {name!r} at {path}: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise SecretUnsafe(f"secret {name!r} at {path} is not a regular file")
            if st.st_mode & 0o077 or st.st_uid != os.getuid():
                raise SecretUnsafe(
                    f"secret {name!r} at {path} is readable by others or not yours; "
                    f"run: chmod 600 {path}"
                )
            try:
                return Secret(name, clean_value(f.read(_MAX_BYTES + 1)))
            except ValueError as exc:
                raise SecretUnsafe(f"secret {name!r} at {path} is unusable: {exc}") from None

    def names(self) -> tuple[str, ...]:
        """Stored secret names, sorted; values are never read."""
        try:
            entries = list(self.directory.iterdir())
        except FileNotFoundError:
            return ()
        return tuple(sorted(p.name for p in entries if _NAME_RE.fullmatch(p.name) and p.is_file()))

    def delete(self, name: str) -> bool:
        """Remove a secret; False when there was none."""
        path = self.path(name)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        with contextlib.suppress(OSError):
            fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        return True
