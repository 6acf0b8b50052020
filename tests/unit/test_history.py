"""The history tracker (pure) and the SQLite store (real SQLite in a temp dir)."""

from __future__ import annotations

import dataclasses
import json
import random
import sqlite3
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.adapters.history_db import HistoryDB, open_store
from reconciler.adapters.statedir import StateDir
from reconciler.adapters.tpu_api_parse import QRState, request_state
from reconciler.core.capacity import Open, summarize
from reconciler.core.history import (
    Lifetime,
    LoserDeleted,
    RaceWon,
    Record,
    Refusal,
    Seen,
    Tracker,
    Transition,
    Wait,
    from_event,
    open_samples,
)
from reconciler.core.memory import Memory
from reconciler.model.observed import Observation
from reconciler.runtime.backends import word_state
from reconciler.runtime.events import EventLog, read_events
from reconciler.runtime.history import HistoryRecorder
from tests.support.worlds import desired, qr, slot

Z1, Z2 = "europe-west4-a", "us-east5-b"
T0 = int(time.time()) - 3600  # within the default retention


def seen(slot: str, state: str | None, zone: str = Z1, **kw: object) -> Seen:
    """A look at a TPU API queued resource in ``state`` (the API's word)."""
    phase = request_state(state) if state is not None else None
    return Seen(
        slot=slot, zone=zone, state=state, accelerator="v6e-8", mode="spot", request=phase, **kw
    )  # type: ignore[arg-type]


def walk(tracker: Tracker, steps: list[tuple[float, list[Seen]]], **kw: object) -> list[Record]:
    out: list[Record] = []
    for now, looks in steps:
        out += tracker.step(looks, now, gone_zones=[Z1, Z2], complete=True, **kw)  # type: ignore[arg-type]
    return out


def test_a_served_request_then_preempted_gives_wait_and_lifetime() -> None:
    records = walk(
        Tracker(),
        [
            (0, [seen("a", "ACCEPTED")]),
            (10, [seen("a", "WAITING_FOR_RESOURCES")]),
            (100, [seen("a", "PROVISIONING")]),
            (130, [seen("a", "ACTIVE")]),
            (3730, [seen("a", "SUSPENDED")]),
            (3740, [seen("a", "DELETING")]),
            (3750, []),
        ],
    )
    transitions = [r for r in records if isinstance(r, Transition)]
    assert [(t.before, t.after) for t in transitions] == [
        (None, "ACCEPTED"),
        ("ACCEPTED", "WAITING_FOR_RESOURCES"),
        ("WAITING_FOR_RESOURCES", "PROVISIONING"),
        ("PROVISIONING", "ACTIVE"),
        ("ACTIVE", "SUSPENDED"),
        ("SUSPENDED", "DELETING"),
        ("DELETING", None),
    ]
    waits = [r for r in records if isinstance(r, Wait)]
    assert waits == [Wait("a", Z1, "v6e-8", "spot", 0, 100, 130, 130)]
    lives = [r for r in records if isinstance(r, Lifetime)]
    assert lives == [Lifetime("a", Z1, "v6e-8", "spot", 130, 3730, "preempted")]
    assert lives[0].seconds == 3600


def test_no_change_no_records_and_unseen_zone_is_not_gone() -> None:
    t = Tracker()
    t.step([seen("a", "ACCEPTED", zone=Z2)], 0, gone_zones=[Z2], complete=True)
    assert t.step([seen("a", "ACCEPTED", zone=Z2)], 5, gone_zones=[Z2], complete=True) == []
    # Z2 did not answer this time: absence there is not a deletion.
    assert t.step([], 6, gone_zones=[Z1], complete=True) == []


def test_deleted_while_queued_is_a_censored_wait() -> None:
    records = walk(
        Tracker(), [(0, [seen("a", "ACCEPTED")]), (50, [seen("a", "DELETING")]), (53, [])]
    )
    assert [r for r in records if isinstance(r, Wait)] == [
        Wait("a", Z1, "v6e-8", "spot", 0, None, None, 50)
    ]


def test_first_seen_active_has_no_wait_but_a_lifetime() -> None:
    records = walk(Tracker(), [(0, [seen("a", "ACTIVE")]), (60, [seen("a", "DELETING")])])
    assert not [r for r in records if isinstance(r, Wait)]
    assert next(r for r in records if isinstance(r, Lifetime)).end == "deleted"


