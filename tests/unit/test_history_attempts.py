"""Workload attempts with their chips through the real SQLite store: recorded by the recorder,
read back by ``history`` (text and ``--json``), and a store of schema version 1 both read as
it is and migrated in place."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from reconciler.adapters.history_db import HistoryDB, open_readonly
from reconciler.adapters.history_sql import SCHEMA, SCHEMA_VERSION
from reconciler.adapters.statedir import StateDir
from reconciler.core.chip_use import ChipSummary
from reconciler.runtime.events import EventLog
from reconciler.runtime.history import HistoryRecorder
from reconciler.runtime.history_reads import history_document
from tests.support.cli import clean_env, run_cli

Z1 = "europe-west4-a"
T0 = int(time.time()) - 3600


def test_an_attempts_chips_go_through_the_store_to_history(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state").ensure()
    recorder = HistoryRecorder(state, EventLog(state), batch_seconds=0.05)
    recorder.start()
    recorder.record_workload_attempt(
        slot="a", zone=Z1, accelerator="v6e-8", run_id="r-1", attempt=1, started_at=T0,
        ended_at=T0 + 3600, exit_code=1, cause="failed: idle",
        chips=ChipSummary(duty_p50=97.0, idle_periods=2, idle_seconds=1500.0, idle_longest=1200.0),
    )  # fmt: skip
    recorder.record_workload_attempt(
        slot="a", zone=Z1, accelerator="v6e-8", run_id="r-1", attempt=2, started_at=T0 + 3700,
        ended_at=T0 + 3800, exit_code=0, cause="succeeded",
    )  # fmt: skip
    assert recorder.flush()
    recorder.close()
    db = HistoryDB(state.history, readonly=True)
    try:
        assert db.meta("schema_version") == str(SCHEMA_VERSION)
        second, first = db.attempts()
    finally:
        db.close()
    assert (second.attempt, second.chips, second.exit_code) == (2, None, 0)
    assert first.chips == ChipSummary(97.0, 2, 1500.0, 1200.0)
    assert (first.slot, first.run_id, first.ended_at) == ("a", "r-1", T0 + 3600)

    doc = history_document(state.history, zone=Z1)
    assert [a["attempt"] for a in doc["attempts"]] == [2, 1]
    assert doc["attempts"][1]["duty_cycle_p50"] == 97.0
    assert doc["attempts"][1]["longest_idle_seconds"] == 1200.0
    assert history_document(state.history, zone="us-east5-b")["attempts"] == []

    env = clean_env()
    shown = run_cli("--state-dir", str(state.root), "history", cwd=tmp_path, env=env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("No queued resource or node recorded yet.\n")  # only attempts
    table = shown.stdout.split("Workload attempts, newest first:\n", 1)[1].splitlines()
    assert "TPU p50" in table[0]
    assert "97%" in table[2]
    assert "2 x 25m (longest 20m)" in table[2]
    as_json = run_cli("--state-dir", str(state.root), "history", "--json", cwd=tmp_path, env=env)
    assert json.loads(as_json.stdout)["attempts"][1]["idle_periods"] == 2


def _version_1_store(path: Path) -> None:
    """A store as the previous version wrote it: its schema, version 1, one attempt row."""
    with sqlite3.connect(path) as conn:
        conn.executescript(SCHEMA)  # version 1's tables: SCHEMA is never changed, only migrated
        conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
        names = [(1, "a"), (2, Z1), (3, "v6e-8"), (4, "r-0"), (5, "succeeded")]
        conn.executemany("INSERT INTO names(id, name) VALUES (?, ?)", names)
        conn.execute(
            "INSERT INTO workload_attempts VALUES (?, 1, 2, 3, 4, 1, ?, 0, 5)",
            (T0 * 1000, (T0 + 60) * 1000),
        )
    conn.close()


def test_a_version_1_store_reads_as_it_is_and_migrates_when_opened_for_writing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "history.sqlite"
    _version_1_store(path)
    ro = open_readonly(path)
    assert ro is not None
    try:
        (old,) = ro.attempts()  # no attempt_chips table: read with no chips
    finally:
        ro.close()
    assert (old.run_id, old.cause, old.chips, old.ended_at) == ("r-0", "succeeded", None, T0 + 60)

    db = HistoryDB(path)  # the writer migrates
    try:
        assert db.meta("schema_version") == "3"
        from reconciler.core.history import WorkloadAttempt

        db.write([WorkloadAttempt("a", Z1, "v6e-8", "r-1", 1, T0 + 100, T0 + 200, 0, "succeeded",
                                  ChipSummary(None, 0, 0.0, 0.0))])  # fmt: skip
        new, kept = db.attempts()
    finally:
        db.close()
    assert kept == old
    assert new.chips == ChipSummary(None, 0, 0.0, 0.0)  # read, but no figure was ever known
    with sqlite3.connect(path) as conn:  # a second writer open changes nothing
        tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conn.close()
    assert "attempt_chips" in tables
    HistoryDB(path).close()
    # what an earlier version inserts (9 values) still goes into the migrated table
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO workload_attempts VALUES (?, 1, 2, 3, 4, 2, NULL, NULL, NULL)",
                     (T0 * 1000,))  # fmt: skip
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
            "3",
        )
    conn.close()
