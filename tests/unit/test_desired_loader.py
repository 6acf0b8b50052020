"""DesiredLoader keeps the last valid intent in force whatever state the file is in."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from reconciler.runtime.desired_loader import NO_CONTENT, DesiredLoader, content_digest

VALID = """\
# two slots, one racing
project: my-proj
settings:
  poll_interval: 30s
  zone_codes:
    europe-west4-a: ew4a
slots:
  - name: spot-v6e8-ew4a-1
    zone: europe-west4-a
    accelerator: v6e-8
    want: held
  - name: spot-v6e8-ew4a-2
    zone: europe-west4-a
    accelerator: v6e-8
race_groups:
  - name: grab
    count: 1
    slots: [spot-v6e8-ew4a-2]
"""

OTHER = VALID.replace("want: held", "want: released")


def loaded(path: Path, text: str = VALID) -> DesiredLoader:
    """A store that has loaded ``text`` once (so a valid intent is in force)."""
    path.write_text(text)
    store = DesiredLoader(path, {})
    assert store.load().current_valid
    return store


@pytest.fixture
def desired_path(tmp_path: Path) -> Path:
    return tmp_path / "desired.yaml"


def test_valid_file_becomes_the_intent(desired_path: Path) -> None:
    desired_path.write_text(VALID)
    store = DesiredLoader(desired_path, {})
    result = store.load()
    assert result.current_valid and result.changed and result.errors == ()
    assert result.desired is not None and result.desired is store.current
    assert [s.name for s in result.desired.slots] == ["spot-v6e8-ew4a-1", "spot-v6e8-ew4a-2"]
    assert result.digest == content_digest(VALID.encode())


def test_invalid_save_keeps_last_valid_intent(desired_path: Path) -> None:
    desired_path.write_text(VALID)
    store = DesiredLoader(desired_path, {})
    first = store.load().desired
    desired_path.write_text(
        VALID.replace("accelerator: v6e-8\n    want", "acelerator: v6e-8\n    want")
    )
    result = store.load()
    assert result.desired is first and store.current is first
    assert not result.current_valid and not result.changed
    assert any(
        str(d).startswith(f"{desired_path}:10:5: unknown key 'acelerator'") for d in result.errors
    ), result.errors


def test_valid_change_replaces_intent_and_comment_edit_does_not_count(desired_path: Path) -> None:
    store = loaded(desired_path)
    desired_path.write_text(OTHER)
    changed = store.load()
    assert changed.changed and changed.current_valid
    assert changed.desired is not None
    assert changed.desired.slots[0].want == "released"
    desired_path.write_text("# a new comment\n" + OTHER)
    comment = store.load()
    assert comment.current_valid and not comment.changed
    assert comment.desired is not None and comment.desired.digest == comment.digest


def test_invalid_then_fixed_reports_change_only_if_intent_differs(desired_path: Path) -> None:
    store = loaded(desired_path)
    desired_path.write_text("project: [")
    assert not store.load().current_valid
    desired_path.write_text(VALID)
    back = store.load()
    assert back.current_valid and back.errors == () and not back.changed


def test_invalid_at_startup_means_no_intent(desired_path: Path) -> None:
    desired_path.write_text("project: my-proj\nslots:\n  - name: x\n")
    result = DesiredLoader(desired_path, {}).load()
    assert result.desired is None and not result.current_valid and not result.changed
    assert all(d.file == str(desired_path) for d in result.errors)


def test_empty_file(desired_path: Path) -> None:
    store = loaded(desired_path)
    desired_path.write_bytes(b"")
    result = store.load()
    assert result.desired is store.current is not None and not result.current_valid
    assert [str(d) for d in result.errors] == [
        f"{desired_path}:1:1: file is empty: nothing is wanted"
    ]
    assert result.digest == content_digest(b"")


def test_every_prefix_is_valid_or_diagnosed(desired_path: Path) -> None:
    desired_path.write_text(VALID)
    store = DesiredLoader(desired_path, {})
    good = store.load().desired
    raw = VALID.encode()
    valid = invalid = 0
    for end in range(len(raw)):
        desired_path.write_bytes(raw[:end])
        result = store.load()
        assert result.desired is not None
        if result.current_valid:
            valid += 1
            assert result.errors == ()
        else:
            invalid += 1
            assert result.errors, end
            assert result.desired is good  # a truncated file never displaces the intent
            assert not any("internal error" in d.message for d in result.errors), result.errors
        good = store.current
    assert valid and invalid


def test_missing_file_then_created(desired_path: Path) -> None:
    store = DesiredLoader(desired_path, {})
    missing = store.load()
    assert missing.desired is None and missing.digest == NO_CONTENT
    assert [str(d) for d in missing.errors] == [
        f"{desired_path}:1:1: file not found (write one with `tpu-reconciler init`, or point -f "
        "at yours)"
    ]
    desired_path.write_text(VALID)
    assert store.load().changed
    desired_path.unlink()
    gone = store.load()
    assert gone.desired is store.current is not None and not gone.current_valid


def test_unreadable_path_is_a_diagnostic(tmp_path: Path) -> None:
    result = DesiredLoader(tmp_path, {}).load()  # a directory where the file should be
    assert result.desired is None and "directory" in result.errors[0].message


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_permission_denied_is_a_diagnostic(desired_path: Path) -> None:
    desired_path.write_text(VALID)
    desired_path.chmod(0)
    result = DesiredLoader(desired_path, {}).load()
    assert result.desired is None and "cannot read" in result.errors[0].message


def test_non_utf8_bytes_point_at_the_byte(desired_path: Path) -> None:
    store = loaded(desired_path)
    desired_path.write_bytes(b"project: my-proj\nsettings:\n  network: n\xffet\n")
    result = store.load()
    assert not result.current_valid and result.desired is store.current is not None
    assert [str(d) for d in result.errors] == [f"{desired_path}:3:13: not valid UTF-8 (byte 0xff)"]


def test_utf8_bom_is_accepted(desired_path: Path) -> None:
    desired_path.write_bytes(b"\xef\xbb\xbf" + VALID.encode())
    assert DesiredLoader(desired_path, {}).load().current_valid


def test_env_overrides_are_honoured_and_reported_by_variable(desired_path: Path) -> None:
    desired_path.write_text(VALID)
    good = DesiredLoader(desired_path, {"TPU_RECONCILER_POLL_INTERVAL": "10"}).load()
    assert good.desired is not None and good.desired.settings.poll_interval == 10.0
    bad = DesiredLoader(desired_path, {"TPU_RECONCILER_CONCURRENCY": "0"}).load()
    assert bad.desired is None
    assert bad.errors[0].file == "$TPU_RECONCILER_CONCURRENCY"


def test_same_bytes_are_not_parsed_twice(desired_path: Path) -> None:
    desired_path.write_text(VALID)
    store = DesiredLoader(desired_path, {})
    first = store.load()
    again = store.load()
    # A reparse would build a new (equal) Desired; the very same object means none happened.
    assert again.desired is first.desired and not again.changed and again.current_valid
    desired_path.write_text("project: [")
    bad = store.load()
    assert store.load().errors is bad.errors
    desired_path.write_text(VALID)
    assert store.load().desired is not first.desired  # other bytes in between: parsed again


# --- a lab's members' files (desired.d/<user>.yaml) ------------------------------------------

ME = pwd.getpwuid(os.geteuid()).pw_name
SHARED = """\
project: my-proj
slots:
  - {name: s1, zone: europe-west4-a, accelerator: v4-8, want: held}