def test_race_winner_losers_waited_and_delete_time() -> None:
    groups = {"a": "g", "b": "g"}
    records = walk(
        Tracker(),
        [
            (0, [seen("a", "ACCEPTED"), seen("b", "ACCEPTED", zone=Z2)]),
            (40, [seen("a", "PROVISIONING"), seen("b", "WAITING_FOR_RESOURCES", zone=Z2)]),
            (41, [seen("a", "PROVISIONING"), seen("b", "DELETING", zone=Z2)]),
            (44, [seen("a", "ACTIVE")]),
        ],
        groups=groups,
    )
    assert [r for r in records if isinstance(r, RaceWon)] == [
        RaceWon("g", "a", Z1, 40, (("b", Z2, 40),))
    ]
    assert [r for r in records if isinstance(r, LoserDeleted)] == [LoserDeleted("g", "b", Z2, 3)]


def test_refusals_once_per_failure_and_only_for_creates() -> None:
    t = Tracker()
    msg = "PERMISSION_DENIED: no permission to submit into this queue"
    errors = {f"{Z1}/a:cloud": (100.0, msg), f"{Z1}/b:cloud": (100.0, "INTERNAL: x")}
    absent = {f"{Z1}/a:cloud": ("a", "v6e-8", "spot", "tpu")}
    first = t.refusals(errors, absent, 50)
    assert first == [Refusal("a", Z1, "v6e-8", "spot", 50, 7, msg, True)]
    assert t.refusals(errors, absent, 60) == []  # same failure, seen again
    errors[f"{Z1}/a:cloud"] = (200.0, msg)
    assert len(t.refusals(errors, absent, 150)) == 1  # it failed again


def test_event_log_replay() -> None:
    slots = {"a": (Z1, "v6e-8", "spot", "tpu")}
    old = {"kind": "qr.state", "slot": "a", "zone": Z1, "after": "ACTIVE"}
    assert from_event(old, 5, slots, word_state) == seen("a", "ACTIVE")
    # a record of this version says the neutral state itself; one before it is read by word
    told = {**old, "after": "WAITING_FOR_RESOURCES", "api": "tpu", "request": "waiting"}
    assert from_event(told, 5, slots) == seen("a", "WAITING_FOR_RESOURCES")
    assert from_event(old, 5, slots) == dataclasses.replace(seen("a", "ACTIVE"), request=None)
    refusal = from_event(
        {"kind": "action.failed", "slot": "a", "action": "create", "error": "RESOURCE_EXHAUSTED"},
        5,
        slots,
    )
    assert isinstance(refusal, Refusal) and refusal.code == 8 and refusal.zone == Z1
    assert from_event({"kind": "desired.loaded"}, 5, slots) is None


def test_open_samples_are_what_is_still_in_progress_now() -> None:
    tracker = Tracker()
    walk(
        tracker,
        [
            (0, [seen("q", "ACCEPTED"), seen("r", "ACTIVE", zone=Z2)]),
            (
                100,
                [
                    seen("q", "WAITING_FOR_RESOURCES"),
                    seen("r", "ACTIVE", zone=Z2),
                    seen("p", "ACCEPTED"),
                ],
            ),
            (
                200,
                [
                    seen("q", "WAITING_FOR_RESOURCES"),
                    seen("r", "ACTIVE", zone=Z2),
                    seen("p", "ACTIVE"),
                    seen("o", "PROVISIONING"),
                ],
            ),
        ],
    )
    got = open_samples(tracker.tracks, 1000.0)
    # q: queued since 0; o: seen first PROVISIONING (no queue time known); p served at 200
    assert got[(Z1, "v6e-8", "spot", "tpu")] == Open(waiting=(1000.0,), held=800.0)
    assert got[(Z2, "v6e-8", "spot", "tpu")] == Open(waiting=(), held=1000.0)
    since = open_samples(tracker.tracks, 1000.0, since=50)
    assert since[(Z1, "v6e-8", "spot", "tpu")].waiting == ()
    assert open_samples(Tracker().tracks, 1000.0) == {}


