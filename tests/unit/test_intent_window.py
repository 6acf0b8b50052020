"""Edits through a window of the file (``intent/window.py``): they write what the round trip
of the whole file writes (the same text, but where ruamel's rendering of the whole file loses
a blank line the window keeps), every comment and untouched line kept; a change the window
cannot place, or a result that does not hold every entry left out, falls back to the whole
file."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.adapters.statedir import StateDir
from reconciler.intent import engine, owners
from reconciler.intent.edits import (
    AddSlot,
    Edit,
    Hold,
    HoldMany,
    Release,
    RemoveSlot,
    SetPoll,
    Setup,
    TmuxAll,
)
from reconciler.intent.edits_control import Pause, Suspend
from reconciler.intent.edits_race import Race, RaceZones
from reconciler.intent.edits_workload import RestartWorkload, SetWorkload, StopWorkload
from reconciler.intent.engine import IntentEditor
from reconciler.intent.roundtrip import OutsideWindow
from reconciler.intent.window import Window, lines
from reconciler.model.load import parse_desired
from reconciler.model.load_yaml import parse_tree

BIG = """\
# The lab's TPUs.
project: my-project-123   # the TRC project
settings:
  poll_interval: 30s
defaults:
  mode: spot
  setup: {tmux: false}

slots:
  # rack 0
  - name: s00
    zone: us-central2-b
    accelerator: v4-8
    want: held  # keep it
  - {name: s01, zone: us-central2-b, accelerator: v4-8, want: held}   # flow
  - name: s02
    zone: us-central2-b
    accelerator: v4-8
    want: released

  # rack 1: blank line above
  - name: s03
    zone: us-central2-b
    accelerator: v4-8
  - name: s04
    zone: us-central2-b
    accelerator: v4-8   # wide
  - name: s05
    zone: us-central2-b
    accelerator: v4-8
  - name: s06
    zone: us-central2-b
    accelerator: v4-8
    want: held
    setup:
      tmux: false   # mine
  - name: s07
    zone: us-central2-b
    accelerator: v4-8
    want: held
    workload:
      command: |
        # not a comment: part of the command
        python train.py

  # candidates
  - name: cand-1
    zone: europe-west4-a
    accelerator: v6e-8
  - name: cand-2
    zone: us-east1-d
    accelerator: v6e-8
  - name: s10
    zone: us-central2-b
    accelerator: v4-8
    want: held
    workload: {command: "python serve.py", restart: always}
  - name: s11
    zone: us-central2-b
    accelerator: v4-8
    want: held
  - name: last
    zone: us-central2-b
    accelerator: v4-8
    want: released   # the end of the list
  # after the last slot

race_groups:
  - name: g0
    count: 1
    slots: [s03, s04]
  - name: g1
    count: 1   # one
    slots:
      - cand-1
      - cand-2
  - name: g2
    count: 1
    slots: [s05]
