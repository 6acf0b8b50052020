"""The intent edit engine, in-process: each edit's effect, comments kept, invalid edits write
nothing, operation ids, compare-and-swap against saves that do not take the lock."""

from __future__ import annotations

import fcntl
import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.files import read_jsonl
from reconciler.adapters.statedir import StateDir
from reconciler.errors import EditConflict, EditRejected
from reconciler.intent import engine as intent
from reconciler.intent.edits import (
    AddSlot,
    Edit,
    Hold,
    NeedsConfirmation,
    Release,
    RemoveSlot,
    SetPoll,
    Setup,
    TmuxAll,
)
from reconciler.intent.edits_race import Race
from reconciler.intent.engine import IntentEditor, InvalidEdit
from reconciler.model.load import parse_desired

SAMPLE = """\
# My TPU intent.
project: my-project-123   # the TRC project

settings:
  poll_interval: 30s      # steady
  zone_codes:
    europe-west4-a: ew4a

defaults:
  mode: spot

slots:
  # the big one
  - name: big
    zone: europe-west4-a
    accelerator: v6e-64
    want: held   # keep it
  - name: small
    zone: us-central2-b
    accelerator: v4-8
    want: released
    setup: {tmux: true, bootstrap: false}   # flow setup
  # race candidates below
  - name: cand-a
    zone: europe-west4-a
    accelerator: v6e-8
  - name: cand-b
    zone: europe-west4-a
    accelerator: v6e-8
  # comment after the last slot

generate:
  - zones: [us-east5-b]   # generated
    accelerators: {v6e-8: 1}
    want: released

race_groups:
  - name: any-v6e8
    count: 1            # one winner
    slots:
      - cand-a
      - cand-b
# end of file
"""


def comments(text: str) -> list[str]:
    return [m.group(0).strip() for m in re.finditer(r"#[^\n]*", text)]


@pytest.fixture
def store(tmp_path: Path) -> IntentEditor:
    file = tmp_path / "desired.yaml"
    file.write_text(SAMPLE)
    return IntentEditor(file, StateDir(tmp_path / "state"), env={})


def apply(store: IntentEditor, edit: Edit, *, confirmed: bool = False) -> Any:
    return store.apply(edit, source="cli", confirmed=confirmed)


def text(store: IntentEditor) -> str:
    return store.path.read_text()


def slot(store: IntentEditor, name: str) -> Any:
    spec = parse_desired(text(store)).slot(name)
    assert spec is not None
    return spec


def group(store: IntentEditor, name: str) -> Any:
    return next((g for g in parse_desired(text(store)).race_groups if g.name == name), None)


def test_hold_changes_one_line_and_keeps_every_comment(store: IntentEditor) -> None:
    result = apply(store, Hold(name="small"))
    assert result.status == "changed" and result.slots == ("small",)
    assert slot(store, "small").want == "held"
    assert comments(text(store)) == comments(SAMPLE)
    changed = [ln for ln in result.diff.splitlines() if ln[:1] in "+-" and ln[:3] not in "+++---"]
    assert changed == ["-    want: released", "+    want: held"]


def test_identical_edit_is_unchanged_and_writes_nothing(store: IntentEditor) -> None:
    before = store.path.stat().st_ino
    assert apply(store, Hold(name="big")).status == "unchanged"
    assert store.path.stat().st_ino == before and text(store) == SAMPLE


def test_release_needs_confirmation_and_then_releases(store: IntentEditor) -> None:
    with pytest.raises(NeedsConfirmation):
        apply(store, Release(name="big"))
    assert text(store) == SAMPLE
    apply(store, Release(name="big"), confirmed=True)
    assert slot(store, "big").want == "released"
    assert comments(text(store)) == comments(SAMPLE)


def test_releasing_a_race_candidate_takes_it_out_of_its_group(store: IntentEditor) -> None:
    result = apply(store, Release(name="cand-a"), confirmed=True)
    assert slot(store, "cand-a").want == "released" and slot(store, "cand-a").race_group is None
    assert group(store, "any-v6e8").slots == ("cand-b",)
    assert any("left race group 'any-v6e8'" in n for n in result.notes)
    assert comments(text(store)) == comments(SAMPLE)


