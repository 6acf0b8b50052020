"""A lab's member intent files, ``<stem>.d/<user>.yaml`` beside the shared desired file, read as
the kernel vouches for them (``model/intent_parts`` says what they may hold).

The directory is the lab's, sticky (``service install --shared`` makes it 3770): every member
creates their own file there and nobody renames or removes another's. A file counts only when
``model/trust.member_file_problem`` finds nothing wrong with what ``fstat`` says of it — named
after its owner, a regular file with one name, writable by its owner alone — so whoever the
file says owns a slot is whoever the kernel says wrote it. Names that are not ``<user>.yaml``
(an editor's swap, backup and test files) are left alone. A directory others may write without
the sticky bit is refused as a whole: there a member could replace another's file.

May: list one directory, open (never following a symbolic link, never waiting on a FIFO) and
read its files, read the password database. May not: write anything.
"""

from __future__ import annotations

import hashlib
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from reconciler.adapters.owned_files import open_unfollowed
from reconciler.errors import UnsafeName
from reconciler.model.names import check_user
from reconciler.model.trust import member_file_problem

SUFFIX: Final = ".yaml"
_NAME: Final = re.compile(r"^(?P<user>[A-Za-z0-9_][A-Za-z0-9_.-]*)\.yaml$")
_LIMIT: Final = 4 * 1024 * 1024 + 1  # the loader says "larger than 4 MiB" past that


def members_dir(desired: Path) -> Path:
    """``desired.yaml`` -> ``desired.d``: where the members' files of that desired file live."""
    return desired.parent / f"{desired.stem}.d"


def member_path(desired: Path, user: str) -> Path:
    return members_dir(desired) / f"{check_user(user)}{SUFFIX}"


@dataclass(frozen=True, slots=True)
class MemberFile:
    """One member's file as found: its bytes when it may be used, else why not."""

    path: Path
    named: str  # the user its name says
    data: bytes | None
    uid: int | None = None
    owner: str | None = None
    problem: str | None = None

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.data).hexdigest() if self.data is not None else ""


def directory_problem(directory: Path) -> str | None:
    """Why no file of ``directory`` may be used (None: they may, or it does not exist)."""
    try:
        st = directory.lstat()
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"{directory}: cannot look at it: {e.strerror or e}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{directory} is not a directory, so no member's file is read (remove it)"
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        return (
            f"{directory} may be written by others but has no sticky bit: a member could "
            f"replace another's file, so none is read (chmod +t {directory})"
        )
    return None


def read_member_files(directory: Path) -> tuple[list[MemberFile], str | None]:
    """Every ``<user>.yaml`` in ``directory`` (sorted by name), and why none may be used."""
    problem = directory_problem(directory)
    if problem is not None:
        return [], problem
    try:
        names = sorted(entry.name for entry in directory.iterdir())
    except FileNotFoundError:
        return [], None
    except OSError as e:
        return [], f"{directory}: cannot list it: {e.strerror or e}"
    found = []
    for name in names:
        match = _NAME.match(name)
        if match is None:
            continue
        try:
            named = check_user(match["user"])
        except UnsafeName:
            continue
        found.append(_read(directory / name, named))
    return found, None


def _read(path: Path, named: str) -> MemberFile:
    try:
        opened = open_unfollowed(path, limit=_LIMIT)
    except FileNotFoundError:  # removed since the listing
        return MemberFile(path, named, None, problem=f"{path}: removed while being read")
    except PermissionError:
        return MemberFile(
            path,
            named,
            None,
            problem=f"{path}: cannot read it (permission denied): its owner makes it readable "
            f"to the controller (chmod g+r {path})",
        )
    except OSError as e:
        return MemberFile(path, named, None, problem=f"{path}: cannot read it: {e.strerror or e}")
    if opened is None:
        return MemberFile(
            path, named, None, problem=f"{path} is a symbolic link, so it is not read (remove it)"
        )
    st = opened.st
    problem = member_file_problem(
        str(path),
        named=named,
        regular=opened.regular,
        nlink=st.st_nlink,
        mode=st.st_mode,
        owner=opened.user,
    )
    data = opened.content if problem is None else None
    return MemberFile(path, named, data, st.st_uid, opened.user, problem)
