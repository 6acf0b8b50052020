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
3. Read the file and its sha256; refuse if it is invalid now (the user must fix it first).
4. Apply the edit to the round-trip tree and splice the changed lines into the original text
   (``intent.roundtrip``: comments, key order and formatting of untouched lines stay); validate the
   *whole* result with the controller's own ``parse_desired``. Invalid: nothing is written and
   the ``file:line:col`` diagnostics are returned.
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
from pathlib import Path
from typing import Any, Final, Literal

from reconciler.adapters.audit import append_audit
from reconciler.adapters.files import open_shared, swap_in
from reconciler.adapters.lab import read_policy
from reconciler.adapters.statedir import StateDir
from reconciler.errors import (
    EditConflict,
    EditRejected,
    InvalidDesiredState,
    InvalidEdit,
    NeedsConfirmation,
)
from reconciler.intent import owners
from reconciler.intent.edits import Edit, EditContext
from reconciler.intent.operations import OperationLog, check_operation_id
from reconciler.intent.roundtrip import Doc
from reconciler.model.desired import Desired
from reconciler.model.load import parse_desired
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
        self.operations = OperationLog(state.root / "operations.json")
        self._last: tuple[str, Desired] | None = None
        self.actor = owners.current_actor()
        self.policy = Policy.private()  # read again under the lock by every edit

    @property
    def source(self) -> str:
        return str(self.file)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        self.state.ensure()
        fd = open_shared(self.state.intent_lock, os.O_RDWR | os.O_CREAT)
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

    def parse(self, text: str) -> Desired:
        """``parse_desired`` as the controller runs it; the last result is reused for the same
        text (an edit's output is usually the next edit's input)."""
        last = self._last
        if last is not None and last[0] == text:
            return last[1]
        desired = parse_desired(text, self.source, self.env)
        self._last = (text, desired)
        return desired

    def _decode(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise EditRejected(f"{self.source} is not UTF-8 text: {e}") from None

    def transform(
        self, text: str, edit: Edit, *, confirmed: bool
    ) -> tuple[str, list[str], list[str]]:
        """The edited text and notes, validated; raises EditRejected / InvalidEdit."""
        try:
            before = self.parse(text)
        except InvalidDesiredState as e:
            raise InvalidEdit(
                f"{self.source} is invalid now; fix it before editing:\n{e}", e.diagnostics
            ) from None
        doc = Doc(text, self.source)
        ctx = EditContext(doc=doc, desired=before, confirmed=confirmed)
        try:
            edit.apply(ctx)
        except NeedsConfirmation:
            # whose it is comes before "are you sure": find what the edit would touch
            trial = EditContext(doc=Doc(text, self.source), desired=before, confirmed=True)
            edit.apply(trial)
            owners.check(trial, edit, self.actor, self.policy)
            raise
        owners.check(ctx, edit, self.actor, self.policy)
        owners.stamp(ctx, edit, self.actor, self.policy)
        new = doc.sync()
        try:
            self.parse(new)
        except InvalidDesiredState as e:
            raise InvalidEdit(
                f"the edit would make {self.source} invalid, so nothing was written "
                f"(positions are in the edited text):\n{e}",
                e.diagnostics,
            ) from None
        return new, ctx.notes, ctx.slots

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
            result = self._commit(edit, op, confirmed=confirmed)
            record = {**result.to_dict(), "source": source, "summary": edit.summary()}
            append_audit(self.state, {**record, "uid": self.actor.uid})
            if operation_id is not None:
                self.operations.record(
                    operation_id, edit.fingerprint, edit.summary(), result.ts, result.to_dict()
                )
            return result

    def _commit(self, edit: Edit, op: str, *, confirmed: bool) -> EditResult:
        base = self._settled()  # the text the edit is applied to: what desired.yaml holds now
        for attempt in range(1, MAX_ATTEMPTS + 1):
            text = self._decode(base)
            new, notes, touched = self.transform(text, edit, confirmed=confirmed)
            data = new.encode("utf-8")
            if data == base:
                return self._result("unchanged", edit, op, notes, touched, "", base, attempt)
            if self._read_or_none() == base and swap_in(self.path, data, _sha(base)):
                diff = "".join(
                    difflib.unified_diff(
                        text.splitlines(keepends=True),
                        new.splitlines(keepends=True),
                        f"a/{self.path.name}",
                        f"b/{self.path.name}",
                    )
                )
                return self._result("changed", edit, op, notes, touched, diff, data, attempt)
            # Someone saved since the read (maybe still saving): start again from their text,
            # once it has stopped changing.
            base = self._settled(wait=True)
        raise EditConflict(f"{self.source} kept changing during the edit; nothing was written")

    def _read_or_none(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None

    def _settled(self, *, wait: bool = False, quiet: float = 0.02) -> bytes:
        """The file's bytes; with ``wait`` (someone just saved, maybe still saving), once they
        stopped changing for ``quiet`` seconds. A file absent for a moment (an editor's save by
        rename) is waited for; one that stays absent is refused, one that never settles is a
        conflict to retry."""
        last = self._read_or_none()
        if last is not None and not wait:
            return last
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while time.monotonic() < deadline:
            time.sleep(quiet)
            now = self._read_or_none()
            if now is not None and now == last:
                return now
            last = now
        if last is None:
            raise EditRejected(f"{self.source} does not exist; write it first")
        raise EditConflict(f"{self.source} kept changing; nothing was written", delay=1.0)

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
    ) -> EditResult:
        return EditResult(
            status=status,
            kind=edit.kind,
            args=dict(edit.args),
            operation_id=op,
            notes=tuple(notes),
            diff=diff,
            file=str(self.path),
            digest=_sha(data),
            ts=_now(),
            slots=tuple(dict.fromkeys(touched)),
            attempts=attempts,
            user=self.actor.user,
        )