def test_store_round_trip_and_summary(tmp_path: Path) -> None:
    records = walk(
        Tracker(),
        [
            (0, [seen("a", "ACCEPTED"), seen("b", "ACCEPTED", zone=Z2)]),
            (60, [seen("a", "ACTIVE"), seen("b", "ACCEPTED", zone=Z2)]),
            (600, [seen("a", "SUSPENDED"), seen("b", "FAILED", zone=Z2, code=8, message="x")]),
        ],
    )
    db, aside = open_store(tmp_path / "h.sqlite")
    assert aside is None
    db.write(records)
    assert db.count("transitions") == 5
    stats = {s.zone: s for s in summarize(db.samples())}
    assert stats[Z1].samples == 1 and stats[Z1].p50_active == 60
    assert stats[Z1].median_lifetime == 540 and stats[Z1].preemptions == 1
    assert stats[Z2].samples == 0 and stats[Z2].unserved == 1 and stats[Z2].failures == {"8": 1}
    assert db.samples(zone="nowhere-x1-a") == {}
    assert [r.after for r in db.transitions(zone=Z2)] == ["ACCEPTED", "FAILED"]
    assert db.prune(30) == 4  # the two transitions at t=0 and the two waits queued then
    db.close()


def test_a_failed_batch_rolls_back_whole(tmp_path: Path) -> None:
    db = HistoryDB(tmp_path / "h.sqlite")
    db.conn.execute("DROP TABLE lifetimes")  # the lifetime insert of this batch fails
    records = walk(Tracker(), [(0, [seen("a", "ACTIVE")]), (5, [seen("a", "SUSPENDED")])])
    try:
        db.write(records)
    except sqlite3.OperationalError:
        pass
    else:
        raise AssertionError("the broken batch should have failed")
    assert db.count("transitions") == 0
    db.close()


def test_corrupt_file_is_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    db, aside = open_store(path)
    assert aside is not None and aside.read_bytes().startswith(b"this is not")
    assert db.integrity() == "ok"
    db.close()


@pytest.mark.parametrize("seed", range(6))
def test_sqlite_figures_equal_the_pure_ones(tmp_path: Path, seed: int) -> None:
    """``HistoryDB.stats`` computes in SQL what ``core.capacity`` defines: same numbers on
    random histories (ties, censored waits, preemptions, failures, refusals)."""
    rng = random.Random(seed)
    records: list[Record] = []
    zones = (Z1, Z2, "us-east1-d")
    for i in range(rng.randint(1, 120)):
        zone, mode = rng.choice(zones), rng.choice(("spot", "on-demand"))
        api = rng.choice(("tpu", "tpu", "compute"))  # the same zones on two APIs: two places
        wait = float(rng.choice((5, 10, 10, 60, 600, rng.randint(1, 5000))))
        served = rng.random() < 0.6
        records.append(Wait(f"s{i}", zone, "v6e-8", mode, float(i), wait / 2 if served else None,
                            wait if served else None, wait, api))  # fmt: skip
        if served and rng.random() < 0.7:
            end = rng.choice(("preempted", "deleted"))
            records.append(Lifetime(f"s{i}", zone, "v6e-8", mode, 100.0 + i,
                                    100.0 + i + rng.randint(1, 90000), end, api))  # fmt: skip
        if rng.random() < 0.2:
            records.append(Transition(f"s{i}", zone, "v6e-8", mode, "ACCEPTED", "FAILED",
                                      float(i), rng.choice((8, 9)), "no capacity",
                                      api=api))  # fmt: skip
        if rng.random() < 0.1:
            records.append(Refusal(f"s{i}", zone, "v6e-8", mode, float(i), 7, "closed", True, api))
    open_ = {  # still queued / still held now, also in a zone with no stored row
        (z, "v6e-8", m, a): Open(waiting=tuple(sorted(float(rng.choice((10, 600, 90000)))
                                                      for _ in range(rng.randint(0, 4)))),
                                 held=float(rng.choice((0, 3600, 86400))))
        for z in (*zones, "asia-east1-c") for m in ("spot", "on-demand")
        for a in ("tpu", "compute") if rng.random() < 0.4
    }  # fmt: skip
    db = HistoryDB(tmp_path / "h.sqlite")
    db.write(records)
    for filters, extra in [(f, o) for f in ({}, {"zone": Z1}, {"mode": "spot"}, {"since": 30.0},
                           {"zone": "nowhere-x1-a"}, {"api": "compute"}, {"api": "tpu"})
                           for o in ({}, open_)]:  # fmt: skip
        pure = summarize(db.samples(open_=extra, **filters))
        fast = db.stats(open_=extra, **filters)
        assert pure or filters or not records
        assert [s.place for s in fast] == [s.place for s in pure]
        for a, b in zip(fast, pure, strict=True):
            for name in ("p50_provisioning", "p90_provisioning", "p50_active", "p90_active",
                         "expected_wait", "median_lifetime", "preemptions_per_day"):  # fmt: skip
                x, y = getattr(a, name), getattr(b, name)
                assert (x is None) == (y is None) and (x is None or x == pytest.approx(y)), name
            assert (a.samples, a.unserved, a.preemptions, a.failures, a.queue_closed) == (
                b.samples, b.unserved, b.preemptions, b.failures, b.queue_closed)  # fmt: skip
            assert a.waiting == b.waiting
            assert a.last_seen == pytest.approx(b.last_seen)
    db.close()


