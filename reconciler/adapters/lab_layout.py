"""A shared lab's state directory, laid out so that what the controller trusts rests on what the
kernel enforces: who may create, rename, link or write each file (docs/security.md).

    <state dir>/          the lab group's, 3770: setgid (new entries stay the group's) and
                          sticky (a member never renames or removes an entry not theirs)
      controller/         2750, the controller's user's: only it creates, renames, links or
                          writes here, members read. Its lock, status, events, memory, host-key
                          pins, OS Login cache, history, setup logs, the intent lock, the
                          confirmation it acts on and its own audit record; files 0640
      inbox/              3730: a member creates a request here (a confirmation, theirs by the
                          file's owner) but cannot list, rename or remove another's
      audit.jsonl         the intent edits' record, 0660, the controller's user's (so no member
                          can chmod it away from the others)
      operations.<user>.json, policy.yaml, secrets/

``ensure_lab_layout`` makes that layout (``service install --shared``) and repairs or completes
it each time the lab's controller starts: a lab of the older, flat layout has the controller's
own files moved into ``controller/`` (those another user owns are left where they were, unused,
and named), its shared ``intent.lock`` and ``confirm.json`` removed (a member may have made
them), and a ``controller/`` or ``inbox/`` someone else made renamed aside. Only the state
directory's owner (the controller's user) or root may do this. ``open_intent_lock`` opens the
edits' lock: in a lab, the controller's user's file, which a member opens read-only (enough for
flock) and cannot chmod; a refusal is one line naming the owner and the fix.

May: create, rename, chmod, chown (as root) and remove entries of one state directory; open the
intent lock. May not: read or write a file's content (but for creating the empty lock and
audit files).
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from reconciler.adapters.files import (
    READ_SHARED_DIR,
    READ_SHARED_FILE,
    SHARED_FILE,
    ensure_private_dir,
    open_shared,
)
from reconciler.adapters.lab import user_name, write_policy
from reconciler.adapters.statedir import INBOX_NAME, PRIVATE_NAME, StateDir
from reconciler.errors import NotPermitted, ServiceError

ROOT_MODE: Final = 0o3770
PRIVATE_MODE: Final = READ_SHARED_DIR
INBOX_MODE: Final = 0o3730
#: The members' intent files' directory beside the desired file (``adapters/member_files``).
MEMBERS_MODE: Final = 0o3770
#: The older, flat layout's files the new one no longer uses; a member may have made them.
STALE: Final = ("intent.lock", "confirm.json")
_CONTROLLERS: Final = frozenset(
    {"controller.lock", "status.json", "known_hosts", "oslogin_user", "oslogin_user.failed",
     "logs"}
)  # fmt: skip
_CONTROLLERS_PREFIXES: Final = ("events.jsonl", "memory.", "history.sqlite")


def is_controllers(name: str) -> bool:
    """Whether ``name`` (an entry of a state directory) is one of the controller's own files."""
    return name in _CONTROLLERS or name.startswith(_CONTROLLERS_PREFIXES)


@dataclass(frozen=True, slots=True)
class Layout:
    """What ``ensure_lab_layout`` did."""

    moved: tuple[str, ...] = ()  # the controller's files moved into controller/
    left: tuple[str, ...] = ()  # the controller's names owned by another user: left, unused
    removed: tuple[str, ...] = ()  # the older layout's shared files
    set_aside: tuple[str, ...] = ()  # a controller/ or inbox/ someone else made, renamed
    notes: tuple[str, ...] = ()  # what this user could not set up (``ensure_desired_layout``)

    @property
    def changed(self) -> bool:
        return bool(self.moved or self.left or self.removed or self.set_aside or self.notes)


def owner_of(state: StateDir) -> int:
    """The lab's controller's user: the state directory's owner."""
    return state.root.stat().st_uid


def may_run(state: StateDir) -> bool:
    """Whether this process may act as the lab's controller (its user, or root)."""
    return os.geteuid() in (owner_of(state), 0)


def _take(path: Path, owner: int) -> None:
    """As root, give what was just made to the controller's user."""
    if os.geteuid() == 0 and owner != 0:
        os.lchown(path, owner, -1)


