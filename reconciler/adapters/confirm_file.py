"""``<state dir>/confirm.json``: the user's confirmation of deletes held by the delete guard.

An input to the controller, never a cloud action: ``tpu-reconciler confirm`` (or the MCP tool
``confirm_deletes``) writes the exact set of guarded deletes it read from the status snapshot,
with that set's fingerprint; the controller reads it every pass and lets exactly those deletes
through (``core.control.confirmed_deletes``). Written atomically, 0600. A missing, unreadable or
tampered file confirms nothing, and so does one made under another intent (the desired file's
digest changed since) or older than ``core.control.CONFIRM_TTL``; the controller removes a
confirmation once it is spent that way or once every delete it names is done
(``clear_spent``), so an old confirmation never lets a later mass delete through.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from reconciler.adapters.files import read_json, write_json
from reconciler.adapters.statedir import StateDir
from reconciler.core.control import confirmation, confirmation_spent, confirmed_deletes


def confirm_path(state: StateDir) -> Path:
    return state.root / "confirm.json"


def read_confirmation(state: StateDir) -> Any:
    """The confirmation document, or None when there is none. A file that cannot be read or
    parsed reads as ``{}``: it confirms nothing, and is spent (so the controller removes it)."""
    try:
        return read_json(confirm_path(state))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}


def read_confirmed(state: StateDir, *, digest: str | None, now: float) -> frozenset[str]:
    """The deletes confirmed for the intent ``digest`` at ``now`` (empty when none)."""
    return confirmed_deletes(read_confirmation(state), digest=digest, now=now)


def write_confirmation(
    state: StateDir, deletes: list[str], *, digest: str | None, now: float
) -> str:
    """Confirm exactly ``deletes`` under the intent ``digest``; returns their fingerprint."""
    document = confirmation(deletes, digest=digest, now=now)
    state.ensure()
    write_json(confirm_path(state), document)
    return str(document["fingerprint"])


def remove_confirmation(state: StateDir) -> bool:
    """Delete ``confirm.json``; True when there was one."""
    try:
        confirm_path(state).unlink()
    except FileNotFoundError:
        return False
    return True


def clear_spent(
    state: StateDir, *, digest: str | None, now: float, present: Collection[str]
) -> bool:
    """Remove ``confirm.json`` when it confirms nothing any more or all its deletes are done;
    True when a file was removed."""
    document = read_confirmation(state)
    if document is None or not confirmation_spent(
        document, digest=digest, now=now, present=present
    ):
        return False
    return remove_confirmation(state)
