"""Reading a state file together with its owner, for the files whose owner decides whether
they are believed (``model/trust.py``: known_hosts, memory.json, confirm.json, and a lab's
requests and member files).

A file is opened without following a symbolic link (``O_NOFOLLOW``: a member's link to some
other file of the controller's user is refused, not read) and without waiting on a FIFO
(``O_NONBLOCK``), and everything judged — owner, mode, link count, kind — is taken from the
open descriptor, so the content read is the content of the file that was checked.

May: open, fstat and read one file; stat its directory; read the password database. May not:
write anything.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from reconciler.adapters.lab import user_name
from reconciler.model.trust import ROOT_UID, trusted_uids, written_file_problem

_LIMIT: Final = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class OwnedFile:
    """One file's content and owner, and whether a process run by this user may believe it."""

    content: bytes
    uid: int
    controller_uid: int  # the state directory's owner (the controller's user)
    problem: str | None  # why it is not used (``model/trust.foreign_file``); None: usable

    @property
    def user(self) -> str:
        return user_name(self.uid)

    @property
    def trusted(self) -> bool:
        return self.problem is None

    @property
    def by_controller(self) -> bool:
        """Owned by the controller's user or root (not merely by the reader)."""
        return self.problem is None and self.uid in (self.controller_uid, ROOT_UID)


@dataclass(frozen=True, slots=True)
class OpenedFile:
    """One file as opened: its content and what ``fstat`` said of it."""

    path: Path
    content: bytes
    st: os.stat_result

    @property
    def regular(self) -> bool:
        return stat.S_ISREG(self.st.st_mode)

    @property
    def uid(self) -> int:
        return self.st.st_uid

    @property
    def user(self) -> str:
        return user_name(self.st.st_uid)


def open_unfollowed(path: Path, *, limit: int = _LIMIT) -> OpenedFile | None:
    """``path`` opened without following a symbolic link (None when it is one) and read up to
    ``limit`` bytes (nothing unless it is a regular file). Raises FileNotFoundError and other
    OSErrors."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return None
        raise
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        content = f.read(limit) if stat.S_ISREG(st.st_mode) else b""
    return OpenedFile(path, content, st)


def link_problem(path: Path) -> str:
    owner = user_name(path.lstat().st_uid)
    return (
        f"{path} is a symbolic link (made by {owner}), not the controller's file: it is not "
        "used (remove it)"
    )


def read_owned(path: Path) -> OwnedFile:
    """``path``'s content and owner. Raises FileNotFoundError when it is missing and OSError
    when it cannot be read; a symbolic link, and in a directory others may enter a file with
    several names or one others may write, reads as a file nobody trusts
    (``model/trust.written_file_problem``). User names are looked up only for a refusal's
    message (a worker's every pin check reads the file)."""
    folder = path.parent.stat()
    trusted = trusted_uids(reader=os.geteuid(), directory_owner=folder.st_uid)
    opened = open_unfollowed(path)
    if opened is None:
        return OwnedFile(b"", path.lstat().st_uid, folder.st_uid, link_problem(path))
    st = opened.st
    # In a directory nobody else may enter (one user's 0700 state directory) nobody else can
    # write the file or link it either: its links (a hard-link backup) and mode are its owner's
    # business, as before; in one others reach (a lab's), they decide.
    private = not folder.st_mode & 0o077
    nlink, mode = (1, st.st_mode & ~0o022) if private else (st.st_nlink, st.st_mode)
    problem = None
    if st.st_uid not in trusted or nlink != 1 or mode & 0o022 or not opened.regular:
        problem = written_file_problem(
            str(path),
            regular=opened.regular,
            nlink=nlink,
            mode=mode,
            uid=st.st_uid,
            owner=user_name(st.st_uid),
            trusted=trusted,
            controller=user_name(folder.st_uid),
        )
    return OwnedFile(opened.content, st.st_uid, folder.st_uid, problem)
