"""A lab sharing one controller: its policy file, and user names.

``policy.yaml`` in a shared lab's state directory is written by ``service install --shared``
(``adapters/lab_layout.make_shared``) owned by the controller's user, 0640: members read it,
only its owner (or root) changes it. ``read_policy`` is what every intent edit and the
controller's judgement of a confirmation consult (``intent/owners.py``, ``model/trust.py``); it
fails closed (``model/policy.Policy.broken``) when the file is missing from a shared directory,
unreadable, owned by anyone but the state directory's owner, writable by the group or others,
or malformed.

May: read the policy file and the password database; write the policy file (``write_policy``).
May not: change any other file.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from reconciler.adapters.files import atomic_write, is_shared_dir
from reconciler.adapters.statedir import StateDir
from reconciler.model.policy import Policy, policy_from_document

POLICY_NAME: Final = "policy.yaml"
POLICY_MODE: Final = 0o640


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


def write_policy(state: StateDir, admins: Sequence[str], gid: int) -> bool:
    """A fresh policy file naming ``admins``; an existing one is kept (its owner edits it).
    True when written."""
    path = policy_path(state)
    if path.exists():
        return False
    atomic_write(path, policy_text(admins), mode=POLICY_MODE)
    os.chown(path, -1, gid)
    return True