def test_holding_the_last_candidates_removes_the_group(store: IntentEditor) -> None:
    apply(store, Hold(name="cand-a"))
    result = apply(store, Hold(name="cand-b"))
    assert group(store, "any-v6e8") is None
    assert "race group 'any-v6e8' had no other candidate and was removed" in result.notes
    assert slot(store, "cand-b").want == "held"
    assert "# end of file" in text(store)


def test_add_slot_names_it_from_mode_accelerator_zone_code_and_index(store: IntentEditor) -> None:
    first = apply(store, AddSlot(zone="europe-west4-a", accelerator="v6e-8"))
    second = apply(store, AddSlot(zone="europe-west4-a", accelerator="v6e-8"))
    assert first.slots == ("spot-v6e8-ew4a-1",) and second.slots == ("spot-v6e8-ew4a-2",)
    assert slot(store, "spot-v6e8-ew4a-2").want == "held"
    after = text(store)
    assert comments(after) == comments(SAMPLE)
    # The comment that introduces the next section stays right before it.
    assert after.index("spot-v6e8-ew4a-2") < after.index("# comment after the last slot")


def test_add_slot_with_slices_writes_a_multislice_slot(store: IntentEditor) -> None:
    apply(store, AddSlot(zone="europe-west4-a", accelerator="v6e-64", name="ms", slices=2))
    assert slot(store, "ms").slices == 2 and "    slices: 2\n" in text(store)
    with pytest.raises(EditRejected, match="slices must be 1 to 64"):
        apply(store, AddSlot(zone="europe-west4-a", accelerator="v6e-64", name="m0", slices=0))


def test_add_slot_refuses_a_taken_or_unsafe_name(store: IntentEditor) -> None:
    for name in ("big", "Bad;rm -rf", "-x"):
        with pytest.raises(EditRejected):
            apply(store, AddSlot(zone="us-central2-b", accelerator="v4-8", name=name))
    with pytest.raises(EditRejected, match="invalid zone"):
        apply(store, AddSlot(zone="us central", accelerator="v4-8"))
    assert text(store) == SAMPLE


def test_an_edit_that_would_make_the_file_invalid_writes_nothing(store: IntentEditor) -> None:
    with pytest.raises(InvalidEdit) as err:
        apply(store, AddSlot(zone="us-central2-b", accelerator="v9-8", name="nine"))
    assert text(store) == SAMPLE
    assert re.search(r"desired\.yaml:\d+:\d+: unknown accelerator 'v9-8'", str(err.value))
    assert err.value.diagnostics


def test_an_invalid_file_is_not_edited_and_its_errors_are_reported(store: IntentEditor) -> None:
    broken = SAMPLE.replace("count: 1 ", "cuont: 1 ")
    store.path.write_text(broken)
    with pytest.raises(InvalidEdit, match=r"desired\.yaml:\d+:\d+: unknown key 'cuont'"):
        apply(store, Hold(name="small"))
    assert text(store) == broken


def test_unknown_and_generated_slots_are_refused(store: IntentEditor) -> None:
    with pytest.raises(EditRejected, match=r"unknown slot 'smal' .*did you mean 'small'"):
        apply(store, Hold(name="smal"))
    with pytest.raises(EditRejected, match="generated"):
        apply(store, Hold(name="spot-v6e8-use5b-1"))
    assert text(store) == SAMPLE


def test_remove_slot_says_it_becomes_unmanaged(store: IntentEditor) -> None:
    result = apply(store, RemoveSlot(name="small"))
    assert parse_desired(text(store)).slot("small") is None
    assert any("UNMANAGED" in n for n in result.notes)
    assert set(comments(SAMPLE)) - set(comments(text(store))) == {"# flow setup"}


def test_remove_slot_with_prune_on_needs_confirmation(store: IntentEditor) -> None:
    store.path.write_text(SAMPLE.replace("settings:\n", "settings:\n  prune: true\n"))
    with pytest.raises(NeedsConfirmation, match="prune"):
        apply(store, RemoveSlot(name="small"))


def test_removing_a_candidate_leaves_its_group(store: IntentEditor) -> None:
    apply(store, RemoveSlot(name="cand-b"))
    assert group(store, "any-v6e8").slots == ("cand-a",)
    assert "# comment after the last slot" in text(store)


