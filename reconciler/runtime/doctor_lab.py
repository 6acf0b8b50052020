"""``doctor``'s checks of what only some setups have, judged pure (facts in, a ``Check`` out):

- ``state_files`` and ``lab``, in a shared lab's state directory only (``adapters/lab_layout``):
  ``state_files`` judges the controller's own files in ``controller/`` as the controller does
  (``model/trust``): one owned by anyone but the controller's user or root, a symbolic link, a
  file with several names or one others may write is not used: a fail, with the fix. A
  ``confirm.json`` naming another user than its owner confirms nothing: a warning. ``lab``
  checks the layout itself: each directory's owner and mode (the state directory 3770,
  ``controller/`` 2750, ``inbox/`` 3730, the members' directory 3770), the intent lock, files
  the older layout left behind, the shared desired file (owned by the controller's user, root
  or an admin, writable by its owner alone) and each member's file (named after its owner, one
  name, writable by its owner alone, readable by the controller) — each wrong thing named with
  the command that fixes it.
- ``cloud_quotas``, with ``settings.quota_source: cloud`` only: whether the Cloud Quotas API
  answered (``adapters/cloud_quotas``; its endpoint can be overridden, as the emulator's is).

A setup without them gets no such line, so its report is as before.

May: compute. May not: do I/O, print.
"""

from __future__ import annotations

import stat
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Final

from reconciler.model.trust import (
    ROOT_UID,
    member_file_problem,
    written_file_problem,
)
from reconciler.runtime.doctor import Check, ok, skip

CONFIRM: Final = "confirm.json"
ROOT_MODE: Final = 0o3770
PRIVATE_MODE: Final = 0o2750
INBOX_MODE: Final = 0o3730
MEMBERS_MODE: Final = 0o3770


@dataclass(frozen=True, slots=True)
class OwnedFacts:
    """One entry as found (``lstat``: a link is never followed)."""

    name: str
    path: str
    uid: int
    owner: str  # the user name of ``uid``
    link: bool = False  # a symbolic link (never followed)
    recorded_user: object = None  # confirm.json: the "user" its document names
    mode: int = 0o100640  # st_mode
    nlink: int = 1

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode) and not self.link


@dataclass(frozen=True, slots=True)
class LabFacts:
    """A shared lab's state directory and desired files, as found."""

    controller_uid: int
    controller: str  # the controller's user's name
    root: OwnedFacts
    private: OwnedFacts | None  # controller/ (None: the older, flat layout)
    inbox: OwnedFacts | None
    intent_lock: OwnedFacts | None
    leftovers: tuple[OwnedFacts, ...] = ()  # the older layout's files still at the top
    desired: OwnedFacts | None = None
    shared_owners: Collection[int] = ()  # who may own the shared file (controller, root, admins)
    members_dir: OwnedFacts | None = None
    members: tuple[OwnedFacts, ...] = field(default_factory=tuple)


Problem = tuple[str, str]  # (what is wrong, the command that fixes it)


def _fold(name: str, fails: list[Problem], warns: list[Problem], fine: str) -> Check:
    if not fails and not warns:
        return ok(name, fine)
    found = fails or warns
    return Check(
        name,
        "fail" if fails else "warn",
        "; ".join(detail for detail, _ in found),
        "; ".join(dict.fromkeys(hint for _, hint in found)),
    )


def check_state_files(
    facts: Sequence[OwnedFacts], *, controller_uid: int, controller: str
) -> Check:
    """The controller's files as the controller judges them (its user reads them: the
    state directory's owner and root are trusted, nobody else)."""
    trusted = frozenset({controller_uid, ROOT_UID})
    fails: list[Problem] = []
    warns: list[Problem] = []
    for f in facts:
        if f.link:
            fails.append((
                f"{f.path} is a symbolic link (made by {f.owner}), not the controller's file: "
                "it is not used",
                f"rm {f.path}",
            ))  # fmt: skip
            continue
        said = written_file_problem(
            f.path, regular=stat.S_ISREG(f.mode), nlink=f.nlink, mode=f.mode, uid=f.uid,
            owner=f.owner, trusted=trusted, controller=controller,
        )  # fmt: skip
        if said is not None:
            fix = f"rm {f.path}"
            if f.uid not in trusted:
                fix += f"  (or, if you trust its content: sudo chown {controller} {f.path})"
            elif f.mode & 0o022:
                fix = f"chmod go-w {f.path}  (or {fix} if someone else may have written it)"
            fails.append((said, fix))
        elif f.name == CONFIRM and f.recorded_user not in (None, f.owner):
            warns.append((
                f"{f.path} names {f.recorded_user!r} but is owned by {f.owner}: it confirms "
                "nothing",
                f"rm {f.path}; the member who confirms runs `tpu-reconciler confirm` again",
            ))  # fmt: skip
    names = [f.name + (f" (by {f.owner})" if f.name == CONFIRM else "") for f in facts]
    fine = f"{', '.join(names)}: the controller's own" if names else "none written yet"
    return _fold("state_files", fails, warns, fine)


def _dir_problem(f: OwnedFacts | None, what: str, mode: int, owners: Collection[int],
                 controller: str, fix: str) -> Problem | None:  # fmt: skip
    if f is None:
        return (f"{what} is missing", fix)
    if not f.is_dir:
        return (f"{f.path} is not a directory", f"rm {f.path}; {fix}")
    if f.uid not in owners:
        return (
            f"{f.path} is {f.owner}'s, not the controller's user {controller}'s: it is not used",
            f"rm -r {f.path}; {fix}",
        )
    if stat.S_IMODE(f.mode) != mode:
        return (
            f"{f.path} is mode {stat.S_IMODE(f.mode):04o}, not {mode:04o}",
            f"chmod {mode:o} {f.path}",
        )
    return None


