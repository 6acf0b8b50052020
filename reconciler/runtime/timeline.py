"""Reading the lab's timeline: the capacity history's part of it, put together with the status
snapshot and the desired file the caller read (``tpu-reconciler timeline``, the TUI's timeline
pane, ``history --html``, the MCP ``timeline`` tool).

Like ``status``, ``quota`` and ``history`` it never calls the cloud: the snapshot says what the
controller last saw, the store (``<state dir>/history.sqlite``, read only) what each request did
before, and ``core.timeline`` makes the picture, as of the moment the snapshot was made.

May: read the history store. May not: write anything, call the cloud, print.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from reconciler.adapters.history_db import open_readonly
from reconciler.core.capacity import wait_hints
from reconciler.core.timeline import LabTimeline, build
from reconciler.core.timeline_past import Past, spans
from reconciler.errors import HistoryUnreadable
from reconciler.model.desired import Desired
from reconciler.model.stamps import epoch_or_none
from reconciler.model.status import StatusSnapshot
from reconciler.runtime.backends import word_state
from reconciler.runtime.history_reads import summary_stats


def as_of(snapshot: StatusSnapshot, now: float | None = None) -> float:
    """The moment the picture is of: when the snapshot was made (the clock's ``now`` when it
    does not say)."""
    made = epoch_or_none(snapshot.generated_at)
    if made is not None:
        return made
    return time.time() if now is None else now


def _past(path: Path, since: float) -> dict[tuple[str, str], Past]:
    """Each request's states from ``since`` on (with the one it was in then), per (zone, slot)."""
    db = open_readonly(path)
    if db is None:
        return {}
    try:
        before = [
            replace(t, at=since, before=None)  # where each stood then (not a change then)
            for t in db.states_before(since)
            if t.after is not None
        ]
        return spans([*before, *db.transitions(since=since)], word_state)
    finally:
        db.close()


def lab_timeline(
    snapshot: StatusSnapshot,
    desired: Desired | None,
    history: Path,
    *,
    since: float | None = None,
    until: float | None = None,
    by: str = "owner",
    now: float | None = None,
) -> LabTimeline:
    """The timeline of ``snapshot`` and ``desired`` with the history at ``history``. A store
    that cannot be read leaves the past and the expected waits out, and says so in a note;
    ``ValueError`` for a window that is not one (``since`` not before ``until``)."""
    moment = as_of(snapshot, now)
    try:
        hints = wait_hints(summary_stats(history, now=moment))
        frame = build(
            snapshot,
            desired,
            as_of=moment,
            hints=hints,
            since=since,
            until=until,
            by=by,
            state_of=word_state,
        )
        past = _past(history, frame.since)
    except HistoryUnreadable as e:
        found = build(
            snapshot, desired, as_of=moment, since=since, until=until, by=by, state_of=word_state
        )
        note = f"the capacity history cannot be read ({e}): no past, no expected waits"
        return replace(found, notes=(*found.notes, note))
    return build(
        snapshot,
        desired,
        as_of=moment,
        hints=hints,
        past=past,
        since=frame.since,
        until=frame.until,
        by=by,
        state_of=word_state,
    )