# end of file
"""

EDITS: list[Edit] = [
    Hold("s02"),
    Hold("s05"),  # leaves g2, which is emptied and removed
    Hold("cand-1"),
    Release("s11"),
    Release("s04"),
    HoldMany(("s02", "s11")),
    RemoveSlot("s06"),
    RemoveSlot("last"),
    RemoveSlot("cand-2"),
    AddSlot(zone="us-east5-a", accelerator="v6e-8"),
    Setup("s06", tmux=True, rerun=True),
    Setup("s11", bootstrap=True),
    Race("g3", ("s00", "s11"), 1),
    Race("g1", ("cand-1", "cand-2", "s02"), 2, exact=False),
    Race("g1", ("cand-2",), 1),
    RaceZones("gz", "v6e-8", ("us-east1-d", "us-east5-a")),
    SetWorkload("s11", command="python x.py", restart="always"),
    SetWorkload("g1", command="python y.py"),
    RestartWorkload("s07"),
    StopWorkload("s07"),
    StopWorkload("s10"),
    SetPoll("1m"),
    Pause("s05"),
    Pause("s06", resume=True),  # not paused: says so, changes nothing
    Setup("s04", at_boot=False),
    Suspend(),
    TmuxAll(),
]


def editor(tmp_path: Path, text: str) -> IntentEditor:
    tmp_path.mkdir(parents=True, exist_ok=True)
    file = tmp_path / "desired.yaml"
    file.write_text(text)
    return IntentEditor(file, StateDir(tmp_path / "state"), env={})


def whole_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine.Window, "around", classmethod(lambda *_: None))


def both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, edit: Edit
) -> tuple[tuple[str, list[str], list[str]], tuple[str, list[str], list[str]]]:
    """The edit through its window (which must take it), and through the whole file."""
    agreed: list[bool] = []
    real = Window.agrees

    def spy(self: Window, whole: object, window: object) -> bool:
        agreed.append(real(self, whole, window))
        return agreed[-1]

    with monkeypatch.context() as m:
        m.setattr(Window, "agrees", spy)
        ours = editor(tmp_path / "w", text).transform(text, edit, confirmed=True)
    assert agreed == [True] or isinstance(edit, TmuxAll), agreed
    with monkeypatch.context() as m:
        whole_file(m)
        theirs = editor(tmp_path / "a", text).transform(text, edit, confirmed=True)
    return ours, theirs


def comments(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith("#")]


@pytest.mark.parametrize("edit", EDITS, ids=lambda e: e.summary())
def test_an_edit_writes_what_the_whole_file_s_round_trip_writes(
    edit: Edit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ours, *said), (theirs, *also) = both(tmp_path, monkeypatch, BIG, edit)
    assert ours != BIG and said == also
    if edit.kind.endswith("_workload") and edit.args["name"] == "s07":
        # ruamel's whole file drops the blank line after s07's block scalar: the window keeps it
        assert ours.replace("\n\n  # candidates", "\n  # candidates") == theirs
    else:
        assert ours == theirs
    assert comments(ours) == comments(theirs)


def test_the_window_leaves_out_what_an_edit_does_not_name() -> None:
    desired = parse_desired(BIG)
    window = Window.around(BIG, parse_tree(BIG, "d"), ("s05",), desired)
    assert window is not None
    kept = window.text
    for name in ("s00", "s05", "last", "g0", "g2"):  # first, named, last; g2 holds s05
        assert f"name: {name}" in kept
    for name in ("s02", "s03", "s07", "cand-1", "s11", "g1"):
        assert f"name: {name}" not in kept
    assert "# rack 1: blank line above" not in kept  # went with s03, the entry below it
    assert "# after the last slot" in kept and "# end of file" in kept
    assert "part of the command" not in kept  # s07's block scalar went with it, whole
    assert window.splice(kept) == BIG


def test_a_change_across_an_entry_left_out_is_refused() -> None:
    window = Window.around(BIG, parse_tree(BIG, "d"), ("s02",), parse_desired(BIG))
    assert window is not None and "name: s01" not in window.text
    rows = lines(window.text)
    at = rows.index("    want: held  # keep it\n")  # s00's last line; s02's first is next
    assert rows[at + 1] == "  - name: s02\n"
    rows[at : at + 2] = ["    want: released\n", "  - name: s99\n"]
    with pytest.raises(OutsideWindow):
        window.splice("".join(rows))


def test_a_result_without_an_entry_left_out_disagrees() -> None:
    window = Window.around(BIG, parse_tree(BIG, "d"), ("s00",), parse_desired(BIG))
    assert window is not None
    edited = parse_tree(window.text, "d").data
    assert window.agrees(parse_tree(BIG, "d").data, edited)
    changed = BIG.replace("python train.py", "python other.py")
    assert not window.agrees(parse_tree(changed, "d").data, edited)
    dropped = BIG.replace("  - name: s11\n", "  - name: s12\n")
    assert not window.agrees(parse_tree(dropped, "d").data, edited)


def test_a_lookup_outside_the_window_edits_the_whole_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # TmuxAll reads every slot that says tmux: false (s06 is one, left out of its window)
    runs: list[bool] = []
    real = IntentEditor._run

    def spy(self: IntentEditor, doc: engine.Doc, **kw: object) -> object:
        runs.append(doc.partial)
        return real(self, doc, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(IntentEditor, "_run", spy)
    new, notes, _ = editor(tmp_path, BIG).transform(BIG, TmuxAll(), confirmed=True)
    assert runs == [True, False]
    assert "defaults:\n  mode: spot\n  setup: {tmux: true}\n" in new
    assert any("s06" in note for note in notes)


def test_a_flow_list_or_a_short_one_is_edited_whole(tmp_path: Path) -> None:
    short = (
        "project: my-project-123\nslots:\n"
        "  - {name: a, zone: us-central2-b, accelerator: v4-8, want: held}\n"
    )
    assert Window.around(short, parse_tree(short, "d"), ("a",), parse_desired(short)) is None
    entry = "{name: %s, zone: us-central2-b, accelerator: v4-8, want: released}"
    flow = f"project: my-project-123\nslots: [{', '.join(entry % n for n in 'abc')}]\n"
    assert Window.around(flow, parse_tree(flow, "d"), ("b",), parse_desired(flow)) is None
    new, _, _ = editor(tmp_path, flow).transform(flow, Hold("b"), confirmed=True)
    assert [s.want for s in parse_desired(new).slots] == ["released", "held", "released"]


def test_owners_are_stamped_through_the_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    me = owners.current_actor().user
    text = BIG.replace("  - name: s11\n", f"  - name: s11\n    owner: {me}\n")
    for edit in (Hold("s02"), Race("g1", ("cand-1", "cand-2"), 2)):
        ours, theirs = both(tmp_path / edit.kind, monkeypatch, text, edit)
        assert ours == theirs
        assert (
            f"owner: {me}" in ours[0].split("name: s02" if edit.kind == "hold" else "- name: g1")[1]
        )
