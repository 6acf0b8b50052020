"""Whose files the controller believes: the rules for a lab's state files, its members'
requests and its members' intent files.

Trust rests on what the kernel enforces, never on a file's content or on who saved last:

- A shared lab keeps the controller's own files — ``known_hosts`` (the pinned SSH host keys),
  ``memory.json``, the lock, the confirmation it acts on — in a directory only the
  controller's user can write (``adapters/lab_layout``). Such a file is used only when it is
  what that user wrote (``written_file_problem``): a regular file with one name (a hard link
  lets another name reach it), writable by nobody but its owner, and owned by the controller's
  user, root or the user reading it (``foreign_file``). Otherwise it is refused with one line
  naming the file and what is wrong: a member's known_hosts could make the controller trust
  their machine with the SSH agent it forwards.
- A member's request (a confirmation of guarded deletes, in the lab's sticky ``inbox/``) is
  the member's because the kernel says the file is theirs: ``request_problem`` accepts only a
  regular file with one name, writable by its owner alone, owned by a member (not by the
  controller's user or root, who write in the controller's directory directly). Its owner
  must then be allowed to change every slot it deletes (``confirm_refusal``: the same rule as
  an edit of those slots, under the lab's policy).
- A member's intent file (``desired.d/<user>.yaml``) declares that user's slots: it counts only
  when it is named after its owner, has one name and nobody but its owner may write it
  (``member_file_problem``).

Pure: uids, names, modes and the policy in, a reason (or None) out; no file is read.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Final

from reconciler.model.policy import Policy, refusal

ROOT_UID: Final = 0


def trusted_uids(*, reader: int, directory_owner: int) -> frozenset[int]:
    """The owners whose state files a process run as ``reader`` uses: the state directory's
    owner (the controller's user), root, and the reader itself."""
    return frozenset({reader, directory_owner, ROOT_UID})


def foreign_file(
    path: str, *, uid: int, owner: str, trusted: Collection[int], controller: str
) -> str | None:
    """Why the file at ``path`` (owned by ``uid``, named ``owner``) is not used; None when it
    may be."""
    if uid in trusted:
        return None
    return (
        f"{path} is owned by {owner}, not by the controller's user {controller}: a lab member "
        f"may have replaced it, so it is not used (remove it, or `chown {controller} {path}` "
        "if you trust its content)"
    )


def _shape_problem(path: str, *, regular: bool, nlink: int, mode: int, owner: str) -> str | None:
    """What no trusted file may be: anything but a regular file, a file with several names,
    a file someone besides its owner may write."""
    if not regular:
        return f"{path} is not a regular file, so it is not used (remove it)"
    if nlink != 1:
        return (
            f"{path} has {nlink} names (a hard link): another name may change it, so it is "
            "not used (remove it)"
        )
    if mode & 0o022:
        return (
            f"{path} is writable by others than its owner {owner} (mode {mode & 0o7777:04o}), "
            f"so it is not used (`chmod go-w {path}` if you trust its content)"
        )
    return None


def written_file_problem(
    path: str,
    *,
    regular: bool,
    nlink: int,
    mode: int,
    uid: int,
    owner: str,
    trusted: Collection[int],
    controller: str,
) -> str | None:
    """Why a file the controller wrote for itself is not used; None when it may be."""
    return _shape_problem(
        path, regular=regular, nlink=nlink, mode=mode, owner=owner
    ) or foreign_file(path, uid=uid, owner=owner, trusted=trusted, controller=controller)


def request_problem(
    path: str, *, regular: bool, nlink: int, mode: int, uid: int, owner: str,
    controller_uid: int,
) -> str | None:  # fmt: skip
    """Why a file in the lab's inbox is not a member's request; None when it is ``owner``'s."""
    shape = _shape_problem(path, regular=regular, nlink=nlink, mode=mode, owner=owner)
    if shape is not None:
        return shape
    if uid in (controller_uid, ROOT_UID):
        return (
            f"{path} is owned by {owner}, who confirms in the controller's own directory, "
            "never through the inbox: it is not used (remove it)"
        )
    return None


def member_file_problem(
    path: str, *, named: str, regular: bool, nlink: int, mode: int, owner: str
) -> str | None:
    """Why ``desired.d/<named>.yaml`` (owned by ``owner``) declares nobody's slots."""
    shape = _shape_problem(path, regular=regular, nlink=nlink, mode=mode, owner=owner)
    if shape is not None:
        return shape
    if named != owner:
        return (
            f"{path} is owned by {owner}: a member's file is named after its owner "
            f"({owner}.yaml), so it is not used"
        )
    return None


def slot_of_delete(delete_id: str) -> str:
    """The slot a ``core.control.delete_id`` (``zone/slot@uid``) deletes."""
    return delete_id.partition("/")[2].rpartition("@")[0] or delete_id


def confirm_refusal(
    policy: Policy,
    *,
    file_user: str,
    trusted: bool,
    recorded_user: object,
    deletes: Collection[str],
    owners: Mapping[str, str | None],
) -> str | None:
    """Why a ``confirm.json`` owned by ``file_user`` confirms nothing; None when it counts.

    ``trusted``: the file is owned by the controller's user or root (they may confirm
    anything). ``recorded_user``: the ``user`` the document names (absent in one written
    before users were recorded: then the owner alone speaks). ``owners``: the owner of each
    slot the controller knows (its intent, and slots that left it while it ran); a deleted
    slot whose owner is unknown counts as someone else's in a shared lab, so only an admin (or
    a policy with ``edit_others``) confirms it."""
    if recorded_user is not None and recorded_user != file_user:
        return (
            f"confirm.json names {recorded_user!r} but is owned by {file_user}: "
            "a confirmation counts only from the user who wrote it"
        )
    if trusted or not policy.shared:
        return None
    for delete in sorted(deletes):
        slot = slot_of_delete(delete)
        if slot in owners:
            reason = refusal(policy, file_user, owners[slot], f"slot {slot!r}")
        elif policy.problem is None and (file_user in policy.admins or policy.edit_others):
            reason = None
        else:
            admins = ", ".join(sorted(policy.admins)) or "none named"
            reason = (
                f"slot {slot!r} is not in the intent and its owner is not known, so only a "
                f"lab admin ({admins}) may confirm its delete"
            )
        if reason is not None:
            return f"the confirmation by {file_user} is ignored: {reason}"
    return None
