"""A lab sharing one controller: the group-owned state directory and its policy file.

``service install --shared GROUP`` calls ``make_shared``: the state directory becomes the
group's (setgid, 2770), its files group read-write (0660; ``adapters/files`` keeps new ones so),
its locks usable by every member, and ``policy.yaml`` is written there owned by the controller's
user, 0640: members read it, only its owner (or root) changes it. ``read_policy`` is what every
intent edit consults (``intent/owners.py``); it fails closed (``model/policy.Policy.broken``)
when the file is missing from a shared directory, unreadable, owned by anyone but the state
directory's owner, writable by the group or others, or malformed.

May: read the policy file; create, chgrp and chmod the state directory and its top-level files,
write the policy file. May not: touch ``secrets/`` (it stays 0700, its files 0600), or change
the desired file's directory (the command says what it needs).
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from reconciler.adapters.files import (
    SHARED_DIR,
    SHARED_FILE,
    atomic_write,
    ensure_private_dir,
    is_shared_dir,
)
from reconciler.adapters.statedir import StateDir
from reconciler.errors import ServiceError
from reconciler.model.policy import Policy, policy_from_document

POLICY_NAME: Final = "policy.yaml"
POLICY_MODE: Final = 0o640
#: Top-level entries of the state directory that stay private in a shared lab.
PRIVATE_ENTRIES: Final = frozenset({"secrets", POLICY_NAME})


def policy_path(state: StateDir) -> Path:
    return state.root / POLICY_NAME


def user_name(uid: int) -> str:
    """The user name of ``uid``, or ``uid<N>`` when the system has no entry for it."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid{uid}"


def read_policy(state: StateDir) -> Policy:
    """The policy edits in ``state`` obey: ``Policy.private()`` for one user's directory,
    the policy file's for a shared one, ``Policy.broken(why)`` when that cannot be trusted."""
    root = state.root
    if not is_shared_dir(root):
        return Policy.private()
    path = policy_path(state)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return Policy.broken(f"{path} is missing")
    except OSError as e:
        return Policy.broken(f"cannot read {path}: {e.strerror or e}")
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        controller = root.stat().st_uid
        if st.st_uid != controller:
            return Policy.broken(
                f"{path} is owned by {user_name(st.st_uid)}, not by the controller's user "
                f"{user_name(controller)}"
            )
        if st.st_mode & 0o022:
            return Policy.broken(f"{path} is writable by others than its owner")
        raw = f.read(65536)
    return parse_policy(raw, str(path))


def parse_policy(raw: bytes, where: str) -> Policy:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        doc = YAML(typ="safe", pure=True).load(raw.decode("utf-8"))
    except (YAMLError, UnicodeDecodeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return Policy.broken(f"{where} is not valid YAML: {first}")
    return policy_from_document(doc)


def policy_text(admins: Sequence[str], *, edit_others: bool = False) -> str:
    listed = ", ".join(admins)
    return "\n".join(
        [
            "# tpu-reconciler lab policy: read by every intent edit (CLI, MCP, TUI) of this",
            "# state directory. Only its owner (the controller's user) may change it; a policy",
            "# that is unreadable, malformed or writable by others grants nothing (fail closed).",
            f"admins: [{listed}]        # may edit every member's slots",
            f"edit_others: {'true' if edit_others else 'false'}   # true: any member may edit "
            "any member's slots",
            "caps: {}               # per-member limits, e.g. {alice: {chips: {v6e: 32}}}",
            "",
        ]
    )


@dataclass(frozen=True, slots=True)
class SharedSetup:
    group: str
    policy_written: bool
    notes: tuple[str, ...]


def make_shared(
    state: StateDir, group: str, *, admins: Sequence[str], desired: Path
) -> SharedSetup:
    """Make ``state`` the lab ``group``'s: see the module docstring. Idempotent; an existing
    policy file is kept as it is (its owner edits it)."""
    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        raise ServiceError(f"no group {group!r} on this machine (groupadd {group})") from None
    root = state.root
    ensure_private_dir(root)
    try:
        os.chown(root, -1, gid)
        os.chmod(root, SHARED_DIR)
        for entry in root.iterdir():
            if entry.name in PRIVATE_ENTRIES or entry.is_symlink():
                continue
            os.chown(entry, -1, gid)
            os.chmod(entry, SHARED_DIR if entry.is_dir() else SHARED_FILE)
    except PermissionError as e:
        raise ServiceError(
            f"cannot give {e.filename or root} to group {group!r}: {e.strerror} "
            "(you must own it and be a member of the group)"
        ) from None
    path = policy_path(state)
    written = not path.exists()
    if written:
        atomic_write(path, policy_text(admins), mode=POLICY_MODE)
        os.chown(path, -1, gid)
    return SharedSetup(group, written, tuple(_desired_notes(desired, gid, group)))


def _desired_notes(desired: Path, gid: int, group: str) -> list[str]:
    """Give the desired file to the group (read-write); say what its directory still needs:
    an edit writes a new file beside it and renames it into place."""
    notes = []
    try:
        os.chown(desired, -1, gid)
        os.chmod(desired, desired.stat().st_mode & 0o777 | 0o060)
    except PermissionError as e:
        notes.append(f"cannot give {desired} to group {group!r}: {e.strerror}")
    folder = desired.parent
    with contextlib.suppress(OSError):
        st = folder.stat()
        if st.st_gid != gid or st.st_mode & 0o2070 != 0o2070:
            notes.append(
                f"members' edits write a new {desired.name} beside the old one: give its "
                f"directory to the group (chgrp {group} {folder} && chmod 2770 {folder})"
            )
    return notes
