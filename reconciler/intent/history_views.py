"""The capacity-history queries of a desired file's state: ``history`` (waits, lifetimes,
failures per place) and ``recommend`` (places ranked by expected time to capacity), as the
documents ``tpu-reconciler history --json`` / ``recommend --json`` print
(``runtime.history_reads``), read from the store's ``history.sqlite``. For the CLI, given the
store's path: ``history``'s table, JSON and CSV rows, ``--plot``'s charts and ``--html``'s page
(``core.capacity_*``), and ``recommend``'s ranking as text.

May: read the history store; write the page ``history --html FILE`` names. May not: write
anything else, print.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.core.capacity_chart import Timeline as Timeline  # the surfaces' name for it
from reconciler.runtime.history_reads import (
    chart_timeline,
    history_document,
    recommend_document,
    summary_stats,
    workload_attempts,
)

if TYPE_CHECKING:  # the edit engine loads only where an edit is made
    from reconciler.intent.engine import IntentEditor


def history(
    store: IntentEditor,
    *,
    zone: str | None = None,
    accelerator: str | None = None,
    mode: str | None = None,
    since: float | None = None,
    api: str | None = None,
) -> dict[str, Any]:
    """``tpu-reconciler.history.v1`` of the store's history, filtered as given."""
    path = store.state.history
    return history_document(
        path, zone=zone, accelerator=accelerator, mode=mode, since=since, api=api
    )


def recommend(
    store: IntentEditor,
    accelerator: str,
    *,
    mode: str = "spot",
    count: int = 3,
    since: float | None = None,
    api: str | None = None,
) -> dict[str, Any]:
    """``tpu-reconciler.recommend.v1``: where ``accelerator`` comes up soonest."""
    path = store.state.history
    return recommend_document(path, accelerator, mode=mode, count=count, since=since, api=api)


# --- the CLI's history and recommend, given the store's path ----------------------------------


def csv_rows(path: Path, *, since: float | None, **filters: Any) -> Iterator[list[str]]:
    """``history --export csv``: the header, then every transition recorded (none without a
    store); a ``ReconcilerError`` for a store it cannot read."""
    from reconciler.adapters.history_db import open_readonly
    from reconciler.core.capacity_report import CSV_COLUMNS, csv_row

    db = open_readonly(path)
    try:
        yield list(CSV_COLUMNS)
        if db is not None:
            for row in db.transitions(since=since, **filters):
                yield csv_row(row)
    finally:
        if db is not None:
            db.close()


def history_text(
    path: Path,
    *,
    since: float | None,
    since_text: str | None,
    as_json: bool = False,
    **filters: Any,
) -> str:
    """``history``'s output, each line ending in a newline: the figures per place (with the
    requests still queued and nodes still held, as of now) and the workload attempts, as
    tables or (``as_json``) the ``tpu-reconciler.history.v1`` document. ``since_text``: the
    ``--since`` given, named when nothing matched. A ``ReconcilerError`` for a store it cannot
    read."""
    from reconciler.core.attempt_report import format_attempts
    from reconciler.core.capacity_report import format_history, history_doc

    stats = summary_stats(path, since=since, **filters)
    attempts = workload_attempts(
        path, since=since, zone=filters["zone"], accelerator=filters["accelerator"]
    )
    if as_json:
        return (
            json.dumps(history_doc(stats, since=since, attempts=attempts, **filters), indent=2)
            + "\n"
        )
    given = {**filters, "since": since_text}
    asked = {k: v for k, v in given.items() if v}
    if stats or asked or not attempts:
        text = format_history(stats, asked)
    else:  # attempts only: "no capacity history yet" would say too much
        text = "No queued resource or node recorded yet.\n"
    return text + format_attempts(attempts)


def pictures(
    path: Path, *, until: float, since: float | None, rankings: bool, **filters: Any
) -> tuple[Timeline, list[dict[str, Any]]]:
    """The history over time up to ``until`` and (``rankings``) what ``recommend`` says for
    every accelerator and mode it shows. A ``ReconcilerError`` for a store it cannot read."""
    timeline = chart_timeline(path, now=until, since=since, **filters)
    return timeline, _rankings(path, timeline, since, until) if rankings else []


def _rankings(
    path: Path, timeline: Timeline, since: float | None, until: float
) -> list[dict[str, Any]]:
    """What ``recommend`` prints for every accelerator and mode the pictures show."""
    kinds = sorted(
        {(w.accelerator, w.mode) for w in timeline.waits}
        | {(h.accelerator, h.mode) for h in timeline.holdings}
    )
    apis = {w.api for w in timeline.waits} | {h.api for h in timeline.holdings}
    api = next(iter(apis)) if len(apis) == 1 else None  # the pictures' API, when one
    return [
        recommend_document(path, acc, mode=mode, since=since, now=until, api=api)
        for acc, mode in kinds
        if acc != "?" and mode != "?"
    ]


def plot_text(
    timeline: Timeline, *, until: float, since: float | None, width: int, filters: dict[str, str]
) -> str:
    """``history --plot``: the three charts ``width`` columns wide."""
    from reconciler.core.capacity_plot import format_plot

    return format_plot(timeline, until=until, since=since, width=width, filters=filters)


def plot_until(path: Path, *, now: float, width: int) -> str:
    """The whole history's three charts up to ``now``, ``width`` columns wide (the TUI's
    history pane). A ``ReconcilerError`` for a store it cannot read."""
    from reconciler.core.capacity_plot import format_plot

    return format_plot(chart_timeline(path, now=now), until=now, width=width)


def write_page(
    file: Path,
    timeline: Timeline,
    rankings: list[dict[str, Any]],
    *,
    until: float,
    since: float | None,
    generated: float,
    filters: Mapping[str, str],
    lab: str,
) -> None:
    """``history --html FILE``: the charts, the rankings and the lab's section as one page,
    written atomically (0644 when new: a page to share). OSError."""
    from reconciler.adapters.files import atomic_write
    from reconciler.core.capacity_html import format_html

    page = format_html(
        timeline,
        rankings,
        until=until,
        since=since,
        generated=generated,
        filters=filters,
        lab=lab,
    )
    atomic_write(file, page, mode=None)


def recommend_at(
    path: Path,
    accelerator: str,
    *,
    mode: str,
    count: int,
    since: float | None,
    group: str | None,
    api: str | None,
) -> dict[str, Any]:
    """``tpu-reconciler.recommend.v1`` of the store at ``path`` (``group``: the race group
    its snippet names)."""
    return recommend_document(
        path, accelerator, mode=mode, count=count, since=since, group=group, api=api
    )


def recommend_text(doc: dict[str, Any]) -> str:
    """``recommend``'s ranking (and its paste-in snippet, when ``doc`` has one) as text."""
    from reconciler.core.capacity_report import format_recommend

    return format_recommend(doc)