def test_race_outcomes_and_loser_delete_times_are_stored(tmp_path: Path) -> None:
    db = HistoryDB(tmp_path / "h.sqlite")
    db.write([RaceWon("g", "a", Z1, 40.0, (("b", Z2, 40.0), ("c", Z2, 12.5)))])
    db.write([LoserDeleted("g", "b", Z2, 3.0)])
    got = db.conn.execute(
        "SELECT (SELECT name FROM names WHERE id = loser), waited, delete_ms FROM races"
        " ORDER BY waited"
    ).fetchall()
    assert got == [("c", 12500, None), ("b", 40000, 3000)]
    db.close()


def _recorder_state(tmp_path: Path) -> tuple[StateDir, EventLog]:
    state = StateDir(tmp_path / "state").ensure()
    return state, EventLog(state)


def test_workload_attempts_are_recorded_for_issue_12(tmp_path: Path) -> None:
    state, events = _recorder_state(tmp_path)
    recorder = HistoryRecorder(state, events, batch_seconds=0.05)
    recorder.start()
    recorder.record_workload_attempt(
        slot="a", zone=Z1, accelerator="v6e-8", run_id="r-1", attempt=2, started_at=T0,
        ended_at=T0 + 60, exit_code=1, cause="failed",
    )  # fmt: skip
    assert recorder.flush()
    recorder.close()
    with sqlite3.connect(state.history) as conn:
        rows = conn.execute(
            "SELECT attempt, started_at, ended_at, exit_code,"
            " (SELECT name FROM names WHERE id = cause) FROM workload_attempts"
        ).fetchall()
    assert rows == [(2, T0 * 1000, (T0 + 60) * 1000, 1, "failed")]


def test_a_full_queue_drops_only_superseded_looks_never_records(tmp_path: Path) -> None:
    """The writer is not running (as when it cannot keep up): the queue fills with looks,
    and workload attempts handed over before, between and after them are all written."""
    state, events = _recorder_state(tmp_path)
    recorder = HistoryRecorder(state, events, batch_seconds=0.05, max_queue=3)
    want = desired(slot("a", zone=Z1, accelerator="v6e-8"))

    def attempt(n: int) -> None:
        recorder.record_workload_attempt(slot="a", zone=Z1, accelerator="v6e-8", run_id="r-1",
                                         attempt=n, started_at=T0 + n, ended_at=T0 + n + 1,
                                         exit_code=0, cause="succeeded")  # fmt: skip

    attempt(1)  # the oldest item of all: the old queue dropped exactly this one
    for i in range(6):
        look = Observation(requests=(qr("a", zone=Z1, accelerator="v6e-8"),), zones=frozenset({Z1}))
        recorder.observe(want, look, Memory(), T0 + 10 + i)
        if i == 2:
            attempt(2)
    attempt(3)
    assert recorder.dropped == 3  # six looks into room for three
    recorder.start()
    assert recorder.flush()
    recorder.close()
    with sqlite3.connect(state.history) as conn:
        rows = conn.execute("SELECT attempt FROM workload_attempts ORDER BY attempt").fetchall()
        assert conn.execute("SELECT count(*) FROM transitions").fetchone() == (1,)
    assert rows == [(1,), (2,), (3,)]
    assert recorder.health()["dropped"] == 3


