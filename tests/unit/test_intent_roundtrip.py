"""Round-trip rendering of intent edits: untouched lines stay byte-identical, comments that
ruamel hangs on the previous item follow the edit sensibly."""

from __future__ import annotations

from ruamel.yaml.comments import CommentedMap

from reconciler.intent.roundtrip import Doc, append_item, plain

MIXED = """\
# header
project: p-123456   # id
slots:
    # first
    - name: a
      want: held   # keep
    # about b
    - name: b
      want: held
    # after the list

race_groups:
  - name: g
    count: 1
    slots: [a, b]    # flow, wide spacing
# end
"""


def test_nothing_changed_is_byte_identical() -> None:
    doc = Doc(MIXED, "x")
    assert doc.tree["project"] == "p-123456"
    assert doc.sync() == MIXED


def test_a_change_in_a_differently_indented_file_touches_only_its_line() -> None:
    doc = Doc(MIXED, "x")
    doc.tree["slots"][1]["want"] = "released"
    out = doc.sync()
    changed = [(a, b) for a, b in zip(MIXED.splitlines(), out.splitlines(), strict=True) if a != b]
    assert changed == [("      want: held", "      want: released")]


def test_append_keeps_the_comments_that_introduce_the_next_section_after_it() -> None:
    doc = Doc(MIXED, "x")
    append_item(doc.tree["slots"], CommentedMap(name="c", want="held"))
    out = doc.sync()
    assert out.index("name: c") < out.index("# after the list") < out.index("race_groups:")
    assert out.startswith("# header\nproject: p-123456   # id\nslots:\n    # first\n")
    assert out.endswith("# end\n")


def test_append_to_a_flow_list_stays_flow() -> None:
    doc = Doc(MIXED, "x")
    doc.tree["race_groups"][0]["slots"].append("c")
    assert "slots: [a, b, c]" in doc.sync()


def test_deleting_items_keeps_the_full_line_comments_after_them() -> None:
    for index, gone in ((0, "name: a"), (1, "name: b")):
        doc = Doc(MIXED, "x")
        doc.delete_item((), "slots", index)
        out = doc.sync()
        assert gone not in out
        for comment in ("# first", "# about b", "# after the list", "# end"):
            assert comment in out
    doc = Doc(MIXED, "x")
    doc.delete_item((), "slots", 0)
    assert "# keep" not in doc.text  # the deleted item's own inline comment goes with it


def test_deleting_the_only_item_leaves_an_empty_list_and_the_comments() -> None:
    text = "project: p-123456\nslots:\n- name: a\n  want: held  # mine\n# next section\n\nx: 1\n"
    doc = Doc(text, "x")
    doc.delete_item((), "slots", 0)
    assert doc.sync() == "project: p-123456\nslots: []\n# next section\n\nx: 1\n"


def test_edits_after_a_delete_apply_to_the_new_text() -> None:
    doc = Doc(MIXED, "x")
    doc.delete_item((), "slots", 0)
    doc.tree["race_groups"][0]["count"] = 0
    out = doc.sync()
    assert plain(Doc(out, "x").tree)["race_groups"][0]["count"] == 0
    assert "# about b" in out and "name: a" not in out
