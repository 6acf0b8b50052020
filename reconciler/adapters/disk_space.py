"""How much room the disk under a directory has: ``disk_of(path)`` names the filesystem (its
device, type and mount point, from ``/proc/self/mountinfo``) and its free and total bytes, and
whether it is mounted read-only. ``status`` and ``doctor`` use it to say that a state
directory is on a full disk instead of guessing that the controller is not running.

May: statvfs, read ``/proc/self/mountinfo``. May not: write anything, print.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

#: Below this many free bytes a state directory is full: a snapshot of many slots, the memory
#: and an event no longer fit.
FULL_BELOW: Final = 1 << 20
#: Below this the disk is nearly full (a warning).
LOW_BELOW: Final = 64 << 20


@dataclass(frozen=True, slots=True)
class Disk:
    path: str  # the directory asked about (or its nearest existing parent)
    mount: str  # the mount point it is under
    device: str  # "tmpfs", "/dev/sda1", ...
    fstype: str
    free: int  # bytes an unprivileged writer may use
    total: int
    read_only: bool

    @property
    def full(self) -> bool:
        return self.read_only or self.free < FULL_BELOW

    @property
    def low(self) -> bool:
        return self.free < LOW_BELOW

    def name(self) -> str:
        """``tmpfs at /srv/state`` / ``/dev/sda1 (ext4) at /``."""
        kind = f" ({self.fstype})" if self.fstype and self.fstype != self.device else ""
        return f"{self.device or '?'}{kind} at {self.mount}"


def _existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path("/")


def _mount_of(path: Path) -> tuple[str, str, str]:
    """(mount point, device, fstype) of the longest mount point containing ``path``."""
    best = ("/", "", "")
    with contextlib.suppress(OSError), open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if " - " not in line or len(fields) < 5:
                continue
            mount = fields[4].replace("\\040", " ")
            after = line.split(" - ", 1)[1].split()
            if len(after) < 2:
                continue
            inside = str(path) == mount or str(path).startswith(mount.rstrip("/") + "/")
            if inside and len(mount) >= len(best[0]):
                best = (mount, after[1], after[0])
    return best


def disk_of(path: Path) -> Disk | None:
    """The disk ``path`` is (or would be) on; None when it cannot be looked at."""
    where = _existing(Path(os.path.abspath(path)))
    try:
        st = os.statvfs(where)
    except OSError:
        return None
    mount, device, fstype = _mount_of(where.resolve())
    return Disk(
        path=str(where),
        mount=mount,
        device=device,
        fstype=fstype,
        free=st.f_bavail * st.f_frsize,
        total=st.f_blocks * st.f_frsize,
        read_only=bool(st.f_flag & os.ST_RDONLY),
    )


def size_text(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} B"


def full_text(disk: Disk) -> str:
    """``the state disk tmpfs at /srv/state is full (12 KiB of 256.0 KiB free)``."""
    if disk.read_only:
        return f"the disk {disk.name()} is mounted read-only"
    room = f"{size_text(disk.free)} of {size_text(disk.total)} free"
    return f"the disk {disk.name()} is full ({room})"
