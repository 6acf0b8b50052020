"""Read-only view of the lab's timeline for MCP (the ``timeline`` tool) and the TUI's pane: the
controller's snapshot (its ``controller`` from the lock, as ``status`` shows it; desired.yaml
alone, saying so, when there is none), the file and the capacity history, made into
``core.timeline``'s picture by ``runtime.timeline``.

May: read the snapshot, the file, the lock and the history (through ``intent.views`` and
``runtime``). May not: edit, call the cloud.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from reconciler.adapters.statedir import StateDir
from reconciler.core.memory import Memory
from reconciler.core.status import build_status
from reconciler.core.timeline import LabTimeline, moment
from reconciler.core.timeline_text import timeline_doc
from reconciler.errors import ViewError
from reconciler.intent import views
from reconciler.intent.engine import IntentEditor
from reconciler.model.desired import Desired
from reconciler.model.status import ControllerInfo, StatusSnapshot
from reconciler.runtime.lock import read_holder
from reconciler.runtime.timeline import as_of, lab_timeline

Holder = Callable[[StateDir], int | None]
NO_SNAPSHOT = "no status snapshot yet (has the controller run?): desired.yaml only"


def _snapshot(
    store: IntentEditor,
    snap: StatusSnapshot | None,
    desired: Desired | None,
    errors: list[str],
    holder: Holder,
) -> StatusSnapshot:
    """The snapshot to draw: the controller's, else one of desired.yaml alone; ``controller``
    from the lock."""
    if snap is None:
        backend = desired.settings.backend if desired is not None else "?"
        snap = build_status(
            desired=desired,
            desired_file=str(store.path),
            errors=errors,
            observation=None,
            observed_at=None,
            memory=Memory(),
            plan=None,
            now=time.time(),
            backend=backend,
        )
        snap = replace(snap, note=NO_SNAPSHOT)
    pid = holder(store.state)
    return replace(snap, controller=ControllerInfo(pid is not None, pid))


def read(
    store: IntentEditor,
    *,
    by: str = "owner",
    since: str | float | None = None,
    until: str | float | None = None,
    saved: StatusSnapshot | None = None,
    holder: Holder = read_holder,
) -> LabTimeline:
    """The picture as of the snapshot (``saved``: the controller's, already read); ``since`` /
    ``until`` as ``timeline`` takes them (a duration back or ahead, or an ISO time) or epoch
    seconds; ``holder``: who holds the controller lock. ``ViewError`` for a time it cannot
    read."""
    desired, errors = views._desired(store)
    snap = _snapshot(store, saved or views.read_snapshot(store), desired, errors, holder)
    now = as_of(snap)
    try:
        start = since if not isinstance(since, str) else moment(since, now, ahead=False)
        end = until if not isinstance(until, str) else moment(until, now, ahead=True)
        return lab_timeline(snap, desired, store.state.history, since=start, until=end, by=by)
    except ValueError as e:
        raise ViewError(f"timeline: {e}") from None


def timeline(
    store: IntentEditor,
    *,
    by: str = "owner",
    since: str | None = None,
    until: str | None = None,
) -> dict[str, Any]:
    """The ``timeline --json`` document under the MCP envelope (``document`` names it)."""
    snap = views.read_snapshot(store)
    doc = timeline_doc(read(store, by=by, since=since, until=until, saved=snap))
    body = {k: v for k, v in doc.items() if k != "schema_version"}
    return views._doc(
        document=doc["schema_version"], snapshot=views._snapshot_meta(store, snap), **body
    )
