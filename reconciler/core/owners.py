"""One person's holdings: the status snapshot cut down to the slots one owner holds.

``status --owner NAME``, the MCP ``status`` tool's ``owner`` argument and the TUI's owner
filter all use ``only_owner``, so the three agree on what "alice's slots" are: the managed slots
whose ``owner`` (their own ``owner:``, else their race group's, else their generator's) is that
name, and the race groups with one of them among their candidates. The rest of the snapshot
(controller, plan, notices) is the whole lab's and stays as it is.

Pure: a snapshot in, a snapshot out.
"""

from __future__ import annotations

from dataclasses import replace

from reconciler.model.status import StatusSnapshot


def only_owner(snapshot: StatusSnapshot, owner: str) -> StatusSnapshot:
    slots = tuple(s for s in snapshot.slots if s.owner == owner)
    kept = {s.name for s in slots}
    groups = tuple(g for g in snapshot.race_groups if kept.intersection(g.candidates))
    return replace(snapshot, slots=slots, race_groups=groups)


def owners(snapshot: StatusSnapshot) -> tuple[str, ...]:
    """Every owner named in the snapshot, sorted (what a filter can choose from)."""
    return tuple(sorted({s.owner for s in snapshot.slots if s.owner}))