"""


def member_slot(name: str, want: str = "held") -> str:
    return f"slots:\n  - {{name: {name}, zone: europe-west4-a, accelerator: v4-8, want: {want}}}\n"


@pytest.fixture
def lab_store(desired_path: Path) -> tuple[DesiredLoader, Path]:
    """A desired file with a members' directory holding this user's file."""
    desired_path.write_text(SHARED)
    members = desired_path.parent / "desired.d"
    members.mkdir(mode=0o755)
    mine = members / f"{ME}.yaml"
    mine.write_text(member_slot("m1"))
    mine.chmod(0o644)
    return DesiredLoader(desired_path, {}, clock=lambda: clock[0]), mine


clock = [0.0]


def test_members_files_join_the_intent_as_their_owners(
    lab_store: tuple[DesiredLoader, Path],
) -> None:
    store, mine = lab_store
    result = store.load()
    assert result.current_valid and result.desired is not None
    assert [(s.name, s.owner) for s in result.desired.slots] == [("s1", None), ("m1", ME)]
    assert [(f.source, f.uid) for f in result.files] == [
        (str(store.path), os.geteuid()),
        (str(mine), os.geteuid()),
    ]
    # the file's name, not its content, is its owner's; a misnamed file counts for nothing
    (mine.parent / "someone-else.yaml").write_text(member_slot("x1"))
    (mine.parent / ".swp.yaml").write_text("junk")  # editor files are left alone
    (mine.parent / f"{ME}.yaml~").write_text("junk")
    again = store.load()
    assert again.desired is not None and [s.name for s in again.desired.slots] == ["s1", "m1"]
    assert [str(d) for d in again.errors] == [
        f"{mine.parent}/someone-else.yaml:1:1: {mine.parent}/someone-else.yaml is owned by {ME}: "
        f"a member's file is named after its owner ({ME}.yaml), so it is not used"
    ]


def test_a_members_invalid_file_keeps_its_version_in_force_and_holds_back_nobody(
    lab_store: tuple[DesiredLoader, Path],
) -> None:
    store, mine = lab_store
    store.load()
    mine.write_text("slots: [")  # a half-written save
    store.path.write_text(SHARED.replace("want: held", "want: released"))  # the admin's change
    result = store.load()
    assert not result.current_valid and result.desired is not None
    wants = {s.name: s.want for s in result.desired.slots}
    assert wants == {"s1": "released", "m1": "held"}  # the admin's applied, theirs as it was
    assert [d.file for d in result.errors] == [str(mine)]


def test_a_name_declared_twice_keeps_the_first_and_says_both_places(
    lab_store: tuple[DesiredLoader, Path],
) -> None:
    store, mine = lab_store
    store.load()
    mine.write_text(member_slot("m1") + "  - {name: s1, zone: europe-west4-a, "
                    "accelerator: v4-8, want: released}\n")  # fmt: skip
    result = store.load()
    assert result.desired is not None
    assert [(s.name, s.want, s.owner) for s in result.desired.slots] == [
        ("s1", "held", None), ("m1", "held", ME),
    ]  # fmt: skip
    said = [str(d) for d in result.errors]
    assert said[0].startswith(f"{store.path}:3:12: 's1' is declared in two files: here and at "
                              f"{mine}:3:12")  # fmt: skip
    assert said[1].startswith(f"{mine}:3:12: 's1' is declared in two files: here and at ")


def test_a_members_file_that_goes_stays_a_moment_then_its_slots_leave(
    lab_store: tuple[DesiredLoader, Path],
) -> None:
    store, mine = lab_store
    clock[0] = 100.0
    store.load()
    mine.unlink()  # an editor's save by rename, or a member removing their file
    kept = store.load()
    assert kept.desired is not None and [s.name for s in kept.desired.slots] == ["s1", "m1"]
    clock[0] = 103.0  # past VANISH_GRACE
    gone = store.load()
    assert gone.desired is not None and [s.name for s in gone.desired.slots] == ["s1"]
    assert gone.changed


def test_a_shared_file_owned_by_someone_it_may_not_be_is_refused_like_an_invalid_one(
    desired_path: Path,
) -> None:
    desired_path.write_text(VALID)
    lab = DesiredLoader(desired_path, {}, owners={os.geteuid()})
    first = lab.load()
    assert first.current_valid
    desired_path.chmod(0o664)  # others may write it: a member's save could come through
    refused = lab.load()
    assert refused.desired is first.desired and not refused.current_valid
    assert "writable by others than its owner" in str(refused.errors[0])
    desired_path.chmod(0o644)
    other = DesiredLoader(desired_path, {}, owners={os.geteuid() + 1})
    said = str(other.load().errors[0])
    assert "who may not change the lab's shared file" in said and other.current is None
