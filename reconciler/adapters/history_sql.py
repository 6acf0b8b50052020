"""The capacity history's SQL: the schema, records as rows, and the queries that read them.

Functions of a ``sqlite3.Connection`` the caller holds (``adapters/history_db.HistoryDB``, which
owns the file, its transactions and its damage handling). Every repeated string is interned in
``names`` (the caller's ``intern`` gives its id); times are integer milliseconds since the
epoch, durations integer milliseconds (``_ms`` / ``_s``). ``samples`` reads everything
``core.capacity`` needs per (zone, accelerator, mode, api); ``adapters/history_stats.py``
reads the same figures the fast way (checked against ``samples`` by the tests). The reads of
rows over time (export, charts, workload attempts) are ``adapters/history_rows.py``.

A place is (zone, accelerator, mode, api): since version 3 the rows of ``transitions``,
``waits``, ``lifetimes`` and ``refusals`` say their API in an ``api`` column (an interned name;
NULL is the Cloud TPU API, which wrote every row of an older store), so a Compute Engine
request's words are read as its own and its waits are a place of their own.

May: run SQL on the connection it is given. May not: open, move or commit the file, or decide
what a record means (``core.history``).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from reconciler.core.capacity import (
    Place,
    Samples,
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
from reconciler.model.capacity import DEFAULT_API

SCHEMA_VERSION: Final = 3

SCHEMA: Final = """
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

#: What takes a store of the version before each key to that version, applied in order by
#: ``migrate`` in one transaction with the new ``schema_version``. A store is created at
#: version 1 (``SCHEMA``) and migrated like any other; a migration only ever adds (a table, a
#: column with a default), so a store stays readable by this and earlier versions (an earlier
#: version's positional inserts into a table that gained a column fail: its recorder says so,
#: ``history.failed``, and the store is kept).
MIGRATIONS: Final = {
    # 2: each workload attempt's chips (duty-cycle p50, idle periods), one row per attempt that
    # had them, found by (slot, run_id, attempt); a table of its own, so that an earlier version
    # still inserts its 9-column attempt rows into a store this version migrated
    2: """
CREATE TABLE IF NOT EXISTS attempt_chips(
  at INTEGER NOT NULL, slot INTEGER, run_id INTEGER, attempt INTEGER NOT NULL,
  duty_p50 REAL, idle_periods INTEGER NOT NULL, idle_ms INTEGER NOT NULL,
  idle_max_ms INTEGER NOT NULL);
""",
    # 3: the API of each row (NULL: the Cloud TPU API, as every row written before)
    3: """
ALTER TABLE transitions ADD COLUMN api INTEGER;
ALTER TABLE waits ADD COLUMN api INTEGER;
ALTER TABLE lifetimes ADD COLUMN api INTEGER;
ALTER TABLE refusals ADD COLUMN api INTEGER;
""",
}
#: The columns of each table rows are written to, in ``rows_of``'s order (named, so a column
#: added later never shifts them).
COLUMNS: Final = {
    "transitions": "at, slot, zone, acc, mode, before, after, code, msg, api",
    "waits": "zone, acc, mode, served, t, at, slot, to_prov, api",
    "lifetimes": "zone, acc, mode, preempted, lived, at, slot, api",
    "races": "at, grp, winner, zone, loser, loser_zone, waited, delete_ms",
    "refusals": "at, slot, zone, acc, mode, code, msg, closed, api",
    "workload_attempts": "started_at, slot, zone, acc, run_id, attempt, ended_at, exit_code, cause",
    "attempt_chips": "at, slot, run_id, attempt, duty_p50, idle_periods, idle_ms, idle_max_ms",
}
#: Tables whose rows say their API (schema version 3).
API_TABLES: Final = ("transitions", "waits", "lifetimes", "refusals")

TABLES: Final = {
    "transitions": "at",
    "waits": "at",
    "lifetimes": "at",
    "races": "at",
    "refusals": "at",
    "workload_attempts": "started_at",
    "attempt_chips": "at",
}


Rows = dict[str, list[tuple[Any, ...]]]
Key = tuple[int, int, int, int | None]  # (zone, acc, mode, api) ids as stored; api NULL: TPU


def _place(names: Mapping[int, str], key: Key) -> Place:
    return (
        names.get(key[0], "?"),
        names.get(key[1], "?"),
        names.get(key[2], "?"),
        api_name(names, key[3]),
    )


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)


