"""The controller's memory file (``<state>/memory.json``): read at start, trusting only a file
the controller's user (or root) owns.

May: read and move aside the memory file, write events. May not: decide anything from it.
"""

from __future__ import annotations

import contextlib
import os

from reconciler.adapters.files import read_json
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
