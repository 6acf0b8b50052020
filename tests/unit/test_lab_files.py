"""Which file an intent edit writes where a lab's members keep files of their own
(intent/lab_files, through the engine): the user's own file for what is new, the file that
declares what it names, the shared file for lab-wide settings; a name shared with another file
is refused; another user's file is refused before anything is asked. As the user running the
tests (root in CI): "another user" is an ``Actor`` the test sets."""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path

import pytest

from reconciler.adapters.statedir import StateDir
from reconciler.errors import EditRejected, InvalidEdit, NotYourSlot
from reconciler.intent.edits import AddSlot, Hold, Release, SetPoll
from reconciler.intent.edits_race import Race
from reconciler.intent.engine import IntentEditor
from reconciler.intent.owners import Actor
from reconciler.runtime.desired_loader import DesiredLoader

ME = pwd.getpwuid(os.geteuid()).pw_name
SHARED = """\
project: proj-1
slots:
  - {name: s1, zone: us-central2-b, accelerator: v4-8, want: held}  # the admin's
"""


@pytest.fixture
def store(tmp_path: Path) -> IntentEditor:
    (tmp_path / "desired.yaml").write_text(SHARED)
    (tmp_path / "desired.d").mkdir()
    return IntentEditor(tmp_path / "desired.yaml", StateDir(tmp_path / "state"), env={})


def add(name: str) -> AddSlot:
    return AddSlot(zone="us-central2-b", accelerator="v4-8", name=name)


def test_a_new_slot_goes_to_the_users_own_file_made_theirs(store: IntentEditor) -> None:
    result = store.apply(add("m1"), source="cli")
    mine = store.file.parent / "desired.d" / f"{ME}.yaml"
    assert result.file == str(mine)
    assert stat.S_IMODE(mine.stat().st_mode) == 0o640 and mine.stat().st_uid == os.geteuid()
    assert mine.read_text().startswith(f"# {ME}'s slots in the lab")
    assert store.file.read_text() == SHARED  # the shared file untouched
    store.apply(Race("grab", ("m1",), count=1), source="cli")  # a group over own slots: there
    desired = DesiredLoader(store.file).load().desired
    assert desired is not None
    assert [(s.name, s.owner) for s in desired.slots] == [("s1", None), ("m1", ME)]
    assert [(g.name, g.owner) for g in desired.race_groups] == [("grab", ME)]
    assert store.parse(store.read().decode()).slot("m1") is not None  # views see the lab


def test_an_edit_writes_the_file_that_declares_what_it_names(store: IntentEditor) -> None:
    store.apply(add("m1"), source="cli")
    result = store.apply(Release("s1"), source="cli", confirmed=True)
    assert result.file == str(store.path)
    assert "want: released" in store.file.read_text()
    assert "want: held" in (store.file.parent / "desired.d" / f"{ME}.yaml").read_text()
    with pytest.raises(EditRejected, match="an edit changes one file"):
        store.apply(Race("both", ("s1", "m1"), count=1), source="cli")


def test_lab_wide_settings_are_the_shared_files(store: IntentEditor) -> None:
    result = store.apply(SetPoll(interval="1m"), source="cli")
    assert result.file == str(store.path) and "poll_interval: 1m" in store.file.read_text()


def test_a_name_another_file_declares_is_refused_at_both_places(store: IntentEditor) -> None:
    with pytest.raises(EditRejected, match="already exists"):
        store.apply(add("s1"), source="cli")  # routed to the shared file: it is there
    auto = AddSlot(zone="us-central2-b", accelerator="v4-8", index=1)
    store.file.write_text(SHARED + "  - {name: spot-v48-usc2b-1, zone: us-central2-b, "
                          "accelerator: v4-8, want: held}\n")  # fmt: skip
    with pytest.raises(InvalidEdit) as caught:  # the name it makes in my file is the admin's
        store.apply(auto, source="cli")
    mine = store.file.parent / "desired.d" / f"{ME}.yaml"
    said = [str(d) for d in caught.value.diagnostics]
    assert said[0].startswith(f"{mine}:4:9: 'spot-v48-usc2b-1' is declared in two files")
    assert said[1].startswith(f"{store.file}:4:12: 'spot-v48-usc2b-1' is declared in two")
    assert "spot-v48" not in mine.read_text()  # nothing written


def test_another_users_file_is_refused_before_anything_is_asked(store: IntentEditor) -> None:
    store.apply(add("m1"), source="cli")
    store.actor = Actor("bob", 54321)
    with pytest.raises(NotYourSlot, match=f"slot 'm1' belongs to {ME}, not to bob") as caught:
        store.apply(Release("m1"), source="cli")  # not "are you sure?": whose it is first
    assert caught.value.exit_code == 77
    store.actor = Actor(ME, os.geteuid())
    assert store.apply(Hold("m1"), source="cli").status == "unchanged"
