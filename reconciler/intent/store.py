"""Where a surface's use cases read and write: the desired file and its state directory, found
the one way (``--state-dir``, else ``$TPU_RECONCILER_STATE_DIR``, else one per file under
``$XDG_STATE_HOME``), and whether a controller is running to act on an edit.

The CLI, the MCP server and the TUI open their ``IntentEditor`` here instead of each resolving
the state directory itself; ``state_dir`` alone loads no more than the paths (the TUI's first
frame and ``status`` use it).

May: resolve paths, read the controller's lock record. May not: write anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.adapters.statedir import StateDir as StateDir  # the surfaces' name for it
from reconciler.adapters.statedir import default_state_dir
from reconciler.runtime.lock import read_holder

if TYPE_CHECKING:  # the edit engine (ruamel, the schema) loads when a store is opened
    from reconciler.intent.engine import IntentEditor


def state_dir(file: Path, given: Path | None = None) -> StateDir:
    """The state directory of ``file``: ``given``, else the default for it."""
    return StateDir(Path(given) if given is not None else default_state_dir(Path(file)))


def open_store(file: Path, given: Path | None = None) -> IntentEditor:
    """The intent of ``file`` with its state directory (``state_dir``)."""
    from reconciler.intent.engine import IntentEditor

    return IntentEditor(Path(file), state_dir(file, given))


def controller_running(store: IntentEditor) -> bool:
    """Whether a controller holds the state directory's lock (so it acts on an edit)."""
    return read_holder(store.state) is not None
