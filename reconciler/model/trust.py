"""Whose files the controller believes: the owner rules for a lab's group-writable state files.

In a shared lab's state directory (setgid, group-writable) any member can replace a file there
with one of their own: the rename makes the new file theirs. For the files that steer what the
controller trusts or deletes, the file's owner (which a member cannot forge) decides:

- ``known_hosts`` (the pinned SSH host keys) and ``memory.json`` are the controller's own: only
  a file owned by the state directory's owner (the controller's user), by root or by the user
  reading it is used. Anything else is refused with one line naming the file and its owner
  (``foreign_file``): a member's known_hosts could make the controller trust their machine
  with the SSH agent it forwards.
- ``confirm.json`` (a confirmation of the deletes the delete guard holds) is written by whoever
  runs ``tpu-reconciler confirm``: its owner *is* the confirming user. The document also
  records that user; a document whose recorded user is not its owner is ignored, and so is a
  confirmation by a member who may not change every slot it deletes under the lab's policy
  (``confirm_refusal``: the same rule as an edit of those slots). The controller's user and
  root may confirm anything.

Pure: uids, names and the policy in, a reason (or None) out; no file is read.
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
