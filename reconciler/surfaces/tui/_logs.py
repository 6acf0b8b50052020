"""Where the logs pane's lines come from: every worker of a slot's workload, interleaved.

A ``LogSource`` takes the selected slot and yields lines that carry ``worker``, ``attempt``
and ``text`` (``model.workload.LogLine``); the pane prints each as ``[w3] text`` and keeps
following. The app gets one injected (tests use a real generator of their own); by default it
is ``intent.log_stream.follow_workload`` (the workers' runner, over SSH).

May: stream from the workers through ``intent.log_stream`` (read only). May not: import
textual, write anything, call the cloud (the SSH user is the configured or cached one).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from reconciler.intent.log_stream import follow_workload, log_text
from reconciler.surfaces.tui._frame import SlotRow

if TYPE_CHECKING:
    from reconciler.intent.store import StateDir

UNAVAILABLE = "workloads are not available in this version: there are no workload logs to show"


class Line(Protocol):
    @property
    def worker(self) -> int: ...
    @property
    def attempt(self) -> int: ...
    @property
    def text(self) -> str: ...


LogSource = Callable[[SlotRow], AsyncIterator[Line]]


def format_line(line: Line) -> str:
    return log_text(line.worker, line.text)


def default_source(file: Path, state: StateDir) -> LogSource:
    """``intent.log_stream.follow_workload`` for the slot's node (SSH and the adapter load on
    first use)."""

    def source(row: SlotRow) -> AsyncIterator[Line]:
        return follow_workload(file, state, row.name)

    return source