def test_a_store_that_cannot_be_written_is_reported_and_recovers(tmp_path: Path) -> None:
    state, events = _recorder_state(tmp_path)
    state.history.mkdir()  # not a file: SQLite cannot open it (not corrupt: nothing moved)
    recorder = HistoryRecorder(state, events, batch_seconds=0.05)
    recorder.start()
    want = desired(slot("a", zone=Z1, accelerator="v6e-8"))
    look = Observation(requests=(qr("a", zone=Z1, accelerator="v6e-8"),))
    recorder.observe(want, look, Memory(), 1e10)  # never blocks, never raises
    assert recorder.flush()
    assert recorder.health()["ok"] is False and "directory" in str(recorder.last_error)
    assert state.history.is_dir() and not list(state.root.glob("history.sqlite.corrupt-*"))
    state.history.rmdir()
    recorder.observe(want, look, Memory(), 1e10 + 1)
    assert recorder.flush()
    recorder.close()
    kinds = [e["kind"] for e in read_events(state.events)]
    assert kinds.count("history.failed") == 1 and "history.recovered" in kinds
    with sqlite3.connect(state.history) as conn:  # what waited in memory got written
        assert conn.execute("SELECT count(*) FROM transitions").fetchone() == (1,)


def test_the_recorder_keeps_the_expected_waits_the_snapshot_shows(tmp_path: Path) -> None:
    state, events = _recorder_state(tmp_path)
    db = HistoryDB(state.history)
    db.write([Wait(f"s{i}", Z1, "v6e-8", "spot", T0 + i, 60.0 * i, 90.0 * i, 90.0 * i)
              for i in range(1, 4)])  # fmt: skip
    db.close()
    recorder = HistoryRecorder(state, events, batch_seconds=0.05)
    recorder.start()
    want = desired(slot("a", zone=Z1, accelerator="v6e-8"))
    recorder.observe(want, Observation(requests=(qr("a", zone=Z1, accelerator="v6e-8"),)),
                     Memory(), T0 + 10)  # fmt: skip
    assert recorder.flush()
    recorder.close()
    hint = recorder.hints[(Z1, "v6e-8", "spot", "tpu")]
    assert (hint.p50_seconds, hint.samples) == (180.0, 3)


def test_the_store_counts_what_is_still_queued_and_still_held(tmp_path: Path) -> None:
    """``history`` / ``recommend`` read the recorder's saved tracker: a zone whose requests
    have queued for days no longer ranks by its few served ones, and a node still alive
    counts as capacity held."""
    from reconciler.runtime.history_reads import recommend_document, summary_stats

    state, events = _recorder_state(tmp_path)
    db = HistoryDB(state.history)
    db.write(
        [Wait("s1", Z1, "v6e-8", "spot", T0, 500.0, 600.0, 600.0),
         Wait("s2", Z1, "v6e-8", "spot", T0, 500.0, 600.0, 600.0),
         Wait("t1", Z2, "v6e-8", "spot", T0, 5000.0, 5400.0, 5400.0),
         Lifetime("s1", Z1, "v6e-8", "spot", T0, T0 + 43200, "preempted")]
    )  # fmt: skip
    db.close()
    recorder = HistoryRecorder(state, events, batch_seconds=0.05)
    recorder.start()
    names = [f"q{i}" for i in range(5)]
    want = desired(*(slot(n, zone=Z1, accelerator="v6e-8") for n in [*names, "live"]))
    look = Observation(
        requests=(
            *(qr(n, zone=Z1, accelerator="v6e-8") for n in names),
            qr("live", zone=Z1, state=QRState.ACTIVE, accelerator="v6e-8"),
        ),
        zones=frozenset({Z1}),
    )
    recorder.observe(want, look, Memory(), T0)
    assert recorder.flush()
    recorder.close()
    later = T0 + 3 * 86400
    (z1,) = summary_stats(state.history, now=later, zone=Z1)
    assert (z1.samples, z1.unserved, z1.waiting, z1.expected_wait) == (2, 0, 5, None)
    assert z1.preemptions_per_day == pytest.approx(1 / 3.5)  # half a day ended + 3 days alive
    assert summary_stats(state.history, now=later, zone=Z1, since=T0 + 1)[0].waiting == 0
    doc = recommend_document(state.history, "v6e-8", mode="spot")
    assert [z["zone"] for z in doc["zones"]] == [Z2, Z1]
    assert doc["zones"][1]["waiting"] == 5
    from tests.support.cli import clean_env, run_cli

    shown = run_cli("--state-dir", str(state.root), "history", "--json", "--zone", Z1,
                    env=clean_env(), cwd=tmp_path)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    (place,) = json.loads(shown.stdout)["places"]
    assert (place["waiting"], place["expected_wait_seconds"]) == (5, None)


