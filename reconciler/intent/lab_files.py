"""Which file an intent edit writes when a lab's members keep their own intent files.

With ``<stem>.d/`` beside the desired file (``service install --shared`` makes it; see
``model/intent_parts``) the intent is the shared file plus one file per member, and an edit
writes exactly one of them, chosen from what it names (``route``):

- a lab-wide edit (``Edit.lab_wide``: suspend, resume, the poll intervals, tmux for all) writes
  the shared file;
- an edit of existing slots or race groups writes the file that declares them (all of them in
  one file: an edit changes one file, and a race group's candidates share its file);
- an edit that names nothing existing (a new slot, a new race group) writes the editing user's
  own file, ``<stem>.d/<user>.yaml``, made on first use (0640, theirs).

Whether the user may write that file is the kernel's to say and is checked first (``writable``):
a member's file is its owner's alone (root may edit it for them and it stays theirs), the shared
file its owner's (the controller's user, the lab's admin). A refusal is ``NotYourSlot`` naming
whose it is, or ``NotPermitted`` for the lab-wide file, both exit 77. After the edit, a name the
edited file now shares with another file is refused at both places (``clashes``).

Without ``<stem>.d/`` nothing here applies: every edit writes the one desired file, as always.

May: read the desired file and the members' files, create the user's own member file. May not:
write any other file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.adapters.lab import user_name
from reconciler.adapters.member_files import member_path, members_dir, read_member_files
from reconciler.errors import (
    Diagnostic,
    EditRejected,
    InvalidDesiredState,
    NotPermitted,
    NotYourSlot,
)
from reconciler.intent.edits import Edit
from reconciler.intent.owners import Actor
from reconciler.model.desired import Desired
from reconciler.model.intent_parts import (
    Part,
    combine,
    declared_twice,
    merge,
    parse_member,
    parse_shared,
)

#: A member's file as this tool first writes it.
TEMPLATE = (
    "# {user}'s slots in the lab (slots, race_groups and generate; lab-wide settings are in\n"
    "# ../{shared}). Only {user} (or root) changes this file; what it declares is {user}'s.\n"
    "slots: []\n"
)


@dataclass(frozen=True, slots=True)
class Target:
    """The file one edit writes."""

    path: Path
    source: str  # as diagnostics name it
    owner: str | None = None  # a member's file: its owner (None: the shared file)
    uid: int | None = None


@dataclass(frozen=True, slots=True)
class LabView:
    """The lab's files as they are now: the shared file's part and each valid member's."""

    shared: Part
    members: tuple[Part, ...]
    uids: Mapping[str, int]  # member file -> its owner's uid

    @property
    def parts(self) -> tuple[Part, ...]:
        return (self.shared, *self.members)

    @property
    def desired(self) -> Desired:
        """The intent of the files as they are now (a member's file that clashes is left
        out, as the controller would keep its version in force)."""
        parts, _ = combine(self.parts, {self.shared.source: self.shared})
        return merge(parts)


