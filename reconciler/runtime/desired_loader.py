"""The intent in force: desired.yaml (and a lab's members' files) read from disk, keeping the
last valid version of each.

``DesiredLoader.load()`` reads the file and parses it with the controller's own parser. A valid
file becomes the intent in force; anything else (missing, unreadable, not UTF-8, empty,
truncated, invalid, or in a lab a shared file owned by someone it must not be) leaves the
previous valid intent in force and is reported as ``file:line:col: message`` diagnostics.
Reading the same bytes again does not reparse (keyed by their sha256).

Beside the desired file, ``<stem>.d/<user>.yaml`` are the lab members' files
(``adapters/member_files``, ``model/intent_parts``): each is judged on its own — a member's
invalid, unreadable or refused file keeps *its* version last in force while the others' changes
apply, and a name declared by two files is reported at both places. A member's file that
disappears keeps its version in force for ``VANISH_GRACE`` seconds (an editor's save by rename
leaves a moment without it), then its slots leave the intent (unmanaged, like removed lines).

May: read desired.yaml and the members' files. May not: write them, watch them
(``runtime.watch`` does), log or print, or raise for anything a file contains — every problem
with a file comes back as diagnostics.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from reconciler.adapters.lab import user_name
from reconciler.adapters.member_files import MemberFile, members_dir, read_member_files
from reconciler.errors import Diagnostic, InvalidDesiredState
from reconciler.model.desired import Desired
from reconciler.model.intent_parts import Part, combine, merge, parse_member, parse_shared

NO_CONTENT: Final = ""
#: Seconds a vanished member's file keeps its version in force (an editor's save in between).
VANISH_GRACE: Final = 2.0


def content_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digest(path: Path) -> str:
    """sha256 of the file's bytes, or ``NO_CONTENT`` when it cannot be read."""
    try:
        return content_digest(path.read_bytes())
    except OSError:
        return NO_CONTENT


@dataclass(frozen=True, slots=True)
class FileOwner:
    """Who owned one file of the intent in force when it was read (the audit names them)."""

    source: str
    uid: int | None
    digest: str  # the text's sha256: a new one is a change by ``uid``


@dataclass(frozen=True, slots=True)
class LoadResult:
    desired: Desired | None  # the intent in force: the last valid one, None if never valid
    current_valid: bool  # every file as it is now is valid (and in force)
    errors: tuple[Diagnostic, ...]  # what is wrong with the files as they are now
    changed: bool  # the intent in force changed with this load
    digest: str  # sha256 of the desired file's bytes read; NO_CONTENT when none could be
    file_uid: int | None = None  # who owned the file read (a hand edit is its saver's)
    #: each file in force and its owner (the shared file first; a lab's members' after)
    files: tuple[FileOwner, ...] = ()


def _same_intent(a: Desired | None, b: Desired | None) -> bool:
    """Equal intent, ignoring which text it came from (a comment edit changes nothing)."""
    if a is None or b is None:
        return a is b
    return dataclasses.replace(a, digest="", source="") == dataclasses.replace(
        b, digest="", source=""
    )


