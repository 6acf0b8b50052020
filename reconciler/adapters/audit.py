"""The audit log, ``<state dir>/audit.jsonl``: one JSON line per change of the intent, naming
who made it. Append-only: lines are only ever added (one ``write(2)`` on an ``O_APPEND``
descriptor each, ``adapters/files.append_jsonl``), never rewritten or rotated.

Two writers:

- every intent edit (``intent/engine.py``): its result, ``source`` (cli, mcp, tui), ``user``
  and ``uid`` (the Unix user running the edit), the diff;
- the controller that acts (``run``, ``apply``; not ``plan``), for every new intent it loads
  (``file_change``): ``source: "file"``, the file's owner at load (``file_owner``,
  ``file_uid``: a hand edit saved by an editor belongs to whoever saved it) and which slots
  the change added, removed or changed. An edit made through
  the tool is therefore recorded twice, by the edit and by the load; a hand edit once.

The file is 0600, or 0660 in a shared lab's state directory (every member's edit appends).
That is cooperative, not a guarantee: a member can still write the file by hand, as they can
desired.yaml (docs/security.md).

May: append to the audit log, read it. May not: rewrite, truncate or rotate it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from reconciler.adapters.files import append_jsonl, read_jsonl
from reconciler.adapters.lab import user_name
from reconciler.adapters.statedir import StateDir
from reconciler.model.desired import Desired, SlotSpec
from reconciler.model.times import utc_text


def append_audit(state: StateDir, record: dict[str, Any]) -> None:
    append_jsonl(state.audit, record)


def read_audit(state: StateDir) -> Iterator[dict[str, Any]]:
    return read_jsonl(state.audit)


def _same(spec: SlotSpec) -> SlotSpec:
    """A slot as compared across intents: its place in the file is not a change of it."""
    return replace(spec, order=0)


def intent_changes(before: Desired | None, after: Desired) -> dict[str, list[str]]:
    """Slots (and race groups) added, removed and changed between two intents."""
    old = {s.name: s for s in before.slots} if before is not None else {}
    new = {s.name: s for s in after.slots}
    old_groups = {g.name: g for g in before.race_groups} if before is not None else {}
    new_groups = {g.name: g for g in after.race_groups}
    return {
        "added": [n for n in new if n not in old],
        "removed": [n for n in old if n not in new],
        "changed": [n for n in new if n in old and _same(new[n]) != _same(old[n])],
        "groups_changed": sorted(
            n
            for n in new_groups.keys() | old_groups.keys()
            if new_groups.get(n) != old_groups.get(n)
        ),
    }


def file_change(
    state: StateDir, before: Desired | None, after: Desired, file_uid: int | None, now: float
) -> None:
    """Record that the controller loaded a new intent, and whose file it was."""
    from datetime import UTC, datetime

    record: dict[str, Any] = {
        "ts": utc_text(datetime.fromtimestamp(now, UTC), milliseconds=True),
        "source": "file",
        "kind": "desired.loaded",
        "file": after.source,
        "digest": after.digest,
        "file_uid": file_uid,
        "file_owner": user_name(file_uid) if file_uid is not None else None,
        **intent_changes(before, after),
    }
    append_audit(state, record)
