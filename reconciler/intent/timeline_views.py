"""Read-only view of the lab's timeline for MCP (the ``timeline`` tool) and the TUI's pane: the
controller's snapshot (its ``controller`` from the lock, as ``status`` shows it; desired.yaml
alone, saying so, when there is none), the file and the capacity history, made into
``core.timeline``'s picture by ``runtime.timeline``. For the CLI (``timeline``, ``history
--html``) the same picture of the snapshot it read (``intent/status_view``), as text, JSON or
the page's section; for the TUI's pane, its chart over a view and the selected slot in words.

May: read the snapshot, the file, the lock and the history (through ``intent.views`` and
``runtime``). May not: edit, call the cloud.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from reconciler.adapters.statedir import StateDir
from reconciler.core.json_text import indented
from reconciler.core.timeline import LabTimeline as LabTimeline  # the surfaces' name for it
from reconciler.core.timeline import moment, only
from reconciler.core.timeline_svg import section
from reconciler.core.timeline_text import (
    chart,
    end_time,
    end_words,
    estimate_words,
    format_timeline,
    timeline_doc,
)
from reconciler.errors import ViewError
from reconciler.intent import views
from reconciler.intent.engine import IntentEditor
from reconciler.intent.status_view import desired_status
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
        snap = desired_status(desired, store.path, errors, NO_SNAPSHOT)
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


# --- the CLI's timeline: the snapshot it read, desired.yaml as the loader reads it ------------


def check_moment(text: str, *, ahead: bool) -> None:
    """ValueError (user-facing) when ``text`` is no ``--since`` / ``--until`` moment."""
    moment(text, 0.0, ahead=ahead)


def _loaded(file: Path) -> Desired | None:
    from reconciler.runtime.desired_loader import DesiredLoader

    return DesiredLoader(file, os.environ).load().desired


def lab_picture(
    snapshot: StatusSnapshot,
    file: Path,
    history: Path,
    *,
    since: str | None = None,
    until: str | None = None,
    by: str = "owner",
) -> LabTimeline:
    """The lab's timeline as of ``snapshot`` (``since`` / ``until`` as ``timeline`` takes
    them), with ``file``'s intent and the capacity history at ``history``. ValueError for a
    time it cannot read; ReconcilerError for a history it cannot."""
    now = as_of(snapshot)
    start = None if since is None else moment(since, now, ahead=False)
    end = None if until is None else moment(until, now, ahead=True)
    return lab_timeline(snapshot, _loaded(file), history, since=start, until=end, by=by)


def timeline_text(found: LabTimeline, *, width: int, as_json: bool = False) -> str:
    """``timeline``'s output, each line ending in a newline: the chart ``width`` columns wide,
    or (``as_json``) the ``tpu-reconciler.timeline.v1`` document."""
    if as_json:
        return indented(timeline_doc(found)) + "\n"
    return format_timeline(found, width)


def html_section(found: LabTimeline, filters: Mapping[str, str | None]) -> str:
    """``history --html``'s section of ``found``, its rows narrowed to ``filters``
    (``zone``, ``accelerator``, ``mode``)."""
    return section(only(found, **filters))


# --- the TUI's pane -----------------------------------------------------------------------------


def pane_chart(
    found: LabTimeline, width: int, *, start: float, end: float, selected: str | None
) -> list[list[tuple[str, str]]]:
    """The chart's lines (cells of text and ``core.timeline_text``'s style name) ``width``
    columns wide over ``[start, end]``, ``selected``'s row marked."""
    return chart(found, width, start=start, end=end, selected=selected)


def selected_words(found: LabTimeline, selected: str | None, width: int) -> list[str]:
    """The selected slot in words under the chart (its estimated start, or its state and
    scheduled end), wrapped to ``width``; none for no such slot."""
    row = next((r for r in found.rows() if r.slot == selected), None)
    if row is None:
        return []
    said = f"{row.slot}: {row.state or 'not queued'}"
    if row.estimate is not None:
        start = "next run" if row.estimate.renewal else "starts"
        said = f"{row.slot}: {start} {estimate_words(row, row.estimate, found.as_of)} (estimate)"
    elif row.ends_at is not None and row.end_reason is not None:
        said += f", {end_words(row.end_reason)} {end_time(row.ends_at, found.as_of)}"
    return textwrap.wrap(said, width)
