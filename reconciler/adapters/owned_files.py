"""Reading a state file together with its owner, for the files whose owner decides whether
they are believed (``model/trust.py``: known_hosts, memory.json, confirm.json).

A file is opened without following a symbolic link (``O_NOFOLLOW``: a member's link to some
other file of the controller's user is refused, not read) and its owner is taken from the open
descriptor, so the content read is the content of the file whose owner was checked.

May: open, fstat and read one file; stat its directory; read the password database. May not:
write anything.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from reconciler.adapters.lab import user_name
from reconciler.model.trust import ROOT_UID, foreign_file, trusted_uids

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


def read_owned(path: Path) -> OwnedFile:
    """``path``'s content and owner. Raises FileNotFoundError when it is missing and OSError
    when it cannot be read; a symbolic link reads as a file nobody trusts. User names are
    looked up only for a refusal's message (a worker's every pin check reads the file)."""
    directory_owner = path.parent.stat().st_uid
    trusted = trusted_uids(reader=os.geteuid(), directory_owner=directory_owner)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        link_owner = path.lstat().st_uid
        problem = (
            f"{path} is a symbolic link (made by {user_name(link_owner)}), not the "
            "controller's file: it is not used (remove it)"
        )
        return OwnedFile(b"", link_owner, directory_owner, problem)
    with os.fdopen(fd, "rb") as f:
        uid = os.fstat(f.fileno()).st_uid
        content = f.read(_LIMIT)
    foreign = None
    if uid not in trusted:
        foreign = foreign_file(
            str(path),
            uid=uid,
            owner=user_name(uid),
            trusted=trusted,
            controller=user_name(directory_owner),
        )
    return OwnedFile(content, uid, directory_owner, foreign)