def _own_dir(root: Path, name: str, mode: int, owner: int) -> str | None:
    """``root/name`` as a directory of the controller's user with ``mode``; one someone else
    made is renamed aside first (its name returned)."""
    path = root / name
    aside = None
    try:
        st = path.lstat()
    except FileNotFoundError:
        st = None
    if st is not None and not (stat.S_ISDIR(st.st_mode) and st.st_uid in (owner, 0)):
        aside = f"{name}.untrusted-{int(time.time())}"
        os.rename(path, root / aside)
        st = None
    if st is None:
        path.mkdir(mode=0o700)
        _take(path, owner)
    gid = root.stat().st_gid
    if path.lstat().st_gid != gid:
        os.lchown(path, -1, gid)
    os.chmod(path, mode)
    return aside


def ensure_lab_layout(state: StateDir) -> Layout:
    """Make, complete or repair ``state``'s lab layout (the module docstring). Idempotent."""
    root = state.root
    owner = root.stat().st_uid
    if os.geteuid() not in (owner, 0):
        raise NotPermitted(
            f"{root} is the lab's state directory of {user_name(owner)}: only that user (or "
            "root) runs its controller or sets it up"
        )
    try:
        os.chmod(root, ROOT_MODE)
        aside = [a for a in (_own_dir(root, PRIVATE_NAME, PRIVATE_MODE, owner),) if a]
        private = root / PRIVATE_NAME
        moved, left = [], []
        for name in sorted(os.listdir(root)):
            if not is_controllers(name):
                continue
            st = (root / name).lstat()
            if stat.S_ISLNK(st.st_mode) or st.st_uid not in (owner, 0):
                left.append(name)
            elif os.path.lexists(private / name):
                left.append(name)  # the controller's own copy there wins
            else:
                os.rename(root / name, private / name)
                moved.append(name)
        _tighten(private, owner)
        aside += [a for a in (_own_dir(root, INBOX_NAME, INBOX_MODE, owner),) if a]
        _create(private / "intent.lock", READ_SHARED_FILE, owner)
        _create(root / "audit.jsonl", SHARED_FILE, owner)
        removed = []
        for name in STALE:
            with contextlib.suppress(FileNotFoundError):
                (root / name).unlink()
                removed.append(name)
    except PermissionError as e:
        raise NotPermitted(
            f"cannot lay out the lab's state directory: {e.filename or root}: {e.strerror} "
            f"(run this as {user_name(owner)}, who owns {root})"
        ) from None
    return Layout(tuple(moved), tuple(left), tuple(removed), tuple(aside))


def _tighten(private: Path, owner: int) -> None:
    """The controller's files in ``private``: writable by their owner alone, group-readable
    (members read status, events, history, pins); its ``logs/`` stay the controller's."""
    for name in os.listdir(private):
        path = private / name
        st = path.lstat()
        mine = stat.S_ISREG(st.st_mode) and st.st_uid in (owner, 0)
        if mine and stat.S_IMODE(st.st_mode) != READ_SHARED_FILE:
            os.chmod(path, READ_SHARED_FILE)


