"""Damage to the capacity history under a running recorder is noticed at its next batch (not
minutes later), said (``history.rebuilt``), and the store rebuilt from the event log: a file
deleted, cut short, or with its header overwritten, on real SQLite."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from reconciler.adapters.statedir import StateDir
from reconciler.runtime.events import EventLog
from reconciler.runtime.history import HistoryRecorder

pytestmark = pytest.mark.integration


def _kinds(state: StateDir) -> list[str]:
    if not state.events.exists():
        return []
    return [json.loads(line)["kind"] for line in state.events.read_text().splitlines()]


def _damage(path: Path, how: str) -> None:
    if how == "deleted":
        path.unlink()
    elif how == "cut short":
        with open(path, "r+b") as f:
            f.truncate(1024)
    elif how == "garbage header":
        with open(path, "r+b") as f:
            f.write(b"\xff" * 100)
    elif how == "replaced":
        fresh = path.with_suffix(".new")
        fresh.write_bytes(b"not a database at all" * 50)
        os.replace(fresh, path)


@pytest.mark.parametrize(
    ("how", "said"),
    [("deleted", "deleted"), ("cut short", "cut short"), ("garbage header", "header"),
     ("replaced", "replaced")],
)  # fmt: skip
def test_damage_is_noticed_at_the_next_batch_and_rebuilt(
    tmp_path: Path, how: str, said: str
) -> None:
    state = StateDir(tmp_path / "state").ensure()
    events = EventLog(state)
    recorder = HistoryRecorder(state, events, batch_seconds=0.1)
    recorder.start()
    try:
        deadline = time.monotonic() + 10
        while not state.history.exists() or state.history.stat().st_size < 100:
            assert time.monotonic() < deadline, "the recorder never opened its store"
            time.sleep(0.05)
        assert recorder.flush()
        assert state.history.read_bytes().startswith(b"SQLite format 3\x00")
        _damage(state.history, how)
        deadline = time.monotonic() + 10
        while "history.rebuilt" not in _kinds(state):
            assert time.monotonic() < deadline, f"{how}: not noticed: {_kinds(state)}"
            time.sleep(0.05)
        assert recorder.flush()
        assert recorder.last_error is None
    finally:
        recorder.close()
    rebuilt = [json.loads(line) for line in state.events.read_text().splitlines()]
    failed = [e for e in rebuilt if e["kind"] == "history.failed"]
    assert failed and said in failed[0]["error"]  # said, with its cause
    with sqlite3.connect(state.history) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM meta").fetchone()[0] > 0
