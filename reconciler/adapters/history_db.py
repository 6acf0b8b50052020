"""The capacity history store: one SQLite file, ``<state dir>/history.sqlite``.

Standard library ``sqlite3`` in WAL mode with ``synchronous=NORMAL``: a crash of the writing
process (kill -9) loses at most the transaction in progress and never corrupts the file. One
writer (the controller's recorder thread) inserts a batch of records per transaction; readers
(``history``, ``recommend``, MCP) open their own read-only connections.

Compact on purpose (≤ 200 bytes per transition on disk, measured by
``scripts/bench/history_query.py``): every repeated string (slot, zone, accelerator, mode,
state, error message) is interned once in ``names`` and rows hold small integers; times are
integer milliseconds since the epoch, durations integer milliseconds; the tables are plain
rowid tables without secondary indexes (a scan of a million rows is faster than maintaining
an index on every insert, and ``since`` filters are rare and coarse).

A file that SQLite calls corrupt (``DatabaseError``) is moved aside as
``history.sqlite.corrupt-<time>`` and started afresh; the recorder then refills it from the
event log.

May: read and write the history file. May not: decide what a record means (``core.history``)
or compute statistics (``core.capacity``).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from reconciler.core.capacity import (
    Open,
    Place,
    PlaceStats,
    Samples,
    km_quantile_sorted,
    per_day,
    percentile,
    summarize,
    with_open,
)
from reconciler.core.history import (
    Lifetime,
    LoserDeleted,
    RaceWon,
    Record,
    Refusal,
    Transition,
    Wait,
    WorkloadAttempt,
)
from reconciler.errors import HistoryUnreadable

SCHEMA_VERSION: Final = 1

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS names(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS transitions(
  at INTEGER NOT NULL, slot INTEGER, zone INTEGER, acc INTEGER, mode INTEGER,
  before INTEGER, after INTEGER, code INTEGER, msg INTEGER);
CREATE INDEX IF NOT EXISTS transition_codes ON transitions(zone, acc, mode, code)
  WHERE code IS NOT NULL;
CREATE TABLE IF NOT EXISTS waits(
  zone INTEGER NOT NULL, acc INTEGER NOT NULL, mode INTEGER NOT NULL, served INTEGER NOT NULL,
  t INTEGER NOT NULL, at INTEGER NOT NULL, slot INTEGER NOT NULL, to_prov INTEGER,
  PRIMARY KEY(zone, acc, mode, served, t, at, slot)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS wait_prov ON waits(zone, acc, mode, to_prov)
  WHERE to_prov IS NOT NULL;
CREATE TABLE IF NOT EXISTS lifetimes(
  zone INTEGER NOT NULL, acc INTEGER NOT NULL, mode INTEGER NOT NULL,
  preempted INTEGER NOT NULL, lived INTEGER NOT NULL, at INTEGER NOT NULL, slot INTEGER NOT NULL,
  PRIMARY KEY(zone, acc, mode, preempted, lived, at, slot)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS races(
  at INTEGER NOT NULL, grp INTEGER, winner INTEGER, zone INTEGER,
  loser INTEGER, loser_zone INTEGER, waited INTEGER, delete_ms INTEGER);
CREATE TABLE IF NOT EXISTS refusals(
  at INTEGER NOT NULL, slot INTEGER, zone INTEGER, acc INTEGER, mode INTEGER,
  code INTEGER, msg INTEGER, closed INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS workload_attempts(
  started_at INTEGER NOT NULL, slot INTEGER, zone INTEGER, acc INTEGER, run_id INTEGER,
  attempt INTEGER NOT NULL, ended_at INTEGER, exit_code INTEGER, cause INTEGER);
"""

_TABLES: Final = {
    "transitions": "at",
    "waits": "at",
    "lifetimes": "at",
    "races": "at",
    "refusals": "at",
    "workload_attempts": "started_at",
}


@contextlib.contextmanager
def _reading(path: Path) -> Iterator[None]:
    """SQLite's failures while reading, as ``HistoryUnreadable`` (readers never see sqlite3)."""
    try:
        yield
    except sqlite3.Error as e:
        raise HistoryUnreadable(f"capacity history {path}: {e}") from None


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)


