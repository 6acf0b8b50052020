"""Editing the intent: the one way MCP tools and CLI verbs change desired.yaml.

May: read and write desired.yaml, take the intent lock, append to the audit log, record
operation ids. May not: act on the cloud, SSH or tmux (only the controller acts), print.

One edit (``IntentEditor.apply``) takes an ``Edit`` value (``Hold("slot")``, ``Race(...)``,
``SetWorkload(...)``: the frozen argument classes of ``intent.edits*``) and applies it by its
type: its own ``apply`` changes the round-trip tree.

1. Take the advisory lock ``<state dir>/intent.lock`` (flock), so concurrent tool edits, from
   any number of MCP servers and CLI processes, run one at a time.
2. An operation id seen before with the same edit returns the stored result (``exists``); with
   a different edit it is refused.
3. Read the file and its sha256; refuse if it is invalid now (the user must fix it first). The
   loader reads it once (libyaml, ``model/load_yaml``): that tree both validates it and shows
   where the entries the edit names are.
4. Apply the edit to the round-trip tree of the lines it works on (``intent.window``: the file
   without the ``slots:`` and ``race_groups:`` entries it does not name; the whole file when
   no window fits) and splice the changed lines into the original text (``intent.roundtrip``:
   comments, key order and formatting of untouched lines stay); read the *whole* result once
   more with the loader, check it holds the edited window and every entry left out unchanged,
   and validate it with the controller's own ``parse_document``. Invalid: nothing is written
   and the ``file:line:col`` diagnostics are returned. ruamel, slow on a big file, reads and
   writes only the window.
5. Compare-and-swap against editors that do not take the lock: re-read just before writing and
   start again from the new text if it changed. The write itself swaps the new file in with
   ``renameat2(RENAME_EXCHANGE)``, which hands back the file it displaced: if an editor saved in
   the instant between the check and the swap, its text is swapped straight back (so nobody
   builds on ours, which lacks its change) and the edit is re-applied on top of it — neither
   change is lost. (Without RENAME_EXCHANGE a plain ``rename`` after the re-check is used; the
   window left is microseconds.) An editor that saves a buffer it read *before* our write
   overwrites our edit, as it would any other change: only the editor can prevent that (vim
   and emacs warn that the file changed on disk).
6. Append an audit record (source, operation id, unified diff, timestamps, and the Unix user
   who made it) and the operation record, still under the lock.

Who: the edit is made by the Unix user running the process (``intent.owners``), never by a
name passed in. Before anything is written, an edit of a slot or race group another user owns
is refused (``NotYourSlot``) unless the lab's policy (``adapters/lab.read_policy``) allows it;
what the edit creates or touches unowned gets that user as ``owner:`` in a shared lab.

Which file: where a lab's members keep files of their own (``<stem>.d/``), an edit writes the
one file that declares what it names — the shared file for lab-wide settings, the user's own
``<stem>.d/<user>.yaml`` for what is new — and only if the kernel lets this user write it
(``intent/lab_files``); a name it would share with another file is refused at both places.
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import hashlib
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Final, Literal

from reconciler.adapters.audit import append_audit
from reconciler.adapters.files import READ_SHARED_FILE, swap_in
from reconciler.adapters.lab import read_policy
from reconciler.adapters.lab_layout import open_intent_lock
from reconciler.adapters.statedir import StateDir
from reconciler.errors import (
    EditConflict,
    EditRejected,
    InvalidDesiredState,
    InvalidEdit,
    NeedsConfirmation,
    NotPermitted,
)
from reconciler.intent import owners
from reconciler.intent.edits import Edit, EditContext
from reconciler.intent.lab_files import LabFiles, Target, create_own, writable
from reconciler.intent.operations import OperationLog, check_operation_id
from reconciler.intent.roundtrip import Doc, OutsideWindow
from reconciler.intent.window import Window
from reconciler.model.desired import Desired
from reconciler.model.load import Parsed, parse_document
from reconciler.model.load_yaml import Tree, parse_tree
from reconciler.model.policy import Policy
from reconciler.model.times import utc_text

MAX_ATTEMPTS: Final = 20
SETTLE_TIMEOUT: Final = 2.0  # seconds an editor's save may take before the edit gives up
Source = Literal["mcp", "cli", "tui"]
Status = Literal["changed", "unchanged", "exists"]


@dataclass(frozen=True, slots=True)
class EditResult:
    status: Status
    kind: str
    args: dict[str, Any]
    operation_id: str
    notes: tuple[str, ...]
    diff: str
    file: str
    digest: str  # sha256 of desired.yaml as this edit left it
    ts: str
    slots: tuple[str, ...] = ()  # the slots the edit is about
    attempts: int = 1
    user: str = ""  # the Unix user who made the edit

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["notes"] = list(self.notes)
        out["slots"] = list(self.slots)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EditResult:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        known["notes"] = tuple(known.get("notes", ()))
        known["slots"] = tuple(known.get("slots", ()))
        return cls(**known)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _now() -> str:
    return utc_text(datetime.now(UTC), milliseconds=True)


# --- the store ---------------------------------------------------------------------------------


class IntentEditor:
    """Edits of one desired file, serialized through the lock in its state directory."""

    def __init__(
        self,
        file: Path,
        state: StateDir,
        env: Mapping[str, str] | None = None,
        *,
        lock_timeout: float = 30.0,
    ) -> None:
        self.file = file
        self.path = file.expanduser().resolve()  # a symlinked file is edited, not replaced
        self.state = state
        self.env = dict(os.environ if env is None else env)
        self.lock_timeout = lock_timeout
        self._last: tuple[str, Parsed] | None = None
        self.actor = owners.current_actor()
        self.operations = OperationLog(
            state.operations_of(self.actor.user), mode=READ_SHARED_FILE if state.lab else None
        )
        self.policy = Policy.private()  # read again under the lock by every edit
        self.lab = LabFiles(file, self.env)  # the members' files, where a lab keeps them

    @property
    def source(self) -> str:
        return str(self.file)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        self.state.ensure()
        fd = open_intent_lock(self.state)  # NotPermitted: one line naming its owner and the fix
        try:
            deadline = time.monotonic() + self.lock_timeout
            delay = 0.001
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise EditConflict(
                            f"another edit of {self.source} held the lock for "
                            f"{self.lock_timeout:.0f}s; nothing was written",
                            delay=1.0,
                        ) from None
                    time.sleep(delay)
                    delay = min(delay * 2, 0.02)
            yield
        finally:
            os.close(fd)

    def read(self) -> bytes:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            raise EditRejected(f"{self.source} does not exist; write it first") from None

    def parse(self, text: str, tree: Tree | None = None) -> Desired:
        """The intent with ``text`` as the desired file, as the controller sees it (with a
        lab's members' files as they are now); ``tree``: the YAML of ``text``, if read."""
        if self.lab.active:
            return self.lab.view(text).desired
        return self._document(text, tree).desired

    def _document(self, text: str, tree: Tree | None = None) -> Parsed:
        """``text`` parsed and validated (``tree``: its YAML, when read already); the last one
        is reused for the same text (an edit's output is usually the next edit's input)."""
        last = self._last
        if last is not None and last[0] == text:
            return last[1]
        parsed = parse_document(text, self.source, self.env, root=tree)
        self._last = (text, parsed)
        return parsed

    def _tree(self, text: str, source: str) -> Tree:
        """The loader's tree of ``text`` (raises InvalidDesiredState)."""
        last = self._last
        if last is not None and last[0] == text:
            return last[1].root
        return parse_tree(text, source)

    def _parse_target(self, text: str, target: Target | None, tree: Tree | None = None) -> Desired:
        """``target``'s own intent (the whole intent outside a lab). Raises
        InvalidDesiredState."""
        if target is None:
            return self.parse(text, tree)
        shared = self.lab.shared_part(self._shared_text())
        if target.owner is None:
            return self.lab.shared_part(text).desired
        return self.lab.member_part(text, target.source, target.owner, shared).desired

    def _shared_text(self) -> str:
        return self._decode(self.read())

    def _decode(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise EditRejected(f"{self.source} is not UTF-8 text: {e}") from None

    def transform(
        self, text: str, edit: Edit, *, confirmed: bool, target: Target | None = None
    ) -> tuple[str, list[str], list[str]]:
        """The edited text of ``target`` (None: the one desired file) and notes, validated;
        raises EditRejected / InvalidEdit."""
        source = target.source if target is not None else self.source
        try:
            before = self._parse_target(text, target)
        except InvalidDesiredState as e:
            raise InvalidEdit(
                f"{source} is invalid now; fix it before editing:\n{e}", e.diagnostics
            ) from None
        owned = target is None or target.owner is None  # a member's file is its owner's whole
        new, tree, ctx = self._edited(text, edit, before, source, confirmed=confirmed, owned=owned)
        try:
            self._parse_target(new, target, tree)
            if target is not None:
                self._check_clashes(target, new)
        except InvalidDesiredState as e:
            raise InvalidEdit(
                f"the edit would make {source} invalid, so nothing was written "
                f"(positions are in the edited text):\n{e}",
                e.diagnostics,
            ) from None
        return new, ctx.notes, ctx.slots

    def _edited(
        self, text: str, edit: Edit, before: Desired, source: str, *, confirmed: bool, owned: bool
    ) -> tuple[str, Tree | None, EditContext]:
        """The edited text, its tree when read already, and what the edit said. The edit runs
        on the window of the file it names (``intent.window``), else on the whole file."""
        run = partial(self._run, edit=edit, before=before, confirmed=confirmed, owned=owned)
        window = Window.around(text, self._tree(text, source), edit.named, before)
        if window is not None:
            try:
                ctx = run(Doc(window.text, source, partial=True))
                edited = ctx.doc.sync()
                new = window.splice(edited)
                tree = parse_tree(new, source)
                if window.agrees(tree.data, parse_tree(edited, source).data):
                    return new, tree, ctx
            except (OutsideWindow, InvalidDesiredState):
                pass  # the whole file, below
        try:
            ctx = run(Doc(text, source))
            return ctx.doc.sync(), None, ctx
        except InvalidDesiredState as e:  # the loader reads it; ruamel, stricter here, does not
            raise InvalidEdit(
                f"{source} cannot be edited: the round trip that keeps its comments cannot "
                f"read it; rewrite the part it names:\n{e}",
                e.diagnostics,
            ) from None

    def _run(
        self, doc: Doc, *, edit: Edit, before: Desired, confirmed: bool, owned: bool
    ) -> EditContext:
        """``edit`` applied to ``doc``, checked against (and stamped with) its owners."""
        original = doc.text
        ctx = EditContext(doc=doc, desired=before, confirmed=confirmed)
        try:
            edit.apply(ctx)
        except NeedsConfirmation:
            # whose it is comes before "are you sure": find what the edit would touch
            again = Doc(original, doc.source, partial=doc.partial)
            trial = EditContext(doc=again, desired=before, confirmed=True)
            edit.apply(trial)
            if owned:
                owners.check(trial, edit, self.actor, self.policy)
            raise
        if owned:
            owners.check(ctx, edit, self.actor, self.policy)
            owners.stamp(ctx, edit, self.actor, self.policy)
        return ctx

    def _check_clashes(self, target: Target, new: str) -> None:
        """InvalidDesiredState when ``new`` declares a name another of the lab's files has."""
        view = self.lab.view(new if target.owner is None else self._shared_text())
        if target.owner is None:
            part = view.shared
        else:
            part = self.lab.member_part(new, target.source, target.owner, view.shared)
        clashes = self.lab.clashes(target, part, view)
        if clashes:
            raise InvalidDesiredState(clashes)

    def _route(self, edit: Edit) -> Target | None:
        """The file ``edit`` writes in a lab with members' files (None: the one desired
        file); refuses what this user may not write before anything is asked."""
        if not self.lab.active:
            return None
        try:
            view = self.lab.view(self._shared_text())
        except InvalidDesiredState as e:
            raise InvalidEdit(
                f"{self.source} is invalid now; its owner fixes it before anyone edits:\n{e}",
                e.diagnostics,
            ) from None
        target = self.lab.route(edit, self.actor, view)
        if target.owner is None:
            target = replace(target, path=self.path)  # a symlinked file is edited, not replaced
        writable(target, self.actor, self.source, self.lab.members, self.lab.what(edit, view))
        if target.owner is not None and target.owner == self.actor.user:
            create_own(target, self.source)
        return target

    def apply(
        self,
        edit: Edit,
        *,
        source: Source,
        operation_id: str | None = None,
        confirmed: bool = False,
    ) -> EditResult:
        if operation_id is not None:
            check_operation_id(operation_id)
        with self.locked():
            self.policy = read_policy(self.state)
            if operation_id is not None:
                stored = self.operations.lookup(operation_id, edit.fingerprint)
                if stored is not None:
                    return replace(EditResult.from_dict(stored), status="exists")
            op = operation_id or f"{source}-{os.urandom(6).hex()}"
            target = self._route(edit)
            result = self._commit(edit, op, target, confirmed=confirmed)
            record = {**result.to_dict(), "source": source, "summary": edit.summary()}
            try:
                append_audit(self.state, {**record, "uid": self.actor.uid})
            except OSError as e:  # written all the same: say so rather than fail after it
                result = replace(
                    result,
                    notes=(*result.notes, f"not recorded in {self.state.audit}: {e.strerror}"),
                )
            if operation_id is not None:
                self.operations.record(
                    operation_id, edit.fingerprint, edit.summary(), result.ts, result.to_dict()
                )
            return result

    def _commit(self, edit: Edit, op: str, target: Target | None, *, confirmed: bool) -> EditResult:
        path = target.path if target is not None else self.path
        source = target.source if target is not None else self.source
        base = self._settled(path, source)  # the text the edit is applied to: the file now
        for attempt in range(1, MAX_ATTEMPTS + 1):
            text = self._decode(base)
            new, notes, touched = self.transform(text, edit, confirmed=confirmed, target=target)
            data = new.encode("utf-8")
            if data == base:
                return self._result("unchanged", edit, op, notes, touched, "", base, attempt, path)
            if self._read_or_none(path) == base and self._swap(path, source, data, _sha(base)):
                diff = "".join(
                    difflib.unified_diff(
                        text.splitlines(keepends=True),
                        new.splitlines(keepends=True),
                        f"a/{path.name}",
                        f"b/{path.name}",
                    )
                )
                return self._result("changed", edit, op, notes, touched, diff, data, attempt, path)
            # Someone saved since the read (maybe still saving): start again from their text,
            # once it has stopped changing.
            base = self._settled(path, source, wait=True)
        raise EditConflict(f"{source} kept changing during the edit; nothing was written")

    @staticmethod
    def _swap(path: Path, source: str, data: bytes, expected: str) -> bool:
        try:
            return swap_in(path, data, expected)
        except PermissionError as e:
            said = f"cannot write {source}: {e.strerror}; nothing was written"
            raise NotPermitted(said) from None

    @staticmethod
    def _read_or_none(path: Path) -> bytes | None:
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None

    def _settled(
        self, path: Path, source: str, *, wait: bool = False, quiet: float = 0.02
    ) -> bytes:
        """The file's bytes; with ``wait`` (someone just saved, maybe still saving), once they
        stopped changing for ``quiet`` seconds. A file absent for a moment (an editor's save by
        rename) is waited for; one that stays absent is refused, one that never settles is a
        conflict to retry."""
        last = self._read_or_none(path)
        if last is not None and not wait:
            return last
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while time.monotonic() < deadline:
            time.sleep(quiet)
            now = self._read_or_none(path)
            if now is not None and now == last:
                return now
            last = now
        if last is None:
            raise EditRejected(f"{source} does not exist; write it first")
        raise EditConflict(f"{source} kept changing; nothing was written", delay=1.0)

    def _result(
        self,
        status: Status,
        edit: Edit,
        op: str,
        notes: list[str],
        touched: list[str],
        diff: str,
        data: bytes,
        attempts: int,
        path: Path,
    ) -> EditResult:
        return EditResult(
            status=status,
            kind=edit.kind,
            args=dict(edit.args),
            operation_id=op,
            notes=tuple(notes),
            diff=diff,
            file=str(path),
            digest=_sha(data),
            ts=_now(),
            slots=tuple(dict.fromkeys(touched)),
            attempts=attempts,
            user=self.actor.user,
        )
