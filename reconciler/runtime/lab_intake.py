"""What the controller takes from a lab's members, and the record it keeps of them: their
confirmation requests (``take_confirmations``), whose file each change of the intent was
(``audit_files``), and what laying out the lab did at start (``report_layout``).

Both write only the controller's own record (``StateDir.controller_audit``: in a lab,
``controller/audit.jsonl``, which no member can write) and events; a state directory the
controller cannot write is said by the pass, not here.

May: take and remove requests from the inbox, write the controller's confirmation, append to
its audit, emit events. May not: act on the cloud, or decide what a request may confirm
(``model/trust`` does, through ``adapters/confirm_file``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import replace

from reconciler.adapters.audit import confirm_record, file_change
from reconciler.adapters.confirm_file import accept, take_requests
from reconciler.adapters.lab_layout import Layout
from reconciler.adapters.statedir import StateDir
from reconciler.model.intent_parts import Part
from reconciler.runtime.desired_loader import FileOwner
from reconciler.runtime.events import EventLog


def report_layout(events: EventLog, layout: Layout | None) -> None:
    """What laying out the lab's state directory did at this start, if anything (an older
    lab's files moved, someone else's left or set aside)."""
    if layout is not None and layout.changed:
        events.emit(
            "lab.layout",
            moved=list(layout.moved),
            left=list(layout.left),
            removed=list(layout.removed),
            set_aside=list(layout.set_aside),
            notes=list(layout.notes),
        )


def take_confirmations(
    state: StateDir, events: EventLog, owners: Mapping[str, str | None], now: float
) -> None:
    """Each member's request in the inbox: an accepted one becomes the controller's own
    confirmation (the latest wins), a refused one is said; both name who asked (the request
    file's owner), in an event and the controller's audit. ``owners``: each slot's owner the
    controller knows."""
    for request in take_requests(state, owners=owners):
        if request.reason is None:
            accept(state, request)
            fingerprint = request.document.get("fingerprint") if request.document else None
            events.emit(
                "confirm.accepted",
                user=request.user,
                deletes=request.deletes,
                fingerprint=fingerprint,
            )
        else:
            events.emit("confirm.refused", user=request.user, error=request.reason)
        with contextlib.suppress(OSError):
            confirm_record(
                state,
                user=request.user,
                uid=request.uid,
                deletes=request.deletes,
                error=request.reason,
                now=now,
            )


def audit_files(
    state: StateDir,
    audited: Mapping[str, Part],
    parts: Sequence[Part],
    files: Sequence[FileOwner],
    now: float,
) -> dict[str, Part]:
    """Record each part whose text is new since ``audited`` (and each member's file gone),
    with its file's owner; returns what is now recorded."""
    current = {p.source: p for p in parts}
    uids = {f.source: f.uid for f in files}
    with contextlib.suppress(OSError):
        for source, part in current.items():
            old = audited.get(source)
            if old is None or old.digest != part.digest:
                before = old.desired if old is not None else None
                file_change(state, before, part.desired, uids.get(source), now, file=source)
        for source, old in audited.items():
            if source not in current:  # a member's file removed: its slots left the intent
                gone = replace(old.desired, slots=(), race_groups=())
                file_change(state, old.desired, gone, None, now, file=source)
    return current
