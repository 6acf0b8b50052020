"""The controller's memory file (``<state>/memory.json``): read at start, trusting only a file
the controller's user (or root) owns; ``Remembered`` holds the memory in force, shared by the
controller's pass and its actions, and saves it when it changed.

May: read, write and move aside the memory file, write events. May not: decide anything from
it.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from reconciler.adapters.files import read_json, write_json
from reconciler.adapters.owned_files import read_owned
from reconciler.adapters.statedir import StateDir
from reconciler.core import memory as mem
from reconciler.runtime.events import EventLog


def load_memory(state: StateDir, events: EventLog) -> mem.Memory:
    """The controller's memory from ``state.memory``; an empty one when it is absent, corrupt
    (moved aside as ``memory.corrupt``, ``memory.corrupt`` event) or owned by someone else
    (``memory.untrusted`` event: the controller's next save replaces it)."""
    try:
        owned = read_owned(state.memory)
    except FileNotFoundError:
        return mem.Memory()
    except OSError:
        owned = None  # read_json below says what is wrong
    if owned is not None and owned.problem is not None:
        # A lab member may have replaced it (model/trust): start afresh, say so; the
        # controller's next save replaces it with its own.
        events.emit("memory.untrusted", error=owned.problem)
        return mem.Memory()
    try:
        return mem.from_dict(read_json(state.memory))
    except FileNotFoundError:
        return mem.Memory()
    except ValueError as e:
        # Memory holds backoff and setup records, not intent: losing it re-runs setup
        # at worst. Keep the corrupt file for inspection and say so loudly.
        with contextlib.suppress(OSError):
            os.replace(state.memory, state.memory.with_suffix(".corrupt"))
        events.emit("memory.corrupt", error=str(e))
        return mem.Memory()


class Remembered:
    """The controller's memory in force (``value``, a frozen ``core.memory.Memory``: each
    change is a new value), handed to the pass and the actions alike."""

    def __init__(self, state: StateDir, events: EventLog) -> None:
        self._path = state.memory
        self.value = load_memory(state, events)
        self._saved = mem.to_dict(self.value)

    def save(self) -> None:
        """Write the memory when it differs from what was last written (atomic)."""
        doc = mem.to_dict(self.value)
        if doc != self._saved:
            write_json(self._path, doc)
            self._saved = doc


class InForce:
    """The ``memory`` attribute of a holder of ``remembered`` (a ``Remembered``): read and
    written through it, so the controller, its pass and its actions share one memory."""

    def __get__(self, holder: Any, owner: type | None = None) -> mem.Memory:
        memory: mem.Memory = holder.remembered.value
        return memory

    def __set__(self, holder: Any, value: mem.Memory) -> None:
        holder.remembered.value = value
