"""``doctor``'s ``state_disk`` check: the disk under the state directory, named, and whether
the controller can still write its snapshot, memory and events there.

Pure like ``runtime.doctor``: ``adapters.disk_space.disk_of`` looked. May: compute. May not:
do I/O, print.
"""

from __future__ import annotations

from reconciler.adapters.disk_space import Disk, full_text, size_text
from reconciler.runtime.doctor import Check, ok, skip

_HINT = (
    "free space on that disk (or move the state directory: --state-dir, "
    "$TPU_RECONCILER_STATE_DIR); until then the controller keeps no snapshot, memory or events"
)


def check_state_disk(root: str, disk: Disk | None) -> Check:
    if disk is None:
        return skip("state_disk", f"cannot look at the disk under {root}")
    if disk.full:
        return Check("state_disk", "fail", f"{root}: {full_text(disk)}", _HINT)
    room = f"{size_text(disk.free)} free of {size_text(disk.total)} on {disk.name()}"
    if disk.low:
        return Check("state_disk", "warn", f"{root}: only {room}", _HINT)
    return ok("state_disk", room)
