"""The capacity history keeps the API as part of the place.

- rows say their API (schema 3's ``api`` column); a store written before it reads as it is,
  every row the Cloud TPU API's, and is migrated when opened for writing;
- a Compute Engine request's words are read with Compute Engine's mapping (a row of an API
  not served reads ``unknown``), a TPU API one's with the TPU API's;
- the same zone and accelerator on two APIs are two places: ``recommend`` ranks places,
  filters by API and writes ``api:`` for a pick off its family's default API;
- the recorder records each request's API and the tracker it saves keeps it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from reconciler.adapters.history_db import HistoryDB, open_readonly
from reconciler.adapters.history_sql import SCHEMA
from reconciler.core.capacity import race_group_yaml, rank, summarize
from reconciler.core.capacity_chart import charts, narrowed
from reconciler.core.history import Lifetime, Seen, Tracker, Transition, Wait, from_event
from reconciler.core.timeline_past import HELD, QUEUED_SPAN, spans
from reconciler.model.capacity import RequestState
from reconciler.runtime.backends import word_state

Z1 = "us-east5-b"
T0 = 1_767_225_600.0


def waits(api: str, seconds: float, n: int = 3) -> list[Wait]:
    return [
        Wait(f"{api}-{i}", Z1, "v6e-8", "spot", T0 + i, seconds / 2, seconds, seconds, api)
        for i in range(n)
    ]


def _version_2_store(path: Path) -> None:
    """A store as the version before this one wrote it: no ``api`` columns, TPU rows only."""
    with sqlite3.connect(path) as conn:
        conn.executescript(SCHEMA)
        conn.execute("INSERT INTO meta VALUES ('schema_version', '2')")
        names = [(1, "a"), (2, Z1), (3, "v6e-8"), (4, "spot"), (5, "ACCEPTED"), (6, "ACTIVE")]
        conn.executemany("INSERT INTO names(id, name) VALUES (?, ?)", names)
        conn.execute("INSERT INTO waits VALUES (2, 3, 4, 1, 60000, ?, 1, 30000)", (T0 * 1000,))
        conn.execute(
            "INSERT INTO transitions VALUES (?, 1, 2, 3, 4, 5, 6, NULL, NULL)", (T0 * 1000,)
        )
    conn.close()


def test_an_older_store_reads_as_the_tpu_apis_and_migrates(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite"
    _version_2_store(path)
    ro = open_readonly(path)
    assert ro is not None
    try:
        (old,) = ro.stats()
        assert (old.place, old.samples) == ((Z1, "v6e-8", "spot", "tpu"), 1)
        assert ro.stats(api="tpu") and ro.stats(api="compute") == []
        (t,) = ro.transitions()
        assert (t.after, t.api) == ("ACTIVE", "tpu")
        assert ro.timeline(api="tpu").waits[0].api == "tpu"
    finally:
        ro.close()
    db = HistoryDB(path)  # the writer migrates: the rows it had stay the TPU API's
    try:
        assert db.meta("schema_version") == "3"
        db.write(waits("compute", 600.0))
        by_api = {s.api: s for s in db.stats()}
        assert (by_api["tpu"].samples, by_api["compute"].samples) == (1, 3)
        assert [s.api for s in db.stats(api="compute")] == ["compute"]
        assert [s.api for s in db.stats(api="tpu")] == ["tpu"]
    finally:
        db.close()


def test_rows_say_their_api_and_read_back_with_it(tmp_path: Path) -> None:
    db = HistoryDB(tmp_path / "h.sqlite")
    records = [
        Transition("c", Z1, "v6e-8", "spot", None, "PENDING", T0, api="compute"),
        Transition("c", Z1, "v6e-8", "spot", "PENDING", "RUNNING", T0 + 60, api="compute"),
        Transition("t", Z1, "v6e-8", "spot", None, "ACCEPTED", T0),
        Lifetime("c", Z1, "v6e-8", "spot", T0 + 60, T0 + 600, "preempted", "compute"),
        *waits("compute", 60.0),
        *waits("tpu", 3600.0),
    ]
    db.write(records)
    try:
        assert [(t.slot, t.after, t.api) for t in db.transitions()] == [
            ("c", "PENDING", "compute"),
            ("c", "RUNNING", "compute"),
            ("t", "ACCEPTED", "tpu"),
        ]
        assert [t.slot for t in db.transitions(api="compute")] == ["c", "c"]
        pure = {s.place: s for s in summarize(db.samples())}
        fast = {s.place: s for s in db.stats()}
        assert (
            pure.keys()
            == fast.keys()
            == {
                (Z1, "v6e-8", "spot", "tpu"),
                (Z1, "v6e-8", "spot", "compute"),
            }
        )
        assert fast[(Z1, "v6e-8", "spot", "compute")].preemptions == 1
        timeline = db.timeline()
        assert {w.api for w in timeline.waits} == {"tpu", "compute"}
        assert {h.api for h in narrowed(timeline, api="compute").holdings} == {"compute"}
        zones = [z.zone for z in charts(timeline, until=T0 + 7200.0, since=T0).waits]
        assert zones == [Z1, f"{Z1} (compute)"], "one series per zone and API"
    finally:
        db.close()


def test_recommend_ranks_places_and_writes_the_api_off_the_default(tmp_path: Path) -> None:
    db = HistoryDB(tmp_path / "h.sqlite")
    db.write([*waits("compute", 60.0), *waits("tpu", 3600.0)])
    try:
        stats = db.stats()
    finally:
        db.close()
    picks = rank(stats, "v6e-8", "spot")
    assert [(p.zone, p.api) for p in picks] == [(Z1, "compute"), (Z1, "tpu")]
    assert [p.api for p in rank(stats, "v6e-8", "spot", api="tpu")] == ["tpu"]
    text = race_group_yaml("g", "v6e-8", "spot", picks, slot_names=["a", "b"])
    assert "  - {name: a, zone: us-east5-b, accelerator: v6e-8, mode: spot, api: compute}" in text
    assert "  - {name: b, zone: us-east5-b, accelerator: v6e-8, mode: spot}" in text


def test_a_rows_words_are_read_with_its_apis_mapping() -> None:
    assert word_state("WAITING_FOR_RESOURCES") == RequestState.WAITING
    assert word_state("ACTIVE", "tpu") == RequestState.ACTIVE
    assert word_state("RUNNING", "compute") == RequestState.ACTIVE
    assert word_state("PENDING", "compute") == RequestState.WAITING
    assert word_state("RUNNING", "nowhere") == RequestState.UNKNOWN, "an API not served"
    # a row written before rows said their API reads as the TPU API's: a word only Compute
    # Engine uses is read with its mapping then
    assert word_state("TERMINATED", "tpu") == word_state("TERMINATED", "compute")
    past = spans(
        [
            Transition("c", Z1, "v6e-8", "spot", None, "PENDING", T0, api="compute"),
            Transition("c", Z1, "v6e-8", "spot", "PENDING", "RUNNING", T0 + 60, api="compute"),
        ],
        word_state,
    )[(Z1, "c")]
    assert [s.kind for s in past.spans] == [QUEUED_SPAN, HELD]
    # an event record without ``request`` is read with the API it says
    event = {"kind": "qr.state", "slot": "c", "zone": Z1, "after": "RUNNING", "api": "compute"}
    seen = from_event(event, T0, {}, word_state)
    assert isinstance(seen, Seen) and (seen.request, seen.api) == (RequestState.ACTIVE, "compute")


def test_the_tracker_records_each_requests_api() -> None:
    tracker = Tracker()

    def look(state: str | None, at: float) -> list[object]:
        request = {"PENDING": RequestState.WAITING, "RUNNING": RequestState.ACTIVE}.get(state or "")
        seen = Seen("c", Z1, state, "v6e-8", "spot", request=request, api="compute")
        return list(tracker.step([seen], at))

    look("PENDING", T0)
    got = look("RUNNING", T0 + 90)
    wait = next(r for r in got if isinstance(r, Wait))
    assert wait.api == "compute" and tracker.tracks[(Z1, "c")].api == "compute"
    gone = tracker.step([], T0 + 200, gone_zones=[Z1], complete=True)
    assert {getattr(r, "api", None) for r in gone} == {"compute"}, "a gone request keeps its API"
