"""A lab's intent in several files (model/intent_parts): a member's file, names declared twice,
which version of each file is in force, the merge. Pure: text in, values out."""

from __future__ import annotations

import pytest

from reconciler.errors import InvalidDesiredState
from reconciler.model.intent_parts import Part, combine, merge, parse_member, parse_shared

SHARED = """\
project: proj-1
settings:
  runtime_versions: {v4: tpu-ubuntu2204-base}
defaults:
  mode: on-demand
slots:
  - {name: admins-1, zone: us-central2-b, accelerator: v4-8, want: held}
"""
ALICE = """\
slots:
  - name: a1
    zone: us-central2-b
    accelerator: v4-8
  - {name: a2, zone: us-central2-b, accelerator: v4-8}
race_groups:
  - {name: ag, count: 1, slots: [a1, a2]}
generate:
  - {zones: [europe-west4-a], accelerators: {v4-8: 2}, want: released}
"""


def shared() -> Part:
    return parse_shared(SHARED, "desired.yaml")


def member(text: str, owner: str = "alice") -> Part:
    context = shared().context
    assert context is not None
    return parse_member(text, f"desired.d/{owner}.yaml", owner=owner, context=context)


def diagnostics(text: str, owner: str = "alice") -> list[str]:
    with pytest.raises(InvalidDesiredState) as caught:
        member(text, owner)
    return [str(d) for d in caught.value.diagnostics]


def test_a_members_file_is_resolved_under_the_shared_settings_and_is_all_theirs() -> None:
    part = member(ALICE)
    slots = part.desired.slots
    assert [s.name for s in slots][:2] == ["a1", "a2"] and len(slots) == 4  # 2 generated
    assert {s.owner for s in slots} == {"alice"}
    assert {s.mode for s in slots} == {"on-demand"}  # the shared file's defaults
    assert [(g.name, g.owner) for g in part.desired.race_groups] == [("ag", "alice")]
    assert part.places["a1"] == (2, 11) and part.places["a2"] == (5, 12)
    generated = [s.name for s in slots if s.generated]
    assert all(part.places[n] == (8, 1) for n in generated)  # at its `generate:`
    assert part.names == {"a1", "a2", "ag", *generated}


def test_lab_wide_keys_and_another_owner_are_refused_at_their_place() -> None:
    said = diagnostics("settings: {suspend: true}\nslots:\n  - {name: a1, zone: z-a, "
                       "accelerator: v4-8, want: held, owner: bob}\n")  # fmt: skip
    assert said == [
        "desired.d/alice.yaml:1:1: 'settings' is lab-wide and belongs in the shared desired "
        "file; a member's file holds slots, race_groups and generate only",
        "desired.d/alice.yaml:3:65: owner: bob in alice's file: what a member's file declares "
        "is its owner's (leave owner: out, or write alice)",
    ]
    assert member("slots: [{name: a1, zone: us-central2-b, accelerator: v4-8, want: held, "
                  "owner: alice}]").desired.slots[0].owner == "alice"  # fmt: skip


def test_a_race_group_lists_candidates_of_its_own_file_only() -> None:
    said = diagnostics("race_groups: [{name: g, count: 1, slots: [admins-1]}]\n")
    assert len(said) == 1 and said[0].startswith("desired.d/alice.yaml:1:")
    assert "admins-1" in said[0]


def test_an_empty_member_file_is_invalid_like_an_empty_desired_file() -> None:
    assert diagnostics("") == ["desired.d/alice.yaml:1:1: file is empty: nothing is wanted"]
    assert member("slots: []\n").desired.slots == ()


def test_a_name_declared_twice_is_reported_at_both_places_and_the_newer_waits() -> None:
    s, a = shared(), member(ALICE)
    bob_old = member("slots: [{name: b1, zone: us-central2-b, accelerator: v4-8, want: held}]\n",
                     "bob")  # fmt: skip
    bob_new = member("slots:\n  - {name: b1, zone: us-central2-b, accelerator: v4-8, want: held}\n"
                     "  - {name: a1, zone: us-central2-b, accelerator: v4-8, want: released}\n",
                     "bob")  # fmt: skip
    in_force = {p.source: p for p in (s, a, bob_old)}
    parts, said = combine([s, a, bob_new], in_force)
    assert [p.source for p in parts] == [
        "desired.yaml",
        "desired.d/alice.yaml",
        "desired.d/bob.yaml",
    ]
    assert parts[2] is bob_old  # his new version waits; alice's a1 stays hers
    assert [str(d).split(" (")[0] for d in said] == [
        "desired.d/alice.yaml:2:11: 'a1' is declared in two files: here and at "
        "desired.d/bob.yaml:3:12",
        "desired.d/bob.yaml:3:12: 'a1' is declared in two files: here and at "
        "desired.d/alice.yaml:2:11",
    ]
    # both new: neither comes in (alice's version in force stays, bob had none)
    alice_new = member(ALICE.replace("ag", "x1"))
    bob_x = member("slots: [{name: x1, zone: us-central2-b, accelerator: v4-8, want: held}]\n",
                   "bob")  # fmt: skip
    parts, said = combine([s, alice_new, bob_x], {s.source: s, a.source: a})
    assert parts == (s, a) and len(said) == 2


def test_the_shared_files_name_is_kept_over_a_members_new_one() -> None:
    s = shared()
    grab = member("slots: [{name: admins-1, zone: us-central2-b, accelerator: v4-8, "
                  "want: released}]\n", "bob")  # fmt: skip
    parts, said = combine([s, grab], {s.source: s})
    assert parts == (s,) and len(said) == 2


def test_merge_of_one_part_is_that_file_and_of_several_each_ones_slots() -> None:
    s = shared()
    assert merge([s]) is s.desired
    a = member(ALICE)
    merged = merge([s, a])
    assert [x.name for x in merged.slots][:3] == ["admins-1", "a1", "a2"]
    assert [x.order for x in merged.slots] == list(range(len(merged.slots)))
    assert merged.settings == s.desired.settings and merged.project == "proj-1"
    assert merged.digest not in (s.digest, a.digest)
    assert merged.slot("a1") is not None and merged.slot("a1").owner == "alice"  # type: ignore[union-attr]
