"""One controller per desired file: an flock on ``controller.lock`` in its state directory, and
one on the desired file itself.

The state directory's lock keeps two controllers off one state directory. It cannot see a
second controller that reaches the same desired file through another path (a hard link, a
bind mount) or with another ``--state-dir``: those have state directories of their own. So a
controller also flocks the desired file: a lock belongs to the inode, whatever path opened it.
An atomic save (every editor's, and ours) puts a new inode in place, so the controller follows
the file (``follow``, once a pass) and locks each new inode before letting go of the old one.

The kernel releases an flock when its holder dies (even by kill -9), so the lock, not the pid
written into the file, says whether a controller runs: ``read_holder`` probes the lock and reads
the pid only while the lock is held. The descriptor is not inherited by child processes
(Python opens files close-on-exec), so a gcloud or ssh child never keeps the lock alive.

The lock file is never unlinked or replaced: another process may already hold a descriptor on
this inode, and a fresh inode would let two controllers lock "the same" file.

In a shared lab's state directory only the lab's controller's user (or root) takes the lock —
anyone else is refused with ``NotPermitted`` — and, holding it, lays the directory out as a lab
(``adapters/lab_layout.ensure_lab_layout``: the controller's files into ``controller/``).

May: create the state directory and the lock file, flock it, write the holder's pid into it,
lay out a lab's state directory. May not: signal or kill the holder, or trust a pid whose lock
is free.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Final

from reconciler.adapters.statedir import StateDir
from reconciler.errors import ControllerAlreadyRunning, NotPermitted

if TYPE_CHECKING:
    from reconciler.adapters.lab_layout import Layout

#: ``read_holder`` takes a shared lock for an instant; a starting controller that collides with
#: that probe retries for this long before concluding that another controller holds the lock.
_ACQUIRE_GRACE: Final = 0.5
_RETRY_STEP: Final = 0.02
#: ``read_holder``'s answer when the lock is held but no pid could be read.
UNKNOWN_PID: Final = 0


def _try_flock(fd: int, operation: int) -> bool:
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _read_pid(fd: int) -> int | None:
    """The pid on the first line, when that line is complete and numeric."""
    raw = os.pread(fd, 64, 0)
    line, newline, _ = raw.partition(b"\n")
    if not newline or not line.strip().isdigit():
        return None
    pid = int(line)
    return pid if pid > 0 else None


class DesiredFileLock:
    """An exclusive flock on the desired file's inode (the file is opened read-only: the lock
    never changes its bytes, and editors and intent edits do not take it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._id: tuple[int, int] | None = None

    def _lock(self) -> None:
        """Lock the inode now at ``path`` if it is not the one held; a missing or unreadable file
        is locked once it can be opened."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            # missing, or unreadable (saved with umask 077 by another user): keep the inode
            # held; the loader reports the file and keeps the intent in force
            return
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) == self._id:
                os.close(fd)
                return
            deadline = time.monotonic() + _ACQUIRE_GRACE
            while not _try_flock(fd, fcntl.LOCK_EX):
                if time.monotonic() >= deadline:
                    raise ControllerAlreadyRunning(
                        f"another controller is running on {self.path} (reached through "
                        "another path or with another --state-dir); stop it first, or use it",
                        pid=None,
                    )
                time.sleep(_RETRY_STEP)
        except BaseException:
            os.close(fd)
            raise
        old, self._fd, self._id = self._fd, fd, (st.st_dev, st.st_ino)
        if old is not None:
            os.close(old)

    acquire = _lock
    follow = _lock

    def release(self) -> None:
        fd, self._fd, self._id = self._fd, None, None
        if fd is not None:
            os.close(fd)


class ControllerLock:
    """``with ControllerLock(state_dir, desired=path):`` — raises ControllerAlreadyRunning when
    another controller holds the state directory or the desired file."""

    def __init__(self, state_dir: StateDir, *, desired: Path | None = None) -> None:
        self.state_dir = state_dir
        self._fd: int | None = None
        self._desired = DesiredFileLock(desired) if desired is not None else None
        #: in a shared lab's state directory, what laying it out did (``adapters/lab_layout``)
        self.layout: Layout | None = None

    def follow(self) -> None:
        """After the desired file was replaced by a save, lock its new inode (once a pass).
        Raises ControllerAlreadyRunning when another controller took it first."""
        if self._desired is not None and self._fd is not None:
            self._desired.follow()

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            raise RuntimeError("ControllerLock is already held by this object")
        self.state_dir.ensure()
        # here, not at the top: read_holder (`status`) needs none of them
        from reconciler.adapters.files import is_shared_dir, open_shared
        from reconciler.adapters.lab import user_name
        from reconciler.adapters.lab_layout import (
            ensure_desired_layout,
            ensure_lab_layout,
            may_run,
            owner_of,
        )

        lab = is_shared_dir(self.state_dir.root)
        if lab and not may_run(self.state_dir):
            owner = user_name(owner_of(self.state_dir))
            raise NotPermitted(
                f"{self.state_dir.root} is the lab's state directory: its controller runs as "
                f"{owner}. Members change the intent (hold, release, add-slot, ... or their own "
                "file in desired.d/) and read status; they do not run the lab's controller"
            )
        # 0600, or 0660 in a shared lab's state directory: members' `status` probes it too
        fd = open_shared(self.state_dir.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)
        try:
            deadline = time.monotonic() + _ACQUIRE_GRACE
            while not _try_flock(fd, fcntl.LOCK_EX):
                if time.monotonic() >= deadline:
                    pid = _read_pid(fd)
                    shown = f"pid={pid}" if pid is not None else "pid=unknown"
                    raise ControllerAlreadyRunning(
                        f"a controller is already running for this desired file ({shown}); "
                        f"its lock is {self.state_dir.lock}. Stop it first, or use it.",
                        pid=pid,
                    )
                time.sleep(_RETRY_STEP)
            # One pwrite of the whole line, then cut what an older, longer pid left behind:
            # a reader sees either no complete line or a complete first line naming us.
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            os.ftruncate(fd, len(f"{os.getpid()}\n"))
            if lab:  # under the lock: the lab's layout made, completed or repaired (the lock
                # file itself may move into controller/, with this flock on it)
                layout = ensure_lab_layout(self.state_dir)
                if self._desired is not None:
                    gid = self.state_dir.root.stat().st_gid
                    notes = ensure_desired_layout(self._desired.path, gid)
                    layout = dataclasses.replace(layout, notes=tuple(notes))
                self.layout = layout
            if self._desired is not None:
                self._desired.acquire()
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        if self._desired is not None:
            self._desired.release()
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # a clean exit leaves no pid behind
        finally:
            os.close(fd)  # closing drops the flock

    def __enter__(self) -> ControllerLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def read_holder(state_dir: StateDir) -> int | None:
    """The pid of the live controller holding the lock, or None when nobody holds it.

    Creates nothing. A stale pid left by a killed controller is ignored, because its lock is
    free. While the lock is held but the pid is not yet written (an instant after a start),
    waits briefly for it; should it never appear (a holder frozen between its flock and its
    write), returns ``UNKNOWN_PID`` (0): "running, pid unknown". Never signal that value.
    """
    try:
        fd = os.open(state_dir.lock, os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        deadline = time.monotonic() + _ACQUIRE_GRACE
        while True:
            if _try_flock(fd, fcntl.LOCK_SH):
                fcntl.flock(fd, fcntl.LOCK_UN)
                return None
            pid = _read_pid(fd)
            if pid is not None:
                return pid
            if time.monotonic() >= deadline:
                return UNKNOWN_PID
            time.sleep(_RETRY_STEP)
    finally:
        os.close(fd)
