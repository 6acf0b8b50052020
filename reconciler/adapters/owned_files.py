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
    user: str
    controller: str  # the state directory's owner (the controller's user)
    controller_uid: int
    problem: str | None  # why it is not used (``model/trust.foreign_file``); None: usable

    @property
    def trusted(self) -> bool:
        return self.problem is None

    @property
    def by_controller(self) -> bool:
        """Owned by the controller's user or root (not merely by the reader)."""
        return self.problem is None and self.uid in (self.controller_uid, ROOT_UID)


def read_owned(path: Path) -> OwnedFile:
    """``path``'s content and owner. Raises FileNotFoundError when it is missing and OSError
    when it cannot be read; a symbolic link reads as a file nobody trusts."""
    directory_owner = path.parent.stat().st_uid
    controller = user_name(directory_owner)
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
        return OwnedFile(
            b"", link_owner, user_name(link_owner), controller, directory_owner, problem
        )
    with os.fdopen(fd, "rb") as f:
        uid = os.fstat(f.fileno()).st_uid
        content = f.read(_LIMIT)
    owner = user_name(uid)
    foreign = foreign_file(str(path), uid=uid, owner=owner, trusted=trusted, controller=controller)
    return OwnedFile(content, uid, owner, controller, directory_owner, foreign)
