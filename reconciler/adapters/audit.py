"""The audit log, ``<state dir>/audit.jsonl``: one JSON line per change of the intent, naming
who made it. Append-only: lines are only ever added (one ``write(2)`` on an ``O_APPEND``
descriptor each, ``adapters/files.append_jsonl``), never rewritten or rotated.

Two writers:

- every intent edit (``intent/engine.py``): its result, ``source`` (cli, mcp, tui), ``user``
  and ``uid`` (the Unix user running the edit), the file it wrote, the diff;
- the controller that acts (``run``, ``apply``; not ``plan``): for every file of the intent
  whose new text it loads (``file_change``), ``source: "file"``, that file's owner
  (``file_owner``, ``file_uid``: a hand edit saved by an editor belongs to whoever saved it; a
  lab member's file is its owner's alone) and which slots the change added, removed or
  changed; for every member's confirmation request it takes (``confirm_record``), who asked
  (the request file's owner), what and whether it was accepted. An edit made through the tool
  is therefore recorded twice, by the edit and by the load; a hand edit once.

One user's directory has one file (0600). A lab's has two: the edits' ``audit.jsonl`` (0660,
every member's edit appends; cooperative: a member could write it by hand) and the
controller's own ``controller/audit.jsonl`` (``StateDir.controller_audit``, 0640), which no
member can write: loads and confirmations, attributed by what the kernel says of each file.

May: append to the audit logs, read them. May not: rewrite, truncate or rotate them.
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


def _ts(now: float) -> str:
    from datetime import UTC, datetime

    return utc_text(datetime.fromtimestamp(now, UTC), milliseconds=True)


def file_change(
    state: StateDir,
    before: Desired | None,
    after: Desired,
    file_uid: int | None,
    now: float,
    *,
    file: str | None = None,
) -> None:
    """Record that the controller loaded a new text of ``file`` (default: ``after``'s
    source) — ``before`` and ``after`` that file's intent — and whose file it was."""
    record: dict[str, Any] = {
        "ts": _ts(now),
        "source": "file",
        "kind": "desired.loaded",
        "file": file or after.source,
        "digest": after.digest,
        "file_uid": file_uid,
        "file_owner": user_name(file_uid) if file_uid is not None else None,
        **intent_changes(before, after),
    }
    append_jsonl(state.controller_audit, record)


def confirm_record(
    state: StateDir, *, user: str, uid: int, deletes: list[str], error: str | None, now: float
) -> None:
    """Record a member's confirmation request the controller took: who, what, the verdict."""
    record: dict[str, Any] = {
        "ts": _ts(now),
        "source": "confirm",
        "kind": "confirm.refused" if error else "confirm.accepted",
        "user": user,
        "uid": uid,
        "deletes": deletes,
    }
    if error:
        record["error"] = error
    append_jsonl(state.controller_audit, record)