def _decode(data: bytes, source: str) -> str:
    """UTF-8 text (a leading BOM is dropped); raises InvalidDesiredState at the bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        before = data[: e.start]
        line = before.count(b"\n") + 1
        col = len(before[before.rfind(b"\n") + 1 :].decode("utf-8", "replace")) + 1
        bad = data[e.start : e.start + 1].hex()
        raise InvalidDesiredState(
            [Diagnostic(source, line, col, f"not valid UTF-8 (byte 0x{bad})")]
        ) from None


class DesiredLoader:
    """Loads ``path`` (and its members' files) on demand, remembering what is in force.

    ``owners``: in a lab, the uids that may own the shared desired file (the controller's
    user, root, the lab's admins): one owned by anyone else — a member who replaced it — is
    refused like an invalid file. None: any owner (one user's setup)."""

    def __init__(
        self,
        path: Path,
        env: Mapping[str, str] | None = None,
        *,
        source: str | None = None,
        owners: Collection[int] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.env: Mapping[str, str] = dict(env or {})
        self.source = source if source is not None else str(path)
        self.members = members_dir(path)
        self.owners = frozenset(owners) if owners is not None else None
        self.clock = clock
        self._current: Desired | None = None
        self._last: LoadResult | None = None
        self._in_force: dict[str, Part] = {}
        self._uids: dict[str, int | None] = {}
        self._vanished: dict[str, float] = {}  # member file -> when it was first missed
        self._parsed: dict[tuple[str, str, str], Part] = {}  # (file, digest, context) -> part
        self._seen: tuple[object, ...] | None = None

    @property
    def current(self) -> Desired | None:
        """The intent in force (the last valid files), or None when no valid file was seen."""
        return self._current

    @property
    def last(self) -> LoadResult | None:
        """The result of the latest ``load()``."""
        return self._last

    @property
    def parts(self) -> tuple[Part, ...]:
        """The files in force (the shared file first)."""
        return tuple(self._in_force.values())

    def load(self) -> LoadResult:
        data, uid, errors = self._read_shared()
        members, members_problem = read_member_files(self.members)
        digest = content_digest(data) if data is not None else NO_CONTENT
        seen = (digest, tuple((m.path, m.digest, m.problem) for m in members), members_problem)
        last = self._last
        if last is not None and seen == self._seen and digest != NO_CONTENT and not self._vanished:
            result = dataclasses.replace(last, changed=False)
            self._last = result
            return result
        self._seen = seen
        diags = list(errors)
        shared = self._shared_part(data, diags) if data is not None else None
        candidates: list[Part | None] = [shared or self._in_force.get(self.source)]
        uids = {self.source: uid if shared is not None else self._uids.get(self.source)}
        context = candidates[0].context if candidates[0] is not None else None
        if members_problem is not None:
            diags.append(Diagnostic(str(self.members), 1, 1, members_problem))
        listed = {str(m.path) for m in members}
        for member in members:
            source = str(member.path)
            part = self._member_part(member, context, diags)
            candidates.append(part or self._in_force.get(source))
            uids[source] = member.uid if part is not None else self._uids.get(source)
        for source, old in self._in_force.items():
            if source != self.source and source not in listed and self._keeps(source):
                candidates.append(old)
                uids[source] = self._uids.get(source)
        self._vanished = {s: t for s, t in self._vanished.items() if s not in listed}
        if candidates[0] is None:  # no valid shared file was ever seen: nothing is wanted
            return self._settle(digest, None, tuple(diags), uids)
        parts, clashes = combine(candidates, self._in_force)
        diags.extend(clashes)
        return self._settle(digest, parts, tuple(diags), uids, uid if shared is not None else None)

    def _read_shared(self) -> tuple[bytes | None, int | None, tuple[Diagnostic, ...]]:
        try:
            with self.path.open("rb") as f:
                st = os.fstat(f.fileno())
                if self.owners is not None and (st.st_uid not in self.owners or st.st_mode & 0o022):
                    return None, None, (self._diag(self._refusal(st)),)
                return f.read(), st.st_uid, ()
        except FileNotFoundError:
            missing = "file not found (write one with `tpu-reconciler init`, or point -f at yours)"
            return None, None, (self._diag(missing),)
        except IsADirectoryError:
            return None, None, (self._diag("is a directory, not a file"),)
        except OSError as e:
            return None, None, (self._diag(f"cannot read: {e.strerror}{_fix(e, self.path)}"),)

    def _refusal(self, st: os.stat_result) -> str:
        owner = user_name(st.st_uid)
        if st.st_uid not in (self.owners or ()):
            return (
                f"owned by {owner}, who may not change the lab's shared file (a member's save "
                "replaced it?), so it is not used: the lab's admin restores it, and members "
                f"write {self.members}/<user>.yaml"
            )
        return (
            f"writable by others than its owner {owner} (mode {st.st_mode & 0o7777:04o}), so "
            f"it is not used: chmod go-w {self.path}"
        )

    def _shared_part(self, data: bytes, diags: list[Diagnostic]) -> Part | None:
        digest = content_digest(data)
        key = (self.source, digest, "")
        cached = self._parsed.get(key)
        if cached is not None:
            return cached
        self._forget(self.source)
        try:
            part = parse_shared(_decode(data, self.source), self.source, self.env)
        except InvalidDesiredState as e:
            diags.extend(e.diagnostics or (self._diag("invalid desired state"),))
            return None
        except Exception as e:  # a parser bug must not end the controller or drop the intent
            diags.append(self._diag(f"internal error while parsing: {e!r}"))
            return None
        self._parsed[key] = part
        return part

    def _member_part(
        self, member: MemberFile, context: Mapping[str, object] | None, diags: list[Diagnostic]
    ) -> Part | None:
        source = str(member.path)
        if member.problem is not None or member.data is None or member.owner is None:
            diags.append(Diagnostic(source, 1, 1, member.problem or "cannot be read"))
            return None
        if context is None:
            return None  # no shared file to resolve it under (its own problem is reported)
        key = (source, member.digest, repr(sorted(context.items())))
        cached = self._parsed.get(key)
        if cached is not None:
            return cached
        self._forget(source)
        try:
            text = _decode(member.data, source)
            part = parse_member(text, source, owner=member.owner, context=context)
        except InvalidDesiredState as e:
            diags.extend(e.diagnostics or (Diagnostic(source, 1, 1, "invalid"),))
            return None
        except Exception as e:  # a parser bug must not end the controller or drop the intent
            diags.append(Diagnostic(source, 1, 1, f"internal error while parsing: {e!r}"))
            return None
        self._parsed[key] = part
        return part

    def _forget(self, source: str) -> None:
        """Only the latest parse of a file is kept (the same bytes again are not reparsed)."""
        self._parsed = {k: v for k, v in self._parsed.items() if k[0] != source}

    def _keeps(self, source: str) -> bool:
        """Whether a member's file missing now still counts (within ``VANISH_GRACE``)."""
        now = self.clock()
        since = self._vanished.setdefault(source, now)
        return now - since < VANISH_GRACE

    def _diag(self, message: str) -> Diagnostic:
        return Diagnostic(self.source, 1, 1, message)

    def _settle(
        self,
        digest: str,
        parts: tuple[Part, ...] | None,
        errors: tuple[Diagnostic, ...],
        uids: Mapping[str, int | None],
        file_uid: int | None = None,
    ) -> LoadResult:
        changed = False
        if parts:
            desired = merge(parts)
            changed = not _same_intent(self._current, desired)
            self._current = desired
            self._in_force = {p.source: p for p in parts}
            self._uids = {p.source: uids.get(p.source) for p in parts}
        result = LoadResult(
            desired=self._current,
            current_valid=not errors and bool(parts),
            errors=errors,
            changed=changed,
            digest=digest,
            file_uid=file_uid,
            files=tuple(
                FileOwner(p.source, self._uids.get(p.source), p.digest)
                for p in self._in_force.values()
            ),
        )
        self._last = result
        return result


def _fix(e: OSError, path: Path) -> str:
    """What makes an unreadable desired file readable again, when it is a permission."""
    if not isinstance(e, PermissionError):
        return ""
    try:
        owner = user_name(path.stat().st_uid)
    except OSError:
        return ""
    return f" (it is {owner}'s: {owner} makes it readable with chmod a+r {path})"