def check_lab(facts: LabFacts) -> Check:
    """A lab's layout and its intent files (see the module docstring)."""
    ctl, name = facts.controller_uid, facts.controller
    mine = (ctl, ROOT_UID)
    setup = f"tpu-reconciler service install --shared GROUP (as {name})"
    fails: list[Problem] = []
    warns: list[Problem] = []
    if facts.private is None:
        fails.append((
            f"{facts.root.path} has the lab's older layout: the controller's files are open "
            "to every member there",
            f"{setup}, or restart the lab's controller: either moves them into controller/",
        ))  # fmt: skip
    dirs = [
        (facts.root, "the state directory", ROOT_MODE, setup),
        *([(facts.private, "controller/", PRIVATE_MODE, setup)] if facts.private else []),
        (facts.inbox, "the lab's inbox/", INBOX_MODE, setup),
    ]
    for entry, what, mode, fix in dirs:
        problem = _dir_problem(entry, what, mode, mine, name, fix)
        if problem is not None:
            fails.append(problem)
    lock = facts.intent_lock
    if facts.private is not None and lock is None:
        fails.append(("the lab's intent lock is missing: members cannot edit", setup))
    elif lock is not None and (lock.link or lock.uid not in mine or lock.mode & 0o022):
        fails.append((
            f"{lock.path} is not the controller's user's read-only lock: a member may hold "
            "everyone's edits back",
            f"rm {lock.path}; {setup}",
        ))  # fmt: skip
    elif lock is not None and not lock.mode & 0o040:
        fails.append((f"members cannot open {lock.path}", f"chmod 640 {lock.path}"))
    for left in facts.leftovers:
        warns.append((
            f"{left.path} is left from the lab's older layout (by {left.owner}) and not used",
            f"rm {left.path}",
        ))  # fmt: skip
    _desired(facts, fails, warns)
    shown = "setgid and sticky, controller/ its user's alone, inbox/ sticky"
    return _fold("lab", fails, warns, f"{facts.root.path}: {shown}; {_members_said(facts)}")


def _desired(facts: LabFacts, fails: list[Problem], warns: list[Problem]) -> None:
    d = facts.desired
    if d is not None and d.uid not in facts.shared_owners:
        fails.append((
            f"{d.path} is {d.owner}'s, who may not own the lab's shared file: the controller "
            "does not use it (a member's save replaced it?)",
            f"as {facts.controller}: cp {d.path} {d.path}.new && mv {d.path}.new {d.path} "
            "(after checking its content)",
        ))  # fmt: skip
    elif d is not None and d.mode & 0o022:
        fails.append((
            f"{d.path} may be written by others than {d.owner}: the controller does not use it",
            f"chmod go-w {d.path}",
        ))  # fmt: skip
    m = facts.members_dir
    if m is None:
        warns.append((
            "no members' directory beside the desired file: members cannot keep slots of "
            "their own",
            f"tpu-reconciler service install --shared GROUP (as {facts.controller})",
        ))  # fmt: skip
    elif not m.is_dir or (m.mode & 0o022 and not m.mode & stat.S_ISVTX):
        fails.append((
            f"{m.path} is not a sticky directory: no member's file is used",
            f"chmod {MEMBERS_MODE:o} {m.path}",
        ))  # fmt: skip
    for f in facts.members:
        named = f.name.removesuffix(".yaml")
        said = member_file_problem(
            f.path, named=named, regular=stat.S_ISREG(f.mode) and not f.link, nlink=f.nlink,
            mode=f.mode, owner=f.owner,
        )  # fmt: skip
        if said is not None:
            fix = f"chmod go-w {f.path}" if f.mode & 0o022 else f"rm {f.path}"
            if named != f.owner:
                fix = f"mv {f.path} {f.path.rsplit('/', 1)[0]}/{f.owner}.yaml (as {f.owner})"
            fails.append((said, fix))
        elif not f.mode & 0o044:
            fails.append((
                f"{f.path} cannot be read by the controller: its slots stay as they were",
                f"chmod g+r {f.path} (as {f.owner})",
            ))  # fmt: skip


def _members_said(facts: LabFacts) -> str:
    n = len(facts.members)
    return f"{n} member file{'' if n == 1 else 's'}" if facts.members_dir else "no members' dir"


@dataclass(frozen=True, slots=True)
class QuotasFacts:
    endpoint: str
    limits: int | None = None  # chip limits read; None when the read failed
    error: str | None = None


QUOTAS_HINT: Final = (
    "enable the API (gcloud services enable cloudquotas.googleapis.com) and let the account "
    "read quotas (roles/cloudquotas.viewer), or set settings.quota_source: file"
)


def check_cloud_quotas(facts: QuotasFacts | None, blocked_by: str | None) -> Check:
    """``settings.quota_source: cloud``: the controller reads chip limits from this API."""
    if facts is None:
        return skip("cloud_quotas", f"not tried: {blocked_by or 'nothing to read'}")
    if facts.error is not None or facts.limits is None:
        return Check(
            "cloud_quotas",
            "fail",
            f"the Cloud Quotas API at {facts.endpoint} failed: {facts.error}",
            QUOTAS_HINT,
        )
    if facts.limits == 0:
        return Check(
            "cloud_quotas",
            "warn",
            f"the Cloud Quotas API at {facts.endpoint} answered with no Cloud TPU chip limit: "
            "only the file's quotas: hold creates back",
            QUOTAS_HINT.split(", or ")[0] + " if the project has TPU quota",
        )
    n = facts.limits
    return ok(
        "cloud_quotas",
        f"{n} Cloud TPU chip limit{'' if n == 1 else 's'} from the Cloud Quotas API at "
        f"{facts.endpoint}",
    )