def _s(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


def rows_of(
    records: Iterable[Record], intern: Callable[[str | None], int | None]
) -> tuple[int, Rows, list[tuple[Any, ...]]]:
    """The rows of ``records`` per table, the loser deletes that update a race's row, and how
    many records there were; ``intern`` gives a string's id in ``names``."""
    rows: Rows = defaultdict(list)
    deletes: list[tuple[Any, ...]] = []
    n = 0

    def place(zone: str, acc: str, mode: str) -> tuple[int | None, ...]:
        return (intern(zone), intern(acc), intern(mode))

    def api_id(api: str) -> int | None:
        return None if api == DEFAULT_API else intern(api)

    for r in records:
        n += 1
        if isinstance(r, Transition):
            rows["transitions"].append(
                (
                    _ms(r.at),
                    intern(r.slot),
                    *place(r.zone, r.accelerator, r.mode),
                    intern(r.before),
                    intern(r.after),
                    r.code,
                    intern(r.message) if r.message else None,
                    api_id(r.api),
                )
            )
        elif isinstance(r, Wait):
            served = r.to_active is not None
            rows["waits"].append(
                (
                    *place(r.zone, r.accelerator, r.mode),
                    int(served),
                    _ms(r.to_active if served else r.waited),
                    _ms(r.queued_at),
                    intern(r.slot),
                    _ms(r.to_provisioning),
                    api_id(r.api),
                )
            )
        elif isinstance(r, Lifetime):
            rows["lifetimes"].append(
                (
                    *place(r.zone, r.accelerator, r.mode),
                    int(r.end == "preempted"),
                    _ms(r.seconds),
                    _ms(r.ended_at),
                    intern(r.slot),
                    api_id(r.api),
                )
            )
        elif isinstance(r, RaceWon):
            for loser, zone, waited in r.losers or (("", "", 0.0),):
                rows["races"].append(
                    (
                        _ms(r.at),
                        intern(r.group),
                        intern(r.winner),
                        intern(r.zone),
                        intern(loser or None),
                        intern(zone or None),
                        _ms(waited) if loser else None,
                        None,
                    )
                )
        elif isinstance(r, LoserDeleted):
            deletes.append((_ms(r.seconds), intern(r.group), intern(r.slot), intern(r.zone)))
        elif isinstance(r, Refusal):
            rows["refusals"].append(
                (
                    _ms(r.at),
                    intern(r.slot),
                    *place(r.zone, r.accelerator, r.mode),
                    r.code,
                    intern(r.message),
                    int(r.closed),
                    api_id(r.api),
                )
            )
        elif isinstance(r, WorkloadAttempt):
            rows["workload_attempts"].append(
                (
                    _ms(r.started_at),
                    intern(r.slot),
                    intern(r.zone),
                    intern(r.accelerator),
                    intern(r.run_id),
                    r.attempt,
                    _ms(r.ended_at),
                    r.exit_code,
                    intern(r.cause or None),
                )
            )
            if r.chips is not None:
                rows["attempt_chips"].append(
                    (
                        _ms(r.started_at),
                        intern(r.slot),
                        intern(r.run_id),
                        r.attempt,
                        r.chips.duty_p50,
                        r.chips.idle_periods,
                        _ms(r.chips.idle_seconds),
                        _ms(r.chips.idle_longest),
                    )
                )
    return n, rows, deletes


def version(conn: sqlite3.Connection) -> int:
    """The store's ``schema_version`` (1 for a store that never said)."""
    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    try:
        return 1 if row is None else int(row[0])
    except ValueError:
        return 1


def migrate(conn: sqlite3.Connection) -> int:
    """Bring a writable store up to ``SCHEMA_VERSION`` (one transaction; a store of a later
    version is left alone); returns the version it was at."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        was = version(conn)
        for to in sorted(MIGRATIONS):
            if to > was:
                for statement in MIGRATIONS[to].split(";"):
                    if statement.strip():
                        conn.execute(statement)
        if was < SCHEMA_VERSION:
            conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    return was


def insert(conn: sqlite3.Connection, rows: Rows, deletes: list[tuple[Any, ...]]) -> None:
    """``rows_of``'s rows and deletes, inside the caller's transaction."""
    for table, values in rows.items():
        marks = ", ".join("?" * len(values[0]))
        verb = "INSERT OR IGNORE" if table in ("waits", "lifetimes") else "INSERT"
        conn.executemany(f"{verb} INTO {table}({COLUMNS[table]}) VALUES ({marks})", values)
    for delete in deletes:
        conn.execute(
            "UPDATE races SET delete_ms=? WHERE rowid=(SELECT max(rowid) FROM races"
            " WHERE grp=? AND loser=? AND loser_zone=? AND delete_ms IS NULL)",
            delete,
        )


def read_names(conn: sqlite3.Connection, ids: Iterable[int] | None = None) -> dict[int, str]:
    """Interned strings by id: all of them, or only ``ids``."""
    if ids is None:
        return {int(i): str(n) for i, n in conn.execute("SELECT id, name FROM names")}
    wanted = sorted(set(ids))
    marks = ", ".join("?" * len(wanted))
    sql = f"SELECT id, name FROM names WHERE id IN ({marks})"
    return {int(i): str(n) for i, n in conn.execute(sql, wanted)} if wanted else {}


def lookup(conn: sqlite3.Connection, name: str) -> int | None:
    row = conn.execute("SELECT id FROM names WHERE name = ?", (name,)).fetchone()
    return None if row is None else int(row[0])


def has_api(conn: sqlite3.Connection) -> bool:
    """The store's rows say their API (version 3 on; one read as it is may be older)."""
    return any(row[1] == "api" for row in conn.execute("PRAGMA table_info(waits)"))


def api_column(conn: sqlite3.Connection) -> str:
    """What to select as a row's API id: its column, or NULL (the TPU API's) in an older store."""
    return "api" if has_api(conn) else "NULL"


def api_name(names: Mapping[int, str], ident: int | None) -> str:
    """A row's API from its id (NULL: the Cloud TPU API)."""
    return DEFAULT_API if ident is None else names.get(ident, "?")


def where_clause(
    conn: sqlite3.Connection,
    since: float | None,
    zone: str | None,
    accelerator: str | None,
    mode: str | None,
    *,
    at: str = "at",
    api: str | None = None,
) -> tuple[str, list[Any]] | None:
    """A WHERE clause for the filters; None when a named value was never recorded (``api``:
    the rows of that API; the Cloud TPU API's are also an older store's, without the column)."""
    clauses: list[str] = []
    args: list[Any] = []
    if since is not None:
        clauses.append(f"{at} >= ?")
        args.append(_ms(since))
    for column, value in (("zone", zone), ("acc", accelerator), ("mode", mode)):
        if value is None:
            continue
        ident = lookup(conn, value)
        if ident is None:
            return None
        clauses.append(f"{column} = ?")
        args.append(ident)
    if api is not None:
        stored = has_api(conn)
        if api == DEFAULT_API:
            if stored:
                clauses.append("api IS NULL")
        else:
            ident = lookup(conn, api) if stored else None
            if ident is None:
                return None
            clauses.append("api = ?")
            args.append(ident)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), args


