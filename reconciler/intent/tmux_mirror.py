"""The tmux SSH mirror for ``tpu-reconciler tmux status|close``: its server
(``adapters.tmux.TmuxMirror``) and the ACTIVE slots that judge its windows, from the
controller's ``status.json`` (never the cloud).

May: read the state dir's snapshot, drive ``adapters.tmux.TmuxMirror`` (list windows; close
the ones a person named). May not: start a tmux server, create windows (the controller's job),
edit any file, print. libtmux is imported only when a mirror is made.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reconciler.adapters.tmux import TmuxInventory as TmuxInventory
    from reconciler.adapters.tmux import TmuxMirror as TmuxMirror
    from reconciler.adapters.tmux import TmuxWindow as TmuxWindow


def active_slots(state_dir: Path) -> tuple[frozenset[str] | None, str]:
    """ACTIVE slot names from status.json, or None with the reason they are unknown."""
    from reconciler.adapters.statedir import StateDir
    from reconciler.adapters.status_file import read_status
    from reconciler.errors import StatusUnreadable

    path = StateDir(state_dir).status
    try:
        snapshot = read_status(path)
    except StatusUnreadable as e:
        return None, str(e)
    if snapshot is None:
        return None, f"no status snapshot at {path} (has the controller run?)"
    when = snapshot.generated_at or "time unknown"
    return snapshot.active(), f"active slots from {path} ({when})"


def mirror(socket: str | None) -> TmuxMirror:
    """The mirror on tmux server ``socket`` (``tmux -L``; None: tmux's default)."""
    from reconciler.adapters.tmux import TmuxMirror

    return TmuxMirror(socket)