def test_the_writer_applies_settings_history_retention(tmp_path: Path) -> None:
    state, events = _recorder_state(tmp_path)
    db = HistoryDB(state.history)
    now = time.time()
    db.write([Wait("old", Z1, "v6e-8", "spot", now - 3 * 86400, 1.0, 2.0, 2.0),
              Wait("new", Z1, "v6e-8", "spot", now - 3600, 1.0, 2.0, 2.0)])  # fmt: skip
    db.close()
    recorder = HistoryRecorder(state, events, batch_seconds=0.05)
    recorder.start()
    want = desired(slot("a", zone=Z1, accelerator="v6e-8"), history_retention=2 * 86400)
    recorder.observe(want, Observation(zones=frozenset({Z1})), Memory(), now)
    assert recorder.flush()
    recorder.close()
    with sqlite3.connect(state.history) as conn:
        kept = conn.execute("SELECT (SELECT name FROM names WHERE id = slot) FROM waits").fetchall()
    assert kept == [("new",)]


def test_catalogue_knows_families_and_only_warns() -> None:
    from reconciler.model.tpu_zones import catalogue_warnings, known_to_offer, zones_for

    assert known_to_offer("us-central2-b", "v4-32") is True
    assert known_to_offer("us-central2-b", "v5p-8") is False
    assert known_to_offer("us-east5-a", "v5e-8") is True  # the v5e spelling of v5litepod
    assert known_to_offer("us-central1-a", "v9x-8") is None  # a family it does not know
    assert "europe-west4-a" in (zones_for("v6e-64") or ())
    assert (
        catalogue_warnings([("a", "us-central2-b", "v4-8"), ("b", "us-central2-b", "v9x-8")]) == []
    )
    (warning,) = catalogue_warnings([("c", "asia-east1-c", "v6e-8")])
    assert "not known to offer v6e" in warning and "may still serve" in warning


def test_secret_shaped_text_in_cloud_messages_is_not_stored(tmp_path: Path) -> None:
    from reconciler.model.capacity import ErrorInfo

    state, events = _recorder_state(tmp_path)
    recorder = HistoryRecorder(state, events, batch_seconds=0.05)
    recorder.start()
    want = desired(slot("a", zone=Z1, accelerator="v6e-8"))
    failed = qr("a", zone=Z1, accelerator="v6e-8", state=QRState.FAILED,
                error=ErrorInfo(8, "quota: token=ya29.abcdefghijklmnop exhausted"))  # fmt: skip
    recorder.observe(want, Observation(requests=(failed,)), Memory(), time.time())
    assert recorder.flush()
    recorder.close()
    with sqlite3.connect(state.history) as conn:
        names = [n for (n,) in conn.execute("SELECT name FROM names")]
    assert not [n for n in names if "ya29" in n] and any("[REDACTED]" in n for n in names)


def test_a_store_corrupted_while_recording_is_moved_aside_and_rebuilt(tmp_path: Path) -> None:
    """Corruption found mid-run (here: pages overwritten on disk after another connection's
    checkpoint made the writer re-read them): the file is set aside, a new one is filled from
    the event log, and recording goes on."""
    state, events = _recorder_state(tmp_path)
    events.emit("qr.state", slot="old", zone=Z1, before=None, after="ACCEPTED")
    recorder = HistoryRecorder(state, events, batch_seconds=0.05)
    recorder.start()
    want = desired(slot("a", zone=Z1, accelerator="v6e-8"))
    look = Observation(requests=(qr("a", zone=Z1, accelerator="v6e-8"),))
    recorder.observe(want, look, Memory(), time.time())
    assert recorder.flush()
    with sqlite3.connect(state.history) as other:
        other.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = state.history.stat().st_size
    with state.history.open("r+b") as f:
        f.seek(4096)
        f.write(b"\xff" * (size - 4096))
    moved = qr("a", zone=Z1, accelerator="v6e-8", state=QRState.ACTIVE)
    recorder.observe(want, Observation(requests=(moved,)), Memory(), time.time())
    assert recorder.flush()
    recorder.observe(want, Observation(requests=(moved,)), Memory(), time.time())
    assert recorder.flush()
    recorder.close()
    aside = state.root.glob("history.sqlite.corrupt-*")  # the file, with its -wal / -shm
    assert len({p.name.removesuffix("-wal").removesuffix("-shm") for p in aside}) == 1
    kinds = [e["kind"] for e in read_events(state.events)]
    assert "history.rebuilt" in kinds and recorder.health()["ok"] is True
    with sqlite3.connect(state.history) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        slots = {n for (n,) in conn.execute(
            "SELECT name FROM names WHERE id IN (SELECT slot FROM transitions)")}  # fmt: skip
    assert "old" in slots  # refilled from the event log