def test_race_creates_a_group_and_strips_want(store: IntentEditor) -> None:
    result = apply(store, Race(group="pair", slots=("big", "small"), count=1))
    assert group(store, "pair").slots == ("big", "small")
    assert slot(store, "big").want is None and slot(store, "big").race_group == "pair"
    assert any("removed 'want: held'" in n for n in result.notes)
    # The removed 'want: held' line's comment stays (on the line before), and a note says
    # it may no longer be true.
    assert comments(text(store)) == comments(SAMPLE)
    assert "    accelerator: v6e-64  # keep it\n" in text(store)
    assert any("kept its comments '# the big one', '# keep it'" in n for n in result.notes)


def test_race_exact_drops_candidates_only_when_confirmed(store: IntentEditor) -> None:
    with pytest.raises(NeedsConfirmation, match="dropping"):
        apply(store, Race(group="any-v6e8", slots=("cand-a",), count=1))
    assert text(store) == SAMPLE
    apply(store, Race(group="any-v6e8", slots=("cand-a",), count=1), confirmed=True)
    assert group(store, "any-v6e8").slots == ("cand-a",)
    assert slot(store, "cand-b").want == "released"


def test_race_union_adds_candidates_and_raises_count(store: IntentEditor) -> None:
    apply(store, Race(group="any-v6e8", slots=("small",), count=2, exact=False))
    assert group(store, "any-v6e8").slots == ("cand-a", "cand-b", "small")
    assert group(store, "any-v6e8").count == 2
    assert "# one winner" in text(store)
    with pytest.raises(NeedsConfirmation, match="lowering"):
        apply(store, Race(group="any-v6e8", slots=("small",), count=1, exact=False))
    with pytest.raises(EditRejected, match="more than the 3 candidates"):
        apply(store, Race(group="any-v6e8", slots=("small",), count=4, exact=False))


def test_setup_flags_and_rerun_bump_the_generation(store: IntentEditor) -> None:
    apply(store, Setup(name="small", bootstrap=True, rerun=True))
    spec = slot(store, "small")
    assert spec.setup.bootstrap and spec.setup.generation == 1
    apply(store, Setup(name="small", tailscale=True, rerun=True))
    assert slot(store, "small").setup.generation == 2
    apply(store, Setup(name="big", tmux=False))
    assert slot(store, "big").setup.tmux is False
    assert comments(text(store)) == comments(SAMPLE)
    with pytest.raises(InvalidEdit, match="at_boot needs setup scripts"):
        apply(store, Setup(name="big", at_boot=True))  # validated like any edit


def test_tmux_all_turns_the_default_on_and_names_opt_outs(store: IntentEditor) -> None:
    store.path.write_text(
        SAMPLE.replace("  mode: spot\n", "  mode: spot\n  setup: {tmux: false}\n")
    )
    apply(store, Setup(name="big", tmux=False))
    result = apply(store, TmuxAll())
    desired = parse_desired(text(store))
    assert desired.slot("small") is not None and desired.slot("small").setup.tmux
    assert any("'big'" in n for n in result.notes)


def test_set_poll_validates_durations(store: IntentEditor) -> None:
    apply(store, SetPoll(interval="2m", fast_interval=3))
    settings = parse_desired(text(store)).settings
    assert (settings.poll_interval, settings.fast_poll_interval) == (120.0, 3.0)
    assert "# steady" in text(store)
    with pytest.raises(EditRejected, match="duration"):
        apply(store, SetPoll(interval="soon"))


def test_operation_id_replay_returns_exists_and_reuse_is_refused(store: IntentEditor) -> None:
    edit = Hold("small")
    first = store.apply(edit, source="mcp", operation_id="op-1")
    store.path.write_text(SAMPLE)  # the user reverts by hand: a replay must not redo it
    again = store.apply(edit, source="mcp", operation_id="op-1")
    assert (first.status, again.status) == ("changed", "exists")
    assert again.diff == first.diff and text(store) == SAMPLE
    with pytest.raises(EditRejected, match="already used for a different edit"):
        store.apply(Hold("big"), source="mcp", operation_id="op-1")
    with pytest.raises(EditRejected, match="invalid operation id"):
        store.apply(edit, source="mcp", operation_id="bad id!")


def test_corrupt_operations_file_fails_closed(store: IntentEditor) -> None:
    store.state.ensure()
    (store.state.operations).write_text("{not json")
    with pytest.raises(Exception, match="corrupt"):
        store.apply(Hold("small"), source="mcp", operation_id="op-2")
    assert text(store) == SAMPLE


