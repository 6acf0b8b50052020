"""The snapshot ``status`` and ``status --watch`` show: status.json with ``controller`` filled
in from the lock, or (no snapshot yet, or an unreadable one) the desired file alone, saying so.

May: read the state dir, the lock and desired.yaml. May not: write, print, call the cloud.
Heavy imports (the desired-file loader) happen only when there is no usable snapshot.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.adapters.status_file import read_status
from reconciler.errors import StatusUnreadable
from reconciler.model.status import ControllerInfo, StatusSnapshot

if TYPE_CHECKING:
    import argparse

NO_SNAPSHOT = "no snapshot yet: start the controller (`tpu-reconciler run`) or use --live"


def current_status(args: argparse.Namespace) -> StatusSnapshot:
    """The snapshot with ``controller`` filled in from the lock; a desired-only one (with a
    ``note``) when the controller never ran or its snapshot cannot be read."""
    from reconciler.adapters.statedir import StateDir, default_state_dir
    from reconciler.runtime.lock import read_holder

    state = StateDir(Path(args.state_dir or default_state_dir(args.file)))
    pid = read_holder(state) if state.root.exists() else None
    try:
        snapshot = read_status(state.status)
        note = NO_SNAPSHOT if snapshot is not None else _why_none(state.root, pid)
    except StatusUnreadable as e:
        snapshot, note = None, f"{e}; showing desired.yaml only"
    if snapshot is None:
        snapshot = desired_only_status(args, note)
    snapshot = for_owner(args, snapshot)
    return replace(snapshot, controller=ControllerInfo(pid is not None, pid))


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


def for_owner(args: argparse.Namespace, snapshot: StatusSnapshot) -> StatusSnapshot:
    """Only ``--owner``'s slots when it is given (``core/owners.only_owner``)."""
    owner = getattr(args, "owner", None)
    if not owner:
        return snapshot
    from reconciler.core.owners import only_owner

    return only_owner(snapshot, owner)


def desired_only_status(args: argparse.Namespace, note: str) -> StatusSnapshot:
    from reconciler.core.memory import Memory
    from reconciler.core.status import build_status
    from reconciler.runtime.desired_loader import DesiredLoader

    loaded = DesiredLoader(args.file, os.environ).load()
    snapshot = build_status(
        desired=loaded.desired,
        desired_file=str(args.file),
        errors=[str(d) for d in loaded.errors],
        observation=None,
        observed_at=None,
        memory=Memory(),
        plan=None,
        now=time.time(),
        backend=loaded.desired.settings.backend if loaded.desired else "?",
    )
    return replace(snapshot, note=note)