class LabFiles:
    """The desired file ``file`` (as given) and its members' directory."""

    def __init__(self, file: Path, env: Mapping[str, str]) -> None:
        self.file = file
        self.source = str(file)
        self.members = members_dir(file)
        self.env = env
        self._cache: dict[tuple[str, str], Part] = {}

    @property
    def active(self) -> bool:
        """Whether members keep files of their own here."""
        try:
            return stat.S_ISDIR(self.members.lstat().st_mode)
        except OSError:
            return False

    def _cached(self, key: tuple[str, str], make: Any) -> Part:
        part = self._cache.get(key)
        if part is None:
            part = make()
            self._cache = {k: v for k, v in self._cache.items() if k[0] != key[0]}
            self._cache[key] = part
        return part

    def shared_part(self, text: str) -> Part:
        """Raises InvalidDesiredState."""
        return self._cached((self.source, text), lambda: parse_shared(text, self.source, self.env))

    def view(self, shared_text: str) -> LabView:
        """The shared file (``shared_text``) and every member's file that is valid now."""
        shared = self.shared_part(shared_text)
        assert shared.context is not None
        found, _ = read_member_files(self.members)
        parts, uids = [], {}
        for member in found:
            if member.data is None or member.owner is None or member.uid is None:
                continue
            source = str(member.path)
            try:
                text = member.data.decode("utf-8-sig")
                part = self.member_part(text, source, member.owner, shared)
            except (InvalidDesiredState, UnicodeDecodeError):
                continue
            parts.append(part)
            uids[source] = member.uid
        return LabView(shared, tuple(parts), uids)

    def member_part(self, text: str, source: str, owner: str, shared: Part) -> Part:
        """Raises InvalidDesiredState."""
        assert shared.context is not None
        context = shared.context
        return self._cached(
            (source, f"{shared.digest}\0{text}"),
            lambda: parse_member(text, source, owner=owner, context=context),
        )

    def own_target(self, actor: Actor) -> Target:
        path = member_path(self.file, actor.user)
        return Target(path, str(path), actor.user, actor.uid)

    def route(self, edit: Edit, actor: Actor, view: LabView) -> Target:
        """The file ``edit`` writes (see the module docstring)."""
        shared = Target(self.file, self.source)
        if edit.lab_wide:
            return shared
        where: dict[str, Target] = {name: shared for name in view.shared.names}
        for part in view.members:
            assert part.owner is not None
            target = Target(Path(part.source), part.source, part.owner, view.uids[part.source])
            where.update({name: target for name in part.names})
        named = [n for n in edit.named if n in where]
        files = {where[n].source: where[n] for n in named}
        if len(files) > 1:
            said = ", ".join(f"{n!r} is in {where[n].source}" for n in dict.fromkeys(named))
            raise EditRejected(f"an edit changes one file, and these are in several: {said}")
        if files:
            return next(iter(files.values()))
        return self.own_target(actor)

    @staticmethod
    def what(edit: Edit, view: LabView) -> str:
        """What ``edit`` is about, for a refusal: ``slot 'a1'``, ``race group 'g'``."""
        for key in ("name", "group"):
            name = edit.args.get(key)
            if not isinstance(name, str):
                continue
            for part in view.parts:
                if any(s.name == name for s in part.desired.slots):
                    return f"slot {name!r}"
                if any(g.name == name for g in part.desired.race_groups):
                    return f"race group {name!r}"
        return "what this edit changes"

    def clashes(self, target: Target, part: Part, view: LabView) -> list[Diagnostic]:
        """The names ``part`` (the edited ``target``) now shares with the lab's other files,
        at both places."""
        out: list[Diagnostic] = []
        for other in view.parts:
            if other.source == target.source:
                continue
            for name in sorted(part.names & other.names):
                out += [declared_twice(name, part, other), declared_twice(name, other, part)]
        return out


def writable(target: Target, actor: Actor, shared_source: str, members: Path, what: str) -> None:
    """Refuse, before anything is read or asked, an edit of a file ``actor`` may not write.
    ``what``: what the edit is about, for the message."""
    if target.owner is not None:
        if target.uid is not None and actor.uid not in (target.uid, 0):
            raise NotYourSlot(
                f"{what} belongs to {target.owner}, not to {actor.user}: it is declared in "
                f"{target.source}, which only {target.owner} (or root) may change",
                owner=target.owner,
            )
        return
    if os.access(target.path, os.W_OK):
        return
    try:
        owner = user_name(target.path.stat().st_uid)
    except OSError:
        owner = "its owner"
    raise NotPermitted(
        f"{shared_source} is the lab's shared file, {owner}'s: lab-wide settings (suspend, "
        f"poll intervals, defaults, quotas) and the slots declared there are changed by "
        f"{owner}, the lab's admin; your own slots live in {members}/{actor.user}.yaml"
    )


def create_own(target: Target, shared_source: str) -> None:
    """The user's own member file, made with ``TEMPLATE`` unless it is there (0640: the lab's
    group, the controller among it, reads it; nobody else writes it)."""
    try:
        fd = os.open(
            target.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640
        )
    except FileExistsError:
        return
    except PermissionError as e:
        raise NotPermitted(
            f"cannot make {target.source}: {e.strerror} (the lab's members' directory lets its "
            "group's members make their own file: is this user in the lab's group?)"
        ) from None
    try:
        os.fchmod(fd, 0o640)
        shared = Path(shared_source).name
        os.write(fd, TEMPLATE.format(user=target.owner, shared=shared).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
