"""The snapshot ``status``, ``status --watch``, ``quota`` and ``timeline`` show: status.json
with ``controller`` filled in from the lock, or (no snapshot yet, or an unreadable one) the
desired file alone, saying so; only one owner's slots when asked. And the words ``status
--watch`` draws of it (``watch_view``, ``format_status``: ``core/render``'s), and the TUI's
first frame's reads (``read_snapshot``, ``lock_holder``, ``terminal_safe``, ``restart_words``).

May: read the state dir, the lock and desired.yaml. May not: write, print, call the cloud.
Heavy imports (the desired-file loader) happen only when there is no usable snapshot, so
``status`` stays fast.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.adapters.statedir import StateDir as StateDir  # the surfaces' name for it
from reconciler.adapters.status_file import read_status
from reconciler.core import render
from reconciler.core.terminal_text import escaped
from reconciler.errors import StatusUnreadable
from reconciler.intent import store
from reconciler.model.status import ControllerInfo, StatusSnapshot
from reconciler.runtime.lock import read_holder

if TYPE_CHECKING:
    from reconciler.model.desired import Desired

NO_SNAPSHOT = "no snapshot yet: start the controller (`tpu-reconciler run`) or use --live"


def current_status(file: Path, state_dir: Path | None, owner: str | None) -> StatusSnapshot:
    """The snapshot of ``file`` (its state directory ``state_dir``, else the default) with
    ``controller`` filled in from the lock; a desired-only one (with a ``note``) when the
    controller never ran or its snapshot cannot be read; ``owner``'s slots only when given."""
    state = store.state_dir(file, state_dir)
    pid = read_holder(state) if state.root.exists() else None
    try:
        snapshot = read_status(state.status)
        note = NO_SNAPSHOT if snapshot is not None else _why_none(state.root, pid)
    except StatusUnreadable as e:
        snapshot, note = None, f"{e}; showing desired.yaml only"
    if snapshot is None:
        snapshot = desired_only_status(file, note)
    snapshot = for_owner(owner, snapshot)
    return replace(snapshot, controller=ControllerInfo(pid is not None, pid))


def read_snapshot(path: Path) -> StatusSnapshot | None:
    """The controller's snapshot at ``path`` as it stands, or None when there is none yet;
    ``StatusUnreadable`` for one that cannot be read."""
    return read_status(path)


def lock_holder(state: StateDir) -> int | None:
    """The pid of the live controller holding the state directory's lock, or None."""
    return read_holder(state)


def _why_none(root: Path, pid: int | None) -> str:
    """Why there is no snapshot: a state disk with no room for it (named), a controller that
    has not written its first one yet, or no controller at all."""
    from reconciler.adapters.disk_space import disk_of, full_text

    disk = disk_of(root)
    if disk is not None and disk.full:
        who = f"the controller (pid {pid})" if pid is not None else "a controller"
        return (
            f"no snapshot: {full_text(disk)}, so {who} cannot write one there; free space "
            "(or use another --state-dir); `tpu-reconciler doctor` checks it"
        )
    if pid is not None:
        return f"no snapshot yet: the controller (pid {pid}) has not finished its first pass"
    return NO_SNAPSHOT


def for_owner(owner: str | None, snapshot: StatusSnapshot) -> StatusSnapshot:
    """Only ``owner``'s slots when it is given (``core/owners.only_owner``)."""
    if not owner:
        return snapshot
    from reconciler.core.owners import only_owner

    return only_owner(snapshot, owner)


def desired_only_status(file: Path, note: str) -> StatusSnapshot:
    """The snapshot of the desired file alone (no observation, no plan), with ``note``."""
    from reconciler.runtime.desired_loader import DesiredLoader

    loaded = DesiredLoader(file, os.environ).load()
    return desired_status(loaded.desired, file, [str(d) for d in loaded.errors], note)


def desired_status(
    desired: Desired | None, file: Path, errors: list[str], note: str
) -> StatusSnapshot:
    """The snapshot of an intent already loaded from ``file`` (with the file's ``errors``),
    without an observation or a plan, saying ``note``."""
    from reconciler.core.memory import Memory
    from reconciler.core.status import build_status

    snapshot = build_status(
        desired=desired,
        desired_file=str(file),
        errors=errors,
        observation=None,
        observed_at=None,
        memory=Memory(),
        plan=None,
        now=time.time(),
        backend=desired.settings.backend if desired else "?",
    )
    return replace(snapshot, note=note)


@dataclass(frozen=True)
class WatchView:
    """The words ``status --watch`` draws of a snapshot at one moment (the surface styles
    them): its age line, the table's columns and rows (one per slot, in order), the errors the
    NOTE column does not show whole, and each race group's line with whether it has won all
    it wants."""

    snapshot_line: str
    columns: tuple[str, ...]
    rows: list[tuple[str, ...]]
    errors: list[str]
    races: list[tuple[str, bool]]


def watch_view(snapshot: StatusSnapshot, now: float) -> WatchView:
    """``snapshot``'s words at ``now`` (``core/render``'s, as ``format_status`` uses them)."""
    return WatchView(
        snapshot_line=render.snapshot_line(snapshot, now),
        columns=render.status_columns(snapshot),
        rows=render.status_rows(snapshot, now),
        errors=render.error_lines(snapshot, now),
        races=[(render.race_line(r), len(r.winners) >= r.count) for r in snapshot.race_groups],
    )


def format_status(snapshot: StatusSnapshot, now: float) -> str:
    """``status``'s plain block for ``snapshot`` at ``now``."""
    return render.format_status(snapshot, now)


def terminal_safe(text: str) -> str:
    """``text`` with its control characters shown escaped (``\\x1b``), never sent to a
    terminal."""
    return escaped(text)


def restart_words(wait: float | None) -> str:
    """``restarting in 40s`` while a relaunch waits out its backoff (``wait`` seconds), else
    ""."""
    return render.restart_note(wait)
