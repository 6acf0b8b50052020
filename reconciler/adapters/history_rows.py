"""The capacity history's reads of rows over time: ``transitions`` (oldest first, for
``history --export csv`` and, with ``states_before``, the lab's timeline), ``timeline`` (waits
and holdings, for ``history --plot`` / ``--html`` and the TUI's history pane) and ``attempts``
(workload attempts with their chip use, newest first, for ``history``).

Functions of a ``sqlite3.Connection`` the caller holds (``adapters/history_db.HistoryDB``); the
schema, the names table and the filters are ``adapters/history_sql.py``'s.

May: run SELECTs on the connection it is given. May not: write, open or commit the file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

from reconciler.adapters.history_sql import _s, api_column, api_name, read_names, where_clause
from reconciler.core.capacity_chart import GAVE_UP, SERVED, Holding, Timeline, WaitPoint
from reconciler.core.chip_use import ChipSummary
from reconciler.core.history import Transition, WorkloadAttempt


def transitions(
    conn: sqlite3.Connection,
    *,
    since: float | None = None,
    zone: str | None = None,
    accelerator: str | None = None,
    mode: str | None = None,
    api: str | None = None,
) -> Iterator[Transition]:
    """Every transition matching the filters, oldest first (for ``--export csv``)."""
    where = where_clause(conn, since, zone, accelerator, mode, api=api)
    if where is None:
        return
    clause, args = where
    names = read_names(conn)
    columns = _columns(conn)
    for row in conn.execute(f"SELECT {columns} FROM transitions{clause} ORDER BY rowid", args):
        yield _transition(row, names)


def _columns(conn: sqlite3.Connection) -> str:
    """A transition's columns, its API's last (NULL in a store older than it: the TPU API's)."""
    return f"at, slot, zone, acc, mode, before, after, code, msg, {api_column(conn)}"


def _transition(row: tuple[Any, ...], names: dict[int, str]) -> Transition:
    at, slot, z, a, m, before, after, code, msg, api = row

    def name(i: int | None) -> str | None:
        return None if i is None else names.get(i, "?")

    return Transition(
        slot=name(slot) or "?",
        zone=name(z) or "?",
        accelerator=name(a) or "?",
        mode=name(m) or "?",
        before=name(before),
        after=name(after),
        at=at / 1000.0,
        code=code,
        message=name(msg) or "",
        api=api_name(names, api),
    )


def states_before(conn: sqlite3.Connection, moment: float) -> list[Transition]:
    """The last transition of each (zone, slot) before ``moment``: the state each request was
    in then (the lab's timeline starts from it). Its SQLite's bare columns come from the row
    of ``max(rowid)``, the latest recorded."""
    names = read_names(conn)
    rows = conn.execute(
        f"SELECT {_columns(conn)}, max(rowid) FROM transitions WHERE at < ? GROUP BY zone, slot",
        (round(moment * 1000),),
    )
    return [_transition(row[:-1], names) for row in rows]


def timeline(
    conn: sqlite3.Connection,
    *,
    since: float | None = None,
    zone: str | None = None,
    accelerator: str | None = None,
    mode: str | None = None,
    api: str | None = None,
) -> Timeline:
    """Every stored wait (by the time it was queued) and ended holding (by the time it ended)
    matching the filters, for ``core.capacity_chart``, in the tables' key order (no sort: the
    series do not depend on the order, and the same file reads back the same)."""
    where = where_clause(conn, since, zone, accelerator, mode, api=api)
    if where is None:
        return Timeline()
    clause, args = where
    names = read_names(conn)
    col = api_column(conn)

    places: dict[tuple[int, int, int, int | None], tuple[str, str, str]] = {}

    def place(z: int, a: int, m: int, i: int | None) -> tuple[str, str, str]:
        found = places.get((z, a, m, i))
        if found is None:
            found = places[(z, a, m, i)] = (names.get(z, "?"), names.get(a, "?"), names.get(m, "?"))
        return found

    waits = [
        WaitPoint(
            *place(z, a, m, i),
            queued_at=at / 1000.0,
            seconds=t / 1000.0,
            outcome=SERVED if served else GAVE_UP,
            api=api_name(names, i),
        )
        for z, a, m, i, at, t, served in conn.execute(
            f"SELECT zone, acc, mode, {col}, at, t, served FROM waits{clause}", args
        )
    ]
    holdings = [
        Holding(
            *place(z, a, m, i),
            start=(at - lived) / 1000.0,
            end=at / 1000.0,
            preempted=bool(preempted),
            api=api_name(names, i),
        )
        for z, a, m, i, at, lived, preempted in conn.execute(
            f"SELECT zone, acc, mode, {col}, at, lived, preempted FROM lifetimes{clause}", args
        )
    ]
    return Timeline(tuple(waits), tuple(holdings))


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,))
    return row.fetchone() is not None


def attempts(
    conn: sqlite3.Connection,
    *,
    since: float | None = None,
    zone: str | None = None,
    accelerator: str | None = None,
    limit: int | None = None,
) -> list[WorkloadAttempt]:
    """Workload attempts matching the filters (started at or after ``since``), newest first,
    each with its chips when they were recorded. A store of version 1 (no ``attempt_chips``,
    opened read-only before any newer controller migrated it) reads with ``chips`` None."""
    where = where_clause(conn, since, zone, accelerator, None, at="a.started_at")
    if where is None or not _has_table(conn, "workload_attempts"):
        return []
    clause, args = where
    chips = _has_table(conn, "attempt_chips")
    columns = (
        "c.duty_p50, c.idle_periods, c.idle_ms, c.idle_max_ms" if chips else "NULL" + (", NULL" * 3)
    )
    join = (
        " LEFT JOIN attempt_chips c ON c.slot IS a.slot AND c.run_id IS a.run_id"
        " AND c.attempt = a.attempt"
        if chips
        else ""
    )
    sql = (
        "SELECT a.started_at, a.slot, a.zone, a.acc, a.run_id, a.attempt, a.ended_at,"
        f" a.exit_code, a.cause, {columns} FROM workload_attempts a{join}{clause}"
        " ORDER BY a.started_at DESC, a.rowid DESC"
    )
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    got = conn.execute(sql, args).fetchall()
    names = read_names(conn, (i for row in got for i in (row[1], row[2], row[3], row[4], row[8])
                             if i is not None))  # fmt: skip
    out: list[WorkloadAttempt] = []
    for at, slot, z, a, run, n, ended, code, cause, p50, periods, idle, longest in got:
        out.append(
            WorkloadAttempt(
                slot=names.get(slot, "?"),
                zone=names.get(z, "?"),
                accelerator=names.get(a, "?"),
                run_id=names.get(run, "?"),
                attempt=int(n),
                started_at=at / 1000.0,
                ended_at=_s(ended),
                exit_code=code,
                cause=names.get(cause, "") if cause is not None else "",
                chips=None
                if periods is None
                else ChipSummary(
                    duty_p50=None if p50 is None else float(p50),
                    idle_periods=int(periods),
                    idle_seconds=idle / 1000.0,
                    idle_longest=longest / 1000.0,
                ),
            )
        )
    return out
