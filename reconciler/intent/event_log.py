"""The ``events`` query: the controller's event log read (rotated files included) or followed
as it grows (``runtime.events``), and why a ``--slot`` that matched nothing may be a typo.

May: read the event files and desired.yaml. May not: write anything, print.
"""

from __future__ import annotations

from pathlib import Path

from reconciler.runtime.events import follow_events as follow_events  # the surfaces' names
from reconciler.runtime.events import read_events as read_events


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
