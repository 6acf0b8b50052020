"""The capacity history's figures read the fast way: ``stats`` computes in SQL what
``core.capacity.summarize(history_sql.samples(...))`` defines (checked against it by the
tests): waits come out of their clustered key already sorted per place, percentiles are
picked by ``OFFSET`` from their indexes, failures from a partial index.

Functions of a ``sqlite3.Connection`` the caller holds (``adapters/history_db.HistoryDB``); the
schema, the names table and the filters are ``adapters/history_sql.py``'s.

May: run SELECTs on the connection it is given. May not: write, open or commit the file.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from reconciler.adapters.history_sql import (
    Key,
    _place,
    _s,
    api_column,
    read_names,
    where_clause,
)
from reconciler.core.capacity import (
    Open,
    Place,
    PlaceStats,
    km_quantile_sorted,
    per_day,
    percentile,
    summarize,
    with_open,
)


def stats(
    conn: sqlite3.Connection,
    *,
    since: float | None = None,
    zone: str | None = None,
    accelerator: str | None = None,
    mode: str | None = None,
    open_: Mapping[Place, Open] | None = None,
    api: str | None = None,
) -> list[PlaceStats]:
    """The figures of ``core.capacity.summarize(samples(...))``, read the fast way:
    waits come out of their clustered key already sorted per place (one ``group_concat``
    per place and outcome, no per-row Python objects), percentiles of the time to
    PROVISIONING and of lifetimes are picked by ``OFFSET`` from their indexes, failures
    from a partial index. Checked against ``samples()`` by the tests."""
    where = where_clause(conn, since, zone, accelerator, mode, api=api)
    if where is None:
        return summarize(with_open({}, open_ or {}))  # known only by what is open
    clause, args = where
    col = api_column(conn)
    and_ = " AND " if clause else " WHERE "
    per: dict[Key, dict[str, Any]] = defaultdict(dict)

    def seen(key: Key, at: int | None) -> dict[str, Any]:
        entry = per[key]
        if at is not None and at > entry.get("last", -1):
            entry["last"] = at
        return entry

    for z, a, m, i, served, values, at in conn.execute(
        f"SELECT zone, acc, mode, {col}, served, group_concat(t), max(at) FROM waits"
        f"{clause} GROUP BY zone, acc, mode, {col}, served",
        args,
    ):
        ordered = list(map(int, values.split(",")))  # milliseconds
        ordered.sort()  # already in key order: a linear check
        seen((z, a, m, i), at)["served" if served else "unserved"] = ordered
    for key, entry in per.items():
        entry["prov"] = _picks(
            conn,
            "to_prov",
            "waits",
            key,
            clause,
            and_ + "to_prov IS NOT NULL",
            args,
            len(entry.get("served", ())),
            (50.0, 90.0),
            col,
        )
    for z, a, m, i, held, n, at in conn.execute(
        f"SELECT zone, acc, mode, {col}, sum(lived), sum(preempted), max(at) FROM lifetimes"
        f"{clause} GROUP BY zone, acc, mode, {col}",
        args,
    ):
        entry = seen((z, a, m, i), at)
        entry["held"], entry["preemptions"] = held / 1000.0, int(n)
        entry["lifetime"] = _picks(
            conn,
            "lived",
            "lifetimes",
            (z, a, m, i),
            clause,
            and_ + "preempted = 1",
            args,
            int(n),
            (50.0,),
            col,
        )[0]
    for table, closed in (("transitions", "0"), ("refusals", "closed")):
        extra = and_ + "code IS NOT NULL" if table == "transitions" else ""
        for z, a, m, i, code, n, shut, at in conn.execute(
            f"SELECT zone, acc, mode, {col}, code, count(*), max({closed}), max(at) FROM {table}"
            f"{clause}{extra} GROUP BY zone, acc, mode, {col}, code",
            args,
        ):
            entry = seen((z, a, m, i), at)
            failures = entry.setdefault("failures", {})
            label: int | str = int(code) if code is not None else "?"
            failures[label] = failures.get(label, 0) + int(n)
            entry["closed"] = bool(entry.get("closed") or shut)
    names = read_names(conn, (i for key in per for i in key if i is not None))
    by_place: dict[Place, dict[str, Any]] = {_place(names, k): e for k, e in per.items()}
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
                api=place[3],
            )
        )
    return sorted(out, key=lambda s: s.place)


def _picks(
    conn: sqlite3.Connection,
    column: str,
    table: str,
    key: Key,
    clause: str,
    extra: str,
    args: list[Any],
    n: int,
    qs: tuple[float, ...],
    col: str,
) -> tuple[float | None, ...]:
    """Percentiles (as ``core.capacity.percentile``: linear between the closest ranks) of
    one place's ``column``, reading only the two rows around each rank from its index."""
    if n == 0:
        return tuple(None for _ in qs)
    place = f" AND zone = ? AND acc = ? AND mode = ? AND {col} IS ?"  # NULL IS NULL: older
    sql = f"SELECT {column} FROM {table}{clause}{extra}{place} ORDER BY {column} LIMIT 2 OFFSET ?"
    out: list[float | None] = []
    for q in qs:
        pos = (n - 1) * q / 100.0
        low = int(pos)
        got = [v / 1000.0 for (v,) in conn.execute(sql, [*args, *key, low])]
        if not got:
            out.append(None)
            continue
        hi = got[1] if len(got) > 1 else got[0]
        out.append(got[0] + (hi - got[0]) * (pos - low))
    return tuple(out)