def _create(path: Path, mode: int, owner: int) -> None:
    """An empty file of the controller's user at ``path`` with ``mode``, unless there is one."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        st = os.fstat(fd)
        if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) != mode:
            os.fchmod(fd, mode)
        if st.st_uid == 0 != owner and os.geteuid() == 0:
            os.fchown(fd, owner, -1)
    finally:
        os.close(fd)


def ensure_desired_layout(desired: Path, gid: int) -> list[str]:
    """The desired file's side of a lab: the shared file writable by its owner alone (the
    group reads it), and the members' directory beside it (``MEMBERS_MODE``, the group's).
    What this user cannot do is returned as notes, with the command that does it."""
    from reconciler.adapters.member_files import members_dir

    notes = []
    try:
        st = desired.stat()
        if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) & 0o062 != 0o040:
            if st.st_gid != gid:
                os.chown(desired, -1, gid)
            os.chmod(desired, stat.S_IMODE(st.st_mode) & ~0o022 | 0o040)
        elif st.st_mode & 0o022:
            notes.append(
                f"{desired} is {user_name(st.st_uid)}'s and others may write it: the controller "
                f"does not use it so (`chmod go-w {desired}` by {user_name(st.st_uid)})"
            )
    except OSError as e:
        notes.append(f"cannot set up {desired}: {e.strerror or e}")
    members = members_dir(desired)
    try:
        try:
            mst = members.lstat()
        except FileNotFoundError:
            members.mkdir(mode=0o700)
            mst = members.lstat()
        if stat.S_ISDIR(mst.st_mode) and mst.st_uid == os.geteuid():
            if mst.st_gid != gid:
                os.chown(members, -1, gid)
            os.chmod(members, MEMBERS_MODE)
        elif stat.S_IMODE(mst.st_mode) != MEMBERS_MODE:
            notes.append(
                f"{members} is {user_name(mst.st_uid)}'s: members' files need it sticky and "
                f"the lab's (chgrp GROUP {members} && chmod {MEMBERS_MODE:o} {members})"
            )
    except OSError as e:
        notes.append(f"cannot make {members}: {e.strerror or e}")
    folder = desired.parent
    with contextlib.suppress(OSError):
        fst = folder.stat()
        if fst.st_mode & 0o022 and not fst.st_mode & stat.S_ISVTX:
            notes.append(
                f"{folder} may be written by others: anyone there can replace {desired.name} "
                f"(the controller then refuses it): chmod +t {folder}"
            )
    return notes


def shared_file_owners(state: StateDir) -> frozenset[int] | None:
    """In a lab, who may own the shared desired file: the controller's user, root and the
    lab's admins (a member's copy is not the lab's intent). None outside a lab."""
    from reconciler.adapters.files import is_shared_dir
    from reconciler.adapters.lab import read_policy

    if not is_shared_dir(state.root):
        return None
    owners = {owner_of(state), 0}
    for admin in read_policy(state).admins:
        with contextlib.suppress(KeyError):
            owners.add(pwd.getpwnam(admin).pw_uid)
    return frozenset(owners)


@dataclass(frozen=True, slots=True)
class SharedSetup:
    group: str
    policy_written: bool
    layout: Layout
    notes: tuple[str, ...]


def make_shared(
    state: StateDir, group: str, *, admins: Sequence[str], desired: Path
) -> SharedSetup:
    """``service install --shared GROUP``: ``state`` and ``desired`` laid out as the lab
    ``group``'s (the module docstring; ``ensure_desired_layout``) and its policy file written
    (an existing one is kept: its owner edits it). Idempotent."""
    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        raise ServiceError(f"no group {group!r} on this machine (groupadd {group})") from None
    root = state.root
    ensure_private_dir(root)
    try:
        os.chown(root, -1, gid)
    except PermissionError as e:
        raise ServiceError(
            f"cannot give {root} to group {group!r}: {e.strerror} (you must own it and be a "
            "member of the group)"
        ) from None
    try:
        layout = ensure_lab_layout(state)
    except NotPermitted as e:
        raise ServiceError(str(e)) from None
    written = write_policy(state, admins, gid)
    return SharedSetup(group, written, layout, tuple(ensure_desired_layout(desired, gid)))


def open_intent_lock(state: StateDir) -> int:
    """A descriptor on the intent edits' lock, for flock. In a lab: the controller's user's
    file, opened read-only (a member can neither make nor chmod it); elsewhere created 0600
    as before. Raises ``NotPermitted`` naming the owner and the fix."""
    path = state.intent_lock
    if not state.lab:
        try:
            return open_shared(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)
        except PermissionError:
            raise NotPermitted(_lock_refusal(path, 0o660)) from None
    try:
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        if os.geteuid() in (owner_of(state), 0):
            _create(path, READ_SHARED_FILE, owner_of(state))
            return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        owner = user_name(owner_of(state))
        raise NotPermitted(
            f"the lab's intent lock {path} is missing: {owner}, the controller's user, makes it "
            "with `tpu-reconciler service install --shared GROUP` (or by starting the controller)"
        ) from None
    except OSError:
        raise NotPermitted(_lock_refusal(path, READ_SHARED_FILE)) from None


def _lock_refusal(path: Path, mode: int) -> str:
    try:
        st = path.lstat()
    except OSError as e:
        return f"cannot open the intent lock {path}: {e.strerror or e}"
    owner = user_name(st.st_uid)
    kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else f"mode {st.st_mode & 0o7777:04o}"
    return (
        f"cannot open the intent lock {path}: it is {owner}'s, {kind}. {owner} fixes it with "
        f"`chmod {mode:o} {path}`; in a lab, `tpu-reconciler service install --shared GROUP` "
        "by the controller's user gives it a lock no member can change"
    )
