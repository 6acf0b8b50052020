"""Reading a file whose owner, links and mode decide whether it is believed
(adapters/owned_files): in a directory others may enter, a second name or a group write bit
refuses it; in one user's 0700 state directory nothing changes (a hard-link backup of the
pins, say, is that user's business)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconciler.adapters.owned_files import read_owned


@pytest.mark.parametrize(("folder", "refused"), [(0o700, False), (0o2750, True), (0o755, True)])
def test_a_second_name_or_a_group_write_bit_counts_where_others_can_reach(
    tmp_path: Path, folder: int, refused: bool
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    pins = state / "known_hosts"
    pins.write_text("pin\n")
    pins.chmod(0o640)
    state.chmod(folder)
    assert read_owned(pins).trusted
    os.link(pins, tmp_path / "backup")
    assert read_owned(pins).trusted is not refused
    os.unlink(tmp_path / "backup")
    pins.chmod(0o660)
    said = read_owned(pins).problem
    assert (said is not None) is refused
    assert said is None or "is writable by others than its owner" in said
    pins.chmod(0o640)
    os.unlink(pins)
    os.mkfifo(pins)  # opened without waiting, and never believed
    assert read_owned(pins).problem is not None