def test_race_zones_edit_adds_one_candidate_per_zone_and_the_group(tmp_path: Path) -> None:
    """``recommend --apply``'s edit, through the real intent engine."""
    from reconciler.errors import EditRejected
    from reconciler.intent.edits_race import RaceZones
    from reconciler.intent.engine import IntentEditor
    from reconciler.model.load import parse_desired
    from tests.unit.test_intent import SAMPLE, comments

    file = tmp_path / "desired.yaml"
    file.write_text(SAMPLE)
    editor = IntentEditor(file, StateDir(tmp_path / "state"), env={})
    zones = ["europe-west4-a", "us-east5-b"]
    edit = RaceZones(group="v6e-next", accelerator="v6e-8", zones=tuple(zones), mode="spot")
    result = editor.apply(edit, source="cli")
    assert result.status == "changed"
    after = parse_desired(file.read_text())
    (new,) = [g for g in after.race_groups if g.name == "v6e-next"]
    assert [after.slot(s).zone for s in new.slots] == zones  # type: ignore[union-attr]
    assert new.count == 1 and all(after.slot(s).want is None for s in new.slots)  # type: ignore[union-attr]
    assert set(comments(SAMPLE)) <= set(comments(file.read_text()))
    other = dataclasses.replace(edit, group="other")
    refused = [
        dataclasses.replace(other, group="v6e-next"),
        dataclasses.replace(other, group="big"),
        dataclasses.replace(other, zones=()),
        dataclasses.replace(other, count=3),
    ]
    for bad in refused:
        with pytest.raises(EditRejected):
            editor.apply(bad, source="cli")


STATES = ["CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING", "ACTIVE",
          "SUSPENDING", "SUSPENDED", "FAILED", "DELETING", None]  # fmt: skip


@given(st.lists(st.tuples(st.sampled_from(STATES), st.floats(0, 1e4)), max_size=40))
def test_tracker_records_are_consistent_for_any_sequence_of_looks(
    looks: list[tuple[str | None, float]],
) -> None:
    """Whatever the cloud shows, in whatever order: one transition per change of state, waits
    and lifetimes never negative, and a request is counted as served at most once per
    incarnation."""
    tracker, now, last, changes, records = Tracker(), 0.0, None, 0, []
    for state, gap in looks:
        now += gap
        seen_now = [] if state is None else [seen("a", state)]
        records += tracker.step(seen_now, now, gone_zones=[Z1], complete=True)
        changes += state != last
        last = state
    assert sum(isinstance(r, Transition) for r in records) == changes
    for r in records:
        if isinstance(r, Wait):
            assert r.waited >= 0
            if r.to_active is not None:
                assert r.to_provisioning is not None and 0 <= r.to_provisioning <= r.to_active
        if isinstance(r, Lifetime):
            assert r.seconds >= 0
    served = sum(isinstance(r, Wait) and r.to_active is not None for r in records)
    incarnations = sum(isinstance(r, Transition) and r.after in ("CREATING", "ACCEPTED",
                       "WAITING_FOR_RESOURCES") and r.before in (None, "DELETING", "SUSPENDING",
                       "SUSPENDED", "FAILED") for r in records)  # fmt: skip
    assert served <= incarnations


def test_a_tracker_saved_before_neutral_states_reads_them_from_its_words() -> None:
    from reconciler.runtime.history import _tracker_from_json, _tracker_to_json

    tracker = Tracker()
    tracker.step([seen("a", "WAITING_FOR_RESOURCES"), seen("b", "ACTIVE")], 10.0)
    saved = json.loads(_tracker_to_json(tracker))
    assert {t[2]["request"] for t in saved["tracks"]} == {"waiting", "active"}
    for _, _, fields in saved["tracks"]:
        del fields["request"]  # as a recorder of the previous version wrote it
    loaded = _tracker_from_json(json.dumps(saved))
    assert {k[1]: t.phase.value for k, t in loaded.tracks.items()} == {
        "a": "waiting",
        "b": "active",
    }
    assert loaded.step([seen("a", "ACTIVE")], 70.0)[-1] == Wait(
        "a", Z1, "v6e-8", "spot", 10.0, 60.0, 60.0, 60.0
    )