def test_every_edit_is_audited_with_a_diff(store: IntentEditor) -> None:
    apply(store, Hold(name="small"))
    store.apply(Hold("cand-a"), source="mcp", operation_id="op-9")
    records = list(read_jsonl(store.state.audit))
    assert [r["source"] for r in records] == ["cli", "mcp"]
    assert records[1]["operation_id"] == "op-9" and "+    want: held" in records[1]["diff"]
    assert records[0]["ts"].endswith("Z")


def test_a_save_after_our_read_is_kept_and_the_edit_reapplied(
    store: IntentEditor, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = store.transform
    calls = []

    def transform_then_editor_saves(*a: Any, **k: Any) -> Any:
        out = real(*a, **k)
        if not calls:
            store.path.write_text(text(store) + "# saved by an editor\n")
        calls.append(1)
        return out

    monkeypatch.setattr(store, "transform", transform_then_editor_saves)
    result = apply(store, Hold(name="small"))
    assert result.attempts == 2
    assert "# saved by an editor" in text(store) and slot(store, "small").want == "held"


def test_a_save_between_check_and_swap_is_displaced_then_merged(
    store: IntentEditor, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = intent.swap_in
    saves = []

    def editor_saves_first(path: Path, data: bytes, expected: str) -> Any:
        if not saves:
            saves.append(1)
            tmp = path.with_name(".editor.tmp")
            tmp.write_text(path.read_text().replace("30s", "45s") + "# editor\n")
            os.replace(tmp, path)  # the editor's own atomic save
        return real(path, data, expected)

    monkeypatch.setattr(intent, "swap_in", editor_saves_first)
    result = apply(store, Hold(name="small"))
    final = text(store)
    assert result.attempts == 2
    assert "# editor" in final and "poll_interval: 45s" in final
    assert slot(store, "small").want == "held"


def test_a_displaced_save_that_refuses_the_edit_is_put_back(
    store: IntentEditor, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = intent.swap_in
    theirs = SAMPLE.replace("  - name: small\n", "  - name: tiny\n")

    def editor_renames_the_slot(path: Path, data: bytes, expected: str) -> Any:
        if path.read_text() == SAMPLE:
            path.write_text(theirs)
        return real(path, data, expected)

    monkeypatch.setattr(intent, "swap_in", editor_renames_the_slot)
    with pytest.raises(EditRejected, match="unknown slot 'small'"):
        apply(store, Hold(name="small"))
    assert text(store) == theirs


def test_concurrent_threads_serialize_on_the_lock(store: IntentEditor) -> None:
    errors: list[BaseException] = []

    def add(i: int) -> None:
        try:
            apply(store, AddSlot(zone="us-central2-b", accelerator="v4-8", name=f"t-{i}"))
        except BaseException as e:  # collected for the assertion below
            errors.append(e)

    threads = [threading.Thread(target=add, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    desired = parse_desired(text(store))
    assert all(desired.slot(f"t-{i}") is not None for i in range(12))
    assert comments(SAMPLE) == [c for c in comments(text(store)) if c in comments(SAMPLE)]


def test_a_held_lock_times_out_as_a_conflict(tmp_path: Path) -> None:
    file = tmp_path / "desired.yaml"
    file.write_text(SAMPLE)
    store = IntentEditor(file, StateDir(tmp_path / "state"), env={}, lock_timeout=0.2)
    store.state.ensure()
    with open(store.state.intent_lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(EditConflict, match="held the lock"):
            apply(store, Hold(name="small"))
    assert text(store) == SAMPLE


def test_symlink_and_file_mode_are_kept(tmp_path: Path) -> None:
    real = tmp_path / "real.yaml"
    real.write_text(SAMPLE)
    real.chmod(0o640)
    link = tmp_path / "desired.yaml"
    link.symlink_to(real)
    store = IntentEditor(link, StateDir(tmp_path / "state"), env={})
    apply(store, Hold(name="small"))
    assert link.is_symlink() and "want: held" in real.read_text().split("name: small")[1]
    assert real.stat().st_mode & 0o777 == 0o640
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_missing_file_is_refused(tmp_path: Path) -> None:
    store = IntentEditor(tmp_path / "nope.yaml", StateDir(tmp_path / "state"), env={})
    with pytest.raises(EditRejected, match="does not exist"):
        apply(store, Hold(name="x"))
