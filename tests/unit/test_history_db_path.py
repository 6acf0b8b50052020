"""The history store under a state directory whose path holds URI characters."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.adapters.history_db import HistoryDB, open_readonly


def _files(root: Path) -> list[str]:
    """Every path under ``root`` but SQLite's own WAL companions of the store."""
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if not p.name.endswith(("-wal", "-shm"))
    )


@pytest.mark.parametrize("name", ["team#2", "what?", "100%", "a b", "x#y?z=1"])
def test_a_read_only_view_opens_the_same_file_and_creates_nothing(
    tmp_path: Path, name: str
) -> None:
    state = tmp_path / name
    state.mkdir()
    path = state / "history.sqlite"
    writer = HistoryDB(path)
    writer.set_meta_default("probe", "here")
    writer.close()
    before = _files(tmp_path)
    reader = open_readonly(path)
    assert reader is not None
    try:
        row = reader.conn.execute("SELECT value FROM meta WHERE key = 'probe'").fetchone()
    finally:
        reader.close()
    assert row == ("here",)
    assert _files(tmp_path) == before  # no stray file beside the state directory
