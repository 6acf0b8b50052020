"""The secrets setup needs (the Tailscale auth key), for the CLI's ``secret`` verbs and the
TUI's key: the state directory's ``secrets/`` (``adapters/secrets``: 0700, one 0600 file each).

A value is cleaned (``clean``) before it is stored and never appears in a message, a log or a
result: only names and paths leave here.

May: create, list and delete the files of one state directory's secrets. May not: print, log
or return a value; touch desired.yaml; act on the cloud or over SSH.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from reconciler.adapters.secrets import TAILSCALE as _TAILSCALE
from reconciler.adapters.secrets import SecretStore, clean_value
from reconciler.intent.store import state_dir as state_of

#: The secret the Tailscale join reads.
TAILSCALE: Final = _TAILSCALE


def secrets_of(file: Path, state_dir: Path | None) -> SecretStore:
    """The secrets of ``file``'s state directory (``state_dir`` when given)."""
    return SecretStore.in_state_dir(state_of(file, state_dir).root)


def clean(raw: bytes | str) -> bytes:
    """The value to store for ``raw`` (surrounding whitespace stripped); ValueError for an
    empty, over-long, multi-line or non-printable one, never naming the value."""
    return clean_value(raw)


def save_secret(state_root: Path, name: str, raw: bytes | str) -> Path:
    """Store ``raw`` (cleaned) as the secret ``name`` of the state directory ``state_root`` and
    return its file. ValueError, OSError or a ``ReconcilerError``; none carries the value."""
    store = SecretStore.in_state_dir(state_root)
    store.set(name, clean_value(raw))
    return store.path(name)
