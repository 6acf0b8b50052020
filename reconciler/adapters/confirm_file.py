"""``<state dir>/confirm.json``: the user's confirmation of deletes held by the delete guard.

An input to the controller, never a cloud action: ``tpu-reconciler confirm`` (or the MCP tool
``confirm_deletes``) writes the exact set of guarded deletes it read from the status snapshot,
with that set's fingerprint; the controller reads it every pass and lets exactly those deletes
through (``core.control.confirmed_deletes``). Written atomically, 0600. A missing, unreadable or
tampered file confirms nothing, and so does one made under another intent (the desired file's
digest changed since) or older than ``core.control.CONFIRM_TTL``; the controller removes a
confirmation once it is spent that way or once every delete it names is done
(``clear_spent``), so an old confirmation never lets a later mass delete through.

Who confirmed: the file's owner (a member cannot make a file that another user owns), recorded
in the document as ``user`` too. ``read_confirmation_checked`` applies ``model/trust``'s rule:
a document naming another user than its owner, or a member's confirmation of deletes of slots
the lab's policy does not let them change, confirms nothing (and says why).
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from reconciler.adapters.files import read_json, write_json
from reconciler.adapters.lab import read_policy, user_name
from reconciler.adapters.owned_files import read_owned
from reconciler.adapters.statedir import StateDir
from reconciler.core.control import confirmation, confirmation_spent, confirmed_deletes
from reconciler.model.trust import confirm_refusal


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


def read_confirmation_checked(
    state: StateDir, *, owners: Mapping[str, str | None]
) -> tuple[Any, str | None]:
    """The confirmation document (None when there is none) and why it does not count, if so:
    then the document is ``{}`` (it confirms nothing and is spent). ``owners``: the owner of
    each slot the caller knows (``model/trust.confirm_refusal``)."""
    try:
        owned = read_owned(confirm_path(state))
    except FileNotFoundError:
        return None, None
    except OSError:
        return {}, None
    try:
        document = json.loads(owned.content)
    except ValueError:
        return {}, None
    named = document.get("deletes") if isinstance(document, Mapping) else None
    recorded = document.get("user") if isinstance(document, Mapping) else None
    deletes = [d for d in named if isinstance(d, str)] if isinstance(named, list) else []
    reason = confirm_refusal(
        read_policy(state),
        file_user=owned.user,
        trusted=owned.by_controller,
        recorded_user=recorded,
        deletes=deletes,
        owners=owners,
    )
    return ({}, reason) if reason is not None else (document, None)


def read_confirmed(
    state: StateDir,
    *,
    digest: str | None,
    now: float,
    owners: Mapping[str, str | None] | None = None,
) -> frozenset[str]:
    """The deletes confirmed for the intent ``digest`` at ``now`` (empty when none), by a user
    who may confirm them (``owners`` as for ``read_confirmation_checked``)."""
    document, _ = read_confirmation_checked(state, owners=owners or {})
    return confirmed_deletes(document, digest=digest, now=now)


def write_confirmation(
    state: StateDir, deletes: list[str], *, digest: str | None, now: float
) -> str:
    """Confirm exactly ``deletes`` under the intent ``digest``; returns their fingerprint."""
    document = {**confirmation(deletes, digest=digest, now=now), "user": user_name(os.geteuid())}
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