def _s(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


_HEADER: Final = b"SQLite format 3\x00"


def _readonly_uri(path: Path) -> str:
    """A read-only ``file:`` URI for ``path``: ``#``, ``?`` and ``%`` in a directory name (a
    desired file named ``team#2.yaml`` gives one) would otherwise end the path early and open,
    or create, some other file."""
    return f"file:{quote(str(path.absolute()), safe='/')}?mode=ro"


class HistoryDB:
    """One connection to the history file. Not thread-safe: one thread per instance."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        if readonly:
            self.conn = sqlite3.connect(_readonly_uri(path), uri=True, isolation_level=None)
        else:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            os.close(fd)
            self.conn = sqlite3.connect(path, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.executescript(_SCHEMA)
            self.set_meta_default("schema_version", str(SCHEMA_VERSION))
            st = os.stat(path)
            self._identity: tuple[int, int] | None = (st.st_dev, st.st_ino)
            self._size = st.st_size
        self.conn.execute("PRAGMA busy_timeout=2000")
        if readonly:
            self._identity = None
            self._size = 0
        self._ids: dict[str, int] = {}
        self._names: dict[int, str] | None = None

    def close(self) -> None:
        self.conn.close()

    def damage(self) -> str | None:
        """Why the file at ``path`` is no longer the store this (writable) connection keeps —
        deleted, replaced, its header overwritten, cut short — or None. SQLite would go on
        writing to the open inode and notice nothing; this looks at the file itself (a stat and
        16 bytes), so the writer can check before every batch."""
        if self._identity is None:
            return None
        try:
            st = os.stat(self.path)
            with open(self.path, "rb") as f:
                head = f.read(16)
        except FileNotFoundError:
            return "the file was deleted"
        except OSError as e:
            return f"the file cannot be read: {e.strerror or e}"
        if (st.st_dev, st.st_ino) != self._identity:
            return "the file was replaced by another"
        if head != _HEADER:
            return "its header is no longer SQLite's"
        if st.st_size < self._size:
            return f"it was cut short ({st.st_size} bytes, was {self._size})"
        self._size = st.st_size
        return None

    # -- meta ----------------------------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def read_meta(self, key: str) -> str | None:
        """``meta`` for readers: SQLite's failures raise ``HistoryUnreadable``."""
        with _reading(self.path):
            return self.meta(key)

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def set_meta_default(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def integrity(self) -> str:
        return str(self.conn.execute("PRAGMA integrity_check").fetchone()[0])

    # -- writing -------------------------------------------------------------------------------
    def _id(self, name: str | None) -> int | None:
        if name is None:
            return None
        found = self._ids.get(name)
        if found is not None:
            return found
        cur = self.conn.execute("INSERT OR IGNORE INTO names(name) VALUES (?)", (name,))
        if cur.rowcount == 1 and cur.lastrowid is not None:
            ident = int(cur.lastrowid)
        else:
            ident = int(
                self.conn.execute("SELECT id FROM names WHERE name=?", (name,)).fetchone()[0]
            )
        self._ids[name] = ident
        return ident

    def _place(self, zone: str, acc: str, mode: str) -> tuple[int | None, ...]:
        return (self._id(zone), self._id(acc), self._id(mode))

    def write(self, records: Iterable[Record], *, meta: dict[str, str] | None = None) -> int:
        """Insert ``records`` (and ``meta`` values) in one transaction; returns the count."""
        rows: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
        deletes: list[tuple[Any, ...]] = []
        n = 0
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for r in records:
                n += 1
                if isinstance(r, Transition):
                    rows["transitions"].append(
                        (
                            _ms(r.at),
                            self._id(r.slot),
                            *self._place(r.zone, r.accelerator, r.mode),
                            self._id(r.before),
                            self._id(r.after),
                            r.code,
                            self._id(r.message) if r.message else None,
                        )
                    )
                elif isinstance(r, Wait):
                    served = r.to_active is not None
                    rows["waits"].append(
                        (
                            *self._place(r.zone, r.accelerator, r.mode),
                            int(served),
                            _ms(r.to_active if served else r.waited),
                            _ms(r.queued_at),
                            self._id(r.slot),
                            _ms(r.to_provisioning),
                        )
                    )
                elif isinstance(r, Lifetime):
                    rows["lifetimes"].append(
                        (
                            *self._place(r.zone, r.accelerator, r.mode),
                            int(r.end == "preempted"),
                            _ms(r.seconds),
                            _ms(r.ended_at),
                            self._id(r.slot),
                        )
                    )
                elif isinstance(r, RaceWon):
                    for loser, zone, waited in r.losers or (("", "", 0.0),):
                        rows["races"].append(
                            (
                                _ms(r.at),
                                self._id(r.group),
                                self._id(r.winner),
                                self._id(r.zone),
                                self._id(loser or None),
                                self._id(zone or None),
                                _ms(waited) if loser else None,
                                None,
                            )
                        )
                elif isinstance(r, LoserDeleted):
                    deletes.append(
                        (_ms(r.seconds), self._id(r.group), self._id(r.slot), self._id(r.zone))
                    )
                elif isinstance(r, Refusal):
                    rows["refusals"].append(
                        (
                            _ms(r.at),
                            self._id(r.slot),
                            *self._place(r.zone, r.accelerator, r.mode),
                            r.code,
                            self._id(r.message),
                            int(r.closed),
                        )
                    )
                elif isinstance(r, WorkloadAttempt):
                    rows["workload_attempts"].append(
                        (
                            _ms(r.started_at),
                            self._id(r.slot),
                            self._id(r.zone),
                            self._id(r.accelerator),
                            self._id(r.run_id),
                            r.attempt,
                            _ms(r.ended_at),
                            r.exit_code,
                            self._id(r.cause or None),
                        )
                    )
            for table, values in rows.items():
                marks = ", ".join("?" * len(values[0]))
                verb = "INSERT OR IGNORE" if table in ("waits", "lifetimes") else "INSERT"
                self.conn.executemany(f"{verb} INTO {table} VALUES ({marks})", values)
            for delete in deletes:
                self.conn.execute(
                    "UPDATE races SET delete_ms=? WHERE rowid=(SELECT max(rowid) FROM races"
                    " WHERE grp=? AND loser=? AND loser_zone=? AND delete_ms IS NULL)",
                    delete,
                )
            for key, value in (meta or {}).items():
                self.set_meta(key, value)
            self.conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")
            self._ids.clear()  # names inserted in the rolled-back transaction are gone
            raise
        return n

    def prune(self, before: float) -> int:
        """Delete records older than ``before`` (epoch seconds); returns how many."""
        cutoff = _ms(before)
        removed = 0
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for table, column in _TABLES.items():
                cur = self.conn.execute(f"DELETE FROM {table} WHERE {column} < ?", (cutoff,))
                removed += max(cur.rowcount, 0)
            self.conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")
            raise
        return removed

    # -- reading -------------------------------------------------------------------------------
    def names(self, ids: Iterable[int] | None = None) -> dict[int, str]:
        """Interned strings by id: all of them, or only ``ids``."""
        if ids is None:
            return {int(i): str(n) for i, n in self.conn.execute("SELECT id, name FROM names")}
        wanted = sorted(set(ids))
        marks = ", ".join("?" * len(wanted))
        sql = f"SELECT id, name FROM names WHERE id IN ({marks})"
        return {int(i): str(n) for i, n in self.conn.execute(sql, wanted)} if wanted else {}

    def _lookup(self, name: str) -> int | None:
        row = self.conn.execute("SELECT id FROM names WHERE name = ?", (name,)).fetchone()
        return None if row is None else int(row[0])

    def _filters(
        self,
        since: float | None,
        zone: str | None,
        accelerator: str | None,
        mode: str | None,
        *,
        at: str = "at",
    ) -> tuple[str, list[Any]] | None:
        """A WHERE clause for the filters; None when a named value was never recorded."""
        clauses: list[str] = []
        args: list[Any] = []
        if since is not None:
            clauses.append(f"{at} >= ?")
            args.append(_ms(since))
        for column, value in (("zone", zone), ("acc", accelerator), ("mode", mode)):
            if value is None:
                continue
            ident = self._lookup(value)
            if ident is None:
                return None
            clauses.append(f"{column} = ?")
            args.append(ident)
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), args

    def samples(
        self, *, open_: Mapping[Place, Open] | None = None, **filters: Any
    ) -> dict[Place, Samples]:
        """See ``_samples``, plus what is still in progress (``open_``, e.g. from
        ``core.history.open_samples``); SQLite's failures raise ``HistoryUnreadable``."""
        with _reading(self.path):
            got = self._samples(**filters)
            if where_open := _matching(open_, filters):
                got = with_open(got, where_open)
            return got

    def _samples(
        self,
        *,
        since: float | None = None,
        zone: str | None = None,
        accelerator: str | None = None,
        mode: str | None = None,
    ) -> dict[Place, Samples]:
        """Everything ``core.capacity`` needs per (zone, accelerator, mode)."""
        where = self._filters(since, zone, accelerator, mode)
        if where is None:
            return {}
        clause, args = where
        names = self.names()
        prov: dict[tuple[int, int, int], list[float]] = defaultdict(list)
        active: dict[tuple[int, int, int], list[float]] = defaultdict(list)
        unserved: dict[tuple[int, int, int], list[float]] = defaultdict(list)
        lifetimes: dict[tuple[int, int, int], list[float]] = defaultdict(list)
        held: dict[tuple[int, int, int], float] = defaultdict(float)
        failures: dict[tuple[int, int, int], dict[int | str, int]] = defaultdict(dict)
        refused: dict[tuple[int, int, int], int] = defaultdict(int)
        closed: set[tuple[int, int, int]] = set()
        last: dict[tuple[int, int, int], int] = {}
        keys: set[tuple[int, int, int]] = set()

        def seen(key: tuple[int, int, int], at: int) -> None:
            keys.add(key)
            if at > last.get(key, -1):
                last[key] = at

        for z, a, m, at, to_prov, served, t in self.conn.execute(
            f"SELECT zone, acc, mode, at, to_prov, served, t FROM waits{clause}", args
        ):
            key = (z, a, m)
            seen(key, at)
            if served:
                active[key].append(t / 1000.0)
                prov[key].append(to_prov / 1000.0)
            else:
                unserved[key].append(t / 1000.0)
        for z, a, m, at, lived, preempted in self.conn.execute(
            f"SELECT zone, acc, mode, at, lived, preempted FROM lifetimes{clause}", args
        ):
            key = (z, a, m)
            seen(key, at)
            held[key] += lived / 1000.0
            if preempted:
                lifetimes[key].append(lived / 1000.0)
        fclause = clause + (" AND " if clause else " WHERE ") + "code IS NOT NULL"
        for z, a, m, code, n, at in self.conn.execute(
            "SELECT zone, acc, mode, code, count(*), max(at) FROM transitions"
            f"{fclause} GROUP BY zone, acc, mode, code",
            args,
        ):
            key = (z, a, m)
            seen(key, at)
            failures[key][int(code)] = failures[key].get(int(code), 0) + int(n)
        for z, a, m, code, n, c, at in self.conn.execute(
            "SELECT zone, acc, mode, code, count(*), max(closed), max(at) FROM refusals"
            f"{clause} GROUP BY zone, acc, mode, code",
            args,
        ):
            key = (z, a, m)
            seen(key, at)
            label: int | str = int(code) if code is not None else "?"
            failures[key][label] = failures[key].get(label, 0) + int(n)
            refused[key] += int(n)
            if c:
                closed.add(key)
        out: dict[Place, Samples] = {}
        for key in keys:
            place = (names.get(key[0], "?"), names.get(key[1], "?"), names.get(key[2], "?"))
            out[place] = Samples(
                to_provisioning=tuple(prov[key]),
                to_active=tuple(active[key]),
                unserved=tuple(unserved[key]),
                lifetimes_preempted=tuple(lifetimes[key]),
                held_seconds=held[key],
                failures=failures[key],
                refusals=refused[key],
                closed=key in closed,
                last_seen=last[key] / 1000.0 if key in last else None,
            )
        return out

    def stats(
        self, *, open_: Mapping[Place, Open] | None = None, **filters: Any
    ) -> list[PlaceStats]:
        """See ``_stats``; ``open_`` as for ``samples``. SQLite's failures raise
        ``HistoryUnreadable``."""
        with _reading(self.path):
            return self._stats(open_=_matching(open_, filters), **filters)

    def _stats(
        self,
        *,
        since: float | None = None,
        zone: str | None = None,
        accelerator: str | None = None,
        mode: str | None = None,
        open_: Mapping[Place, Open] | None = None,
    ) -> list[PlaceStats]:
        """The figures of ``core.capacity.summarize(self.samples(...))``, read the fast way:
        waits come out of their clustered key already sorted per place (one ``group_concat``
        per place and outcome, no per-row Python objects), percentiles of the time to
        PROVISIONING and of lifetimes are picked by ``OFFSET`` from their indexes, failures
        from a partial index. Checked against ``samples()`` by the tests."""
        where = self._filters(since, zone, accelerator, mode)
        if where is None:
            return summarize(with_open({}, open_ or {}))  # known only by what is open
        clause, args = where
        and_ = " AND " if clause else " WHERE "
        per: dict[tuple[int, int, int], dict[str, Any]] = defaultdict(dict)

        def seen(key: tuple[int, int, int], at: int | None) -> dict[str, Any]:
            entry = per[key]
            if at is not None and at > entry.get("last", -1):
                entry["last"] = at
            return entry

        for z, a, m, served, values, at in self.conn.execute(
            "SELECT zone, acc, mode, served, group_concat(t), max(at) FROM waits"
            f"{clause} GROUP BY zone, acc, mode, served",
            args,
        ):
            ordered = list(map(int, values.split(",")))  # milliseconds
            ordered.sort()  # already in key order: a linear check
            seen((z, a, m), at)["served" if served else "unserved"] = ordered
        for key, entry in per.items():
            entry["prov"] = self._picks(
                "to_prov",
                "waits",
                key,
                clause,
                and_ + "to_prov IS NOT NULL",
                args,
                len(entry.get("served", ())),
                (50.0, 90.0),
            )
        for z, a, m, held, n, at in self.conn.execute(
            "SELECT zone, acc, mode, sum(lived), sum(preempted), max(at) FROM lifetimes"
            f"{clause} GROUP BY zone, acc, mode",
            args,
        ):
            entry = seen((z, a, m), at)
            entry["held"], entry["preemptions"] = held / 1000.0, int(n)
            entry["lifetime"] = self._picks(
                "lived",
                "lifetimes",
                (z, a, m),
                clause,
                and_ + "preempted = 1",
                args,
                int(n),
                (50.0,),
            )[0]
        for table, closed in (("transitions", "0"), ("refusals", "closed")):
            extra = and_ + "code IS NOT NULL" if table == "transitions" else ""
            for z, a, m, code, n, shut, at in self.conn.execute(
                f"SELECT zone, acc, mode, code, count(*), max({closed}), max(at) FROM {table}"
                f"{clause}{extra} GROUP BY zone, acc, mode, code",
                args,
            ):
                entry = seen((z, a, m), at)
                failures = entry.setdefault("failures", {})
                label: int | str = int(code) if code is not None else "?"
                failures[label] = failures.get(label, 0) + int(n)
                entry["closed"] = bool(entry.get("closed") or shut)
        names = self.names(i for key in per for i in key)
        by_place: dict[Place, dict[str, Any]] = {
            (names.get(k[0], "?"), names.get(k[1], "?"), names.get(k[2], "?")): e
            for k, e in per.items()
        }
        for place, o in (open_ or {}).items():
            entry = by_place.setdefault(place, {})
            entry["waiting"] = [*entry.get("waiting", ()), *(round(w * 1000) for w in o.waiting)]
            entry["held_open"] = entry.get("held_open", 0.0) + o.held
        out = []
        for place, e in by_place.items():
            served, unserved = e.get("served", []), e.get("unserved", [])
            waiting = sorted(e.get("waiting", ()))
            censored = sorted(unserved + waiting) if waiting else unserved
            held, n = e.get("held", 0.0) + e.get("held_open", 0.0), e.get("preemptions", 0)
            failures = e.get("failures", {})
            prov = e.get("prov", (None, None))
            out.append(
                PlaceStats(
                    zone=place[0],
                    accelerator=place[1],
                    mode=place[2],
                    samples=len(served),
                    unserved=len(unserved),
                    p50_provisioning=prov[0],
                    p90_provisioning=prov[1],
                    p50_active=_s(percentile(served, 50)),
                    p90_active=_s(percentile(served, 90)),
                    expected_wait=_s(km_quantile_sorted(served, censored)),
                    median_lifetime=e.get("lifetime"),
                    preemptions=n,
                    preemptions_per_day=per_day(n, held),
                    failures={
                        str(k): v for k, v in sorted(failures.items(), key=lambda kv: str(kv[0]))
                    },
                    queue_closed=bool(e.get("closed")),
                    last_seen=e["last"] / 1000.0 if "last" in e else None,
                    waiting=len(waiting),
                )
            )
        return sorted(out, key=lambda s: s.place)

    def _picks(
        self,
        column: str,
        table: str,
        key: tuple[int, int, int],
        clause: str,
        extra: str,
        args: list[Any],
        n: int,
        qs: tuple[float, ...],
    ) -> tuple[float | None, ...]:
        """Percentiles (as ``core.capacity.percentile``: linear between the closest ranks) of
        one place's ``column``, reading only the two rows around each rank from its index."""
        if n == 0:
            return tuple(None for _ in qs)
        place = " AND zone = ? AND acc = ? AND mode = ?"
        sql = (
            f"SELECT {column} FROM {table}{clause}{extra}{place} ORDER BY {column} LIMIT 2 OFFSET ?"
        )
        out: list[float | None] = []
        for q in qs:
            pos = (n - 1) * q / 100.0
            low = int(pos)
            got = [v / 1000.0 for (v,) in self.conn.execute(sql, [*args, *key, low])]
            if not got:
                out.append(None)
                continue
            hi = got[1] if len(got) > 1 else got[0]
            out.append(got[0] + (hi - got[0]) * (pos - low))
        return tuple(out)

    def transitions(self, **filters: Any) -> Iterator[Transition]:
        """See ``_transitions``; SQLite's failures raise ``HistoryUnreadable``."""
        with _reading(self.path):
            yield from self._transitions(**filters)

    def _transitions(
        self,
        *,
        since: float | None = None,
        zone: str | None = None,
        accelerator: str | None = None,
        mode: str | None = None,
    ) -> Iterator[Transition]:
        """Every transition matching the filters, oldest first (for ``--export csv``)."""
        where = self._filters(since, zone, accelerator, mode)
        if where is None:
            return
        clause, args = where
        names = self.names()

        def name(i: int | None) -> str | None:
            return None if i is None else names.get(i, "?")

        for at, slot, z, a, m, before, after, code, msg in self.conn.execute(
            "SELECT at, slot, zone, acc, mode, before, after, code, msg FROM transitions"
            f"{clause} ORDER BY rowid",
            args,
        ):
            yield Transition(
                slot=name(slot) or "?",
                zone=name(z) or "?",
                accelerator=name(a) or "?",
                mode=name(m) or "?",
                before=name(before),
                after=name(after),
                at=at / 1000.0,
                code=code,
                message=name(msg) or "",
            )

    def count(self, table: str) -> int:
        if table not in _TABLES:
            raise ValueError(f"unknown table {table!r}")
        return int(self.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def _matching(open_: Mapping[Place, Open] | None, filters: Mapping[str, Any]) -> dict[Place, Open]:
    """The open places that pass the zone / accelerator / mode filters (``since`` is for the
    caller, who knows when each open wait began)."""
    wanted = (filters.get("zone"), filters.get("accelerator"), filters.get("mode"))
    return {
        place: o
        for place, o in (open_ or {}).items()
        if all(w is None or w == v for w, v in zip(wanted, place, strict=True))
    }


def corrupt(error: sqlite3.Error) -> bool:
    """True when SQLite says the file is damaged or not a database (not: locked, full, ...)."""
    return getattr(error, "sqlite_errorname", "") in ("SQLITE_CORRUPT", "SQLITE_NOTADB")


def open_store(path: Path) -> tuple[HistoryDB, Path | None]:
    """The writable store at ``path``; a corrupt file is moved aside first (its new name is
    returned) and a fresh one created. Other failures (permissions, a full disk) raise."""
    try:
        db = HistoryDB(path)
    except sqlite3.DatabaseError as e:
        if not corrupt(e):
            raise
    else:
        try:
            verdict = str(db.conn.execute("PRAGMA quick_check").fetchone()[0])
        except sqlite3.DatabaseError as e:
            db.close()
            if not corrupt(e):
                raise
        else:
            if verdict == "ok":
                return db, None
            db.close()
    aside = move_aside(path)
    return HistoryDB(path), aside


def move_aside(path: Path) -> Path:
    """Rename a corrupt file (and its WAL and shared-memory files) out of the way."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.replace(f"{path}{suffix}", f"{aside}{suffix}")
    return aside


def open_readonly(path: Path) -> HistoryDB | None:
    """A read-only view for ``history`` / ``recommend`` / MCP; None when there is no store.
    A file SQLite cannot open raises ``HistoryUnreadable``."""
    if not path.exists():
        return None
    with _reading(path):
        return HistoryDB(path, readonly=True)
