"""The ``events`` query: the controller's event log read (rotated files included) or followed
as it grows (``runtime.events``), and why a ``--slot`` that matched nothing may be a typo.

May: read the event files and desired.yaml. May not: write anything, print.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio


def read_events(
    path: Path,
    *,
    since: datetime | None = None,
    slot: str | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """The events of the log at ``path``, oldest first; ``limit`` keeps the newest N of those
    that match (``runtime.events.read_events``)."""
    from reconciler.runtime import events

    return events.read_events(path, since=since, slot=slot, limit=limit)


def follow_events(
    path: Path,
    *,
    since: datetime | None = None,
    slot: str | None = None,
    limit: int | None = None,
    stop: asyncio.Event | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """The matching history (the newest ``limit``), then every new matching event until
    ``stop`` is set (``runtime.events.follow_events``)."""
    from reconciler.runtime import events

    return events.follow_events(path, since=since, slot=slot, limit=limit, stop=stop)


def unknown_slot(file: Path, slot: str) -> str | None:
    """Why ``slot`` matched no event when desired.yaml has no such slot either (a typo); None
    for a slot the file has (it may just have no events yet) or a file that cannot say."""
    import difflib
    import os

    from reconciler.runtime.desired_loader import DesiredLoader

    desired = DesiredLoader(file, os.environ).load().desired
    if desired is None or desired.slot(slot) is not None:
        return None
    close = difflib.get_close_matches(slot, [s.name for s in desired.slots], n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"no events for slot {slot!r}, and {file} has no such slot{hint}"
