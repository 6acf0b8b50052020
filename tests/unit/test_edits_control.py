"""suspend / resume as intent edits, and the confirmation file the guard reads: comments kept,
one line changed, a tampered or stale confirmation confirms nothing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from reconciler.adapters.confirm_file import (
    clear_spent,
    confirm_path,
    read_confirmed,
    write_confirmation,
)
from reconciler.adapters.files import write_json
from reconciler.adapters.statedir import StateDir
from reconciler.errors import EditRejected
from reconciler.intent.confirm import confirm_deletes
from reconciler.intent.edits_control import Resume, Suspend
from reconciler.intent.engine import IntentEditor
from reconciler.model.load import parse_desired
from tests.unit.test_intent import SAMPLE, apply, comments, text


@pytest.fixture
def store(tmp_path: Path) -> IntentEditor:
    file = tmp_path / "desired.yaml"
    file.write_text(SAMPLE)
    return IntentEditor(file, StateDir(tmp_path / "state"), env={})


def changed_lines(diff: str) -> list[str]:
    return [ln for ln in diff.splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")]


def test_suspend_then_resume_changes_one_key_and_keeps_comments(store: IntentEditor) -> None:
    result = apply(store, Suspend())
    assert result.status == "changed"
    assert changed_lines(result.diff) == ["+  suspend: true"]
    assert parse_desired(text(store)).settings.suspend
    assert apply(store, Suspend()).status == "unchanged"
    result = apply(store, Resume())
    assert changed_lines(result.diff) == ["-  suspend: true", "+  suspend: false"]
    assert not parse_desired(text(store)).settings.suspend
    assert comments(text(store)) == comments(SAMPLE)


def test_confirmation_file_is_private_and_checked(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    ids = ["z/a@1", "z/b@2", "z/c@3"]
    write_confirmation(state, ids, digest="d1", now=1000.0)
    assert confirm_path(state).stat().st_mode & 0o777 == 0o600
    assert read_confirmed(state, digest="d1", now=1001.0) == frozenset(ids)
    assert read_confirmed(state, digest="d2", now=1001.0) == frozenset()  # another intent
    assert not clear_spent(state, digest="d1", now=1001.0, present=ids)
    assert clear_spent(state, digest="d1", now=1001.0, present=[])  # all done: it goes
    assert not confirm_path(state).exists()
    write_confirmation(state, ids, digest="d1", now=1000.0)
    write_json(confirm_path(state), {"fingerprint": "0" * 16, "deletes": ids})  # tampered
    assert read_confirmed(state, digest="d1", now=1001.0) == frozenset()
    confirm_path(state).write_text("{not json")
    assert read_confirmed(state, digest="d1", now=1001.0) == frozenset()
    assert clear_spent(state, digest="d1", now=1001.0, present=ids)


def test_confirm_takes_exactly_the_snapshots_guarded_set(store: IntentEditor) -> None:
    assert confirm_deletes(store)["status"] == "nothing"
    with pytest.raises(EditRejected, match="no deletes wait"):
        confirm_deletes(store, "0123456789abcdef")
    from reconciler.core.control import fingerprint

    ids = ["z/a@1", "z/b@2", "z/c@3"]
    guard = {"limit": 2, "deletes": ids, "slots": ["a", "b", "c"],
             "fingerprint": fingerprint(ids), "command": "tpu-reconciler confirm x"}  # fmt: skip
    store.state.ensure()
    write_json(store.state.status, {
        "schema_version": "tpu-reconciler.status.v1", "plan": {"guard": guard},
        "desired": {"file": "desired.yaml", "valid": True, "digest": "d1"},
    })  # fmt: skip
    with pytest.raises(EditRejected, match="changed"):
        confirm_deletes(store, "0123456789abcdef")
    result = confirm_deletes(store, fingerprint(ids))
    assert result["status"] == "confirmed" and result["deletes"] == ids
    now = time.time()
    assert read_confirmed(store.state, digest="d1", now=now) == frozenset(ids)
    assert read_confirmed(store.state, digest="d0", now=now) == frozenset()


def test_a_lab_member_cannot_confirm_deletes_of_anothers_slots(store: IntentEditor) -> None:
    from reconciler.adapters.files import SHARED_DIR
    from reconciler.adapters.lab import POLICY_MODE, policy_path
    from reconciler.core.control import fingerprint
    from reconciler.errors import NotYourSlot
    from reconciler.intent.owners import Actor

    store.state.ensure().root.chmod(SHARED_DIR)
    policy_path(store.state).write_text("admins: [carol]\n")
    policy_path(store.state).chmod(POLICY_MODE)
    ids = ["z/a@1", "z/b@2", "z/c@3"]
    guard = {"limit": 2, "deletes": ids, "slots": ["a", "b", "c"],
             "fingerprint": fingerprint(ids), "command": "tpu-reconciler confirm x"}  # fmt: skip
    rows = [{"name": n, "zone": "z", "accelerator": "v4-8", "owner": o}
            for n, o in (("a", "bob"), ("b", "alice"))]  # fmt: skip
    write_json(store.state.status, {
        "schema_version": "tpu-reconciler.status.v1", "plan": {"guard": guard}, "slots": rows,
        "desired": {"file": "desired.yaml", "valid": True, "digest": "d1"},
    })  # fmt: skip
    store.actor = Actor("bob", 54321)  # not the controller's user (the state dir's owner)
    with pytest.raises(NotYourSlot, match="slot 'b' belongs to alice") as caught:
        confirm_deletes(store, fingerprint(ids))
    assert caught.value.owner == "alice"
    assert not confirm_path(store.state).exists()
    store.actor = Actor("carol", 54322)  # an admin
    assert confirm_deletes(store, fingerprint(ids))["status"] == "confirmed"
