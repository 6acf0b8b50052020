"""``<state dir>/confirm.json``: the user's confirmation of deletes held by the delete guard.

An input to the controller, never a cloud action: ``tpu-reconciler confirm`` (or the MCP tool
``confirm_deletes``) writes the exact set of guarded deletes it read from the status snapshot,
with that set's fingerprint; the controller reads it every pass and lets exactly those deletes
through (``core.control.confirmed_deletes``). Written atomically, 0600. A missing, unreadable or
tampered file confirms nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reconciler.adapters.files import read_json, write_json
from reconciler.adapters.statedir import StateDir
from reconciler.core.control import confirmed_deletes, fingerprint


def confirm_path(state: StateDir) -> Path:
    return state.root / "confirm.json"


def read_confirmed(state: StateDir) -> frozenset[str]:
    try:
        document: Any = read_json(confirm_path(state))
    except (OSError, ValueError):
        return frozenset()
    return confirmed_deletes(document)


def write_confirmation(state: StateDir, deletes: list[str], *, now: str) -> str:
    """Confirm exactly ``deletes``; returns their fingerprint."""
    token = fingerprint(deletes)
    state.ensure()
    write_json(
        confirm_path(state),
        {"fingerprint": token, "deletes": sorted(set(deletes)), "confirmed_at": now},
    )
    return token