def samples(
    conn: sqlite3.Connection,
    *,
    since: float | None = None,
    zone: str | None = None,
    accelerator: str | None = None,
    mode: str | None = None,
    api: str | None = None,
) -> dict[Place, Samples]:
    """Everything ``core.capacity`` needs per (zone, accelerator, mode, api)."""
    where = where_clause(conn, since, zone, accelerator, mode, api=api)
    if where is None:
        return {}
    clause, args = where
    names = read_names(conn)
    col = api_column(conn)
    prov: dict[Key, list[float]] = defaultdict(list)
    active: dict[Key, list[float]] = defaultdict(list)
    unserved: dict[Key, list[float]] = defaultdict(list)
    lifetimes: dict[Key, list[float]] = defaultdict(list)
    held: dict[Key, float] = defaultdict(float)
    failures: dict[Key, dict[int | str, int]] = defaultdict(dict)
    refused: dict[Key, int] = defaultdict(int)
    closed: set[Key] = set()
    last: dict[Key, int] = {}
    keys: set[Key] = set()

    def seen(key: Key, at: int) -> None:
        keys.add(key)
        if at > last.get(key, -1):
            last[key] = at

    for z, a, m, i, at, to_prov, served, t in conn.execute(
        f"SELECT zone, acc, mode, {col}, at, to_prov, served, t FROM waits{clause}", args
    ):
        key = (z, a, m, i)
        seen(key, at)
        if served:
            active[key].append(t / 1000.0)
            prov[key].append(to_prov / 1000.0)
        else:
            unserved[key].append(t / 1000.0)
    for z, a, m, i, at, lived, preempted in conn.execute(
        f"SELECT zone, acc, mode, {col}, at, lived, preempted FROM lifetimes{clause}", args
    ):
        key = (z, a, m, i)
        seen(key, at)
        held[key] += lived / 1000.0
        if preempted:
            lifetimes[key].append(lived / 1000.0)
    fclause = clause + (" AND " if clause else " WHERE ") + "code IS NOT NULL"
    for z, a, m, i, code, n, at in conn.execute(
        f"SELECT zone, acc, mode, {col}, code, count(*), max(at) FROM transitions"
        f"{fclause} GROUP BY zone, acc, mode, {col}, code",
        args,
    ):
        key = (z, a, m, i)
        seen(key, at)
        failures[key][int(code)] = failures[key].get(int(code), 0) + int(n)
    for z, a, m, i, code, n, c, at in conn.execute(
        f"SELECT zone, acc, mode, {col}, code, count(*), max(closed), max(at) FROM refusals"
        f"{clause} GROUP BY zone, acc, mode, {col}, code",
        args,
    ):
        key = (z, a, m, i)
        seen(key, at)
        label: int | str = int(code) if code is not None else "?"
        failures[key][label] = failures[key].get(label, 0) + int(n)
        refused[key] += int(n)
        if c:
            closed.add(key)
    out: dict[Place, Samples] = {}
    for key in keys:
        out[_place(names, key)] = Samples(
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
