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

The SQL itself (schema, records as rows, the queries) is ``adapters/history_sql.py`` and
``adapters/history_rows.py``; this module owns the file: opening it, its transactions, its
damage and moving it aside. Opening it writable brings an older store up to the current
schema (``history_sql.migrate``); a read-only view reads a store of any earlier version as it
is.

May: read and write the history file. May not: decide what a record means (``core.history``)
or compute statistics (``core.capacity``).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from reconciler.adapters.files import PRIVATE_FILE, shared_mode
from reconciler.adapters.history_rows import attempts, states_before, timeline, transitions
from reconciler.adapters.history_sql import (
    SCHEMA,
    TABLES,
    _ms,
    insert,
    migrate,
    read_names,
    rows_of,
    samples,
)
from reconciler.adapters.history_stats import stats
from reconciler.core.capacity import (
    Open,
    Place,
    PlaceStats,
    Samples,
    with_open,
)
from reconciler.core.capacity_chart import Timeline
from reconciler.core.history import (
    Record,
    Transition,
    WorkloadAttempt,
)
from reconciler.errors import HistoryUnreadable


@contextlib.contextmanager
def _reading(path: Path) -> Iterator[None]:
    """SQLite's failures while reading, as ``HistoryUnreadable`` (readers never see sqlite3)."""
    try:
        yield
    except sqlite3.Error as e:
        raise HistoryUnreadable(f"capacity history {path}: {e}") from None


_HEADER: Final = b"SQLite format 3\x00"


def _readonly_uri(path: Path, *, immutable: bool = False) -> str:
    """A read-only ``file:`` URI for ``path``: ``#``, ``?`` and ``%`` in a directory name (a
    desired file named ``team#2.yaml`` gives one) would otherwise end the path early and open,
    or create, some other file. ``immutable``: see ``open_readonly``."""
    extra = "&immutable=1" if immutable else ""
    return f"file:{quote(str(path.absolute()), safe='/')}?mode=ro{extra}"


def _immutable_read(path: Path) -> bool:
    """Whether a reader must open ``path`` as immutable: it may not create SQLite's ``-wal``
    and ``-shm`` beside it (a lab member, in the controller's directory) and no writer has them
    open (no ``-wal``: the last writer closed, its log folded into the file)."""
    return not os.access(path.parent, os.W_OK) and not os.path.exists(f"{path}-wal")


def _lab_mode(fd: int, path: Path) -> None:
    """In a shared lab's controller directory (``adapters/lab_layout``) the file is the
    group's to read (0640), so members can run ``history`` and ``recommend``; it holds no
    secrets, and only the controller's user writes it (SQLite gives its ``-wal`` and ``-shm``
    the database's mode). Elsewhere it stays 0600."""
    mode = shared_mode(path.parent, PRIVATE_FILE)
    if mode != PRIVATE_FILE:
        with contextlib.suppress(PermissionError):  # another's file: its owner sets it
            os.fchmod(fd, mode)


class HistoryDB:
    """One connection to the history file. Not thread-safe: one thread per instance."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        if readonly:
            uri = _readonly_uri(path, immutable=_immutable_read(path))
            self.conn = sqlite3.connect(uri, uri=True, isolation_level=None)
        else:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            _lab_mode(fd, path)
            os.close(fd)
            self.conn = sqlite3.connect(path, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.executescript(SCHEMA)
            self.set_meta_default("schema_version", "1")  # what SCHEMA makes; then migrated
            migrate(self.conn)
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

    def write(self, records: Iterable[Record], *, meta: dict[str, str] | None = None) -> int:
        """Insert ``records`` (and ``meta`` values) in one transaction; returns the count."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            n, rows, deletes = rows_of(records, self._id)
            insert(self.conn, rows, deletes)
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
            for table, column in TABLES.items():
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
        return read_names(self.conn, ids)

    def samples(
        self, *, open_: Mapping[Place, Open] | None = None, **filters: Any
    ) -> dict[Place, Samples]:
        """See ``history_sql.samples``, plus what is still in progress (``open_``, e.g. from
        ``core.history.open_samples``); SQLite's failures raise ``HistoryUnreadable``."""
        with _reading(self.path):
            got = samples(self.conn, **filters)
            if where_open := _matching(open_, filters):
                got = with_open(got, where_open)
            return got

    def stats(
        self, *, open_: Mapping[Place, Open] | None = None, **filters: Any
    ) -> list[PlaceStats]:
        """See ``history_stats.stats``; ``open_`` as for ``samples``. SQLite's failures raise
        ``HistoryUnreadable``."""
        with _reading(self.path):
            return stats(self.conn, open_=_matching(open_, filters), **filters)

    def transitions(self, **filters: Any) -> Iterator[Transition]:
        """See ``history_rows.transitions``; SQLite's failures raise ``HistoryUnreadable``."""
        with _reading(self.path):
            yield from transitions(self.conn, **filters)

    def states_before(self, moment: float) -> list[Transition]:
        """See ``history_rows.states_before``; SQLite's failures raise ``HistoryUnreadable``."""
        with _reading(self.path):
            return states_before(self.conn, moment)

    def timeline(self, **filters: Any) -> Timeline:
        """See ``history_rows.timeline``; SQLite's failures raise ``HistoryUnreadable``."""
        with _reading(self.path):
            return timeline(self.conn, **filters)

    def attempts(self, **filters: Any) -> list[WorkloadAttempt]:
        """See ``history_rows.attempts``; SQLite's failures raise ``HistoryUnreadable``."""
        with _reading(self.path):
            return attempts(self.conn, **filters)

    def count(self, table: str) -> int:
        if table not in TABLES:
            raise ValueError(f"unknown table {table!r}")
        return int(self.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def _matching(open_: Mapping[Place, Open] | None, filters: Mapping[str, Any]) -> dict[Place, Open]:
    """The open places that pass the zone / accelerator / mode / api filters (``since`` is for
    the caller, who knows when each open wait began)."""
    wanted = tuple(filters.get(k) for k in ("zone", "accelerator", "mode", "api"))
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
    A file SQLite cannot open raises ``HistoryUnreadable``.

    A lab member reads the controller's store from a directory they cannot write: while the
    controller runs, through the ``-wal`` and ``-shm`` it keeps there (read-only: SQLite's
    own provision for readers without write access); while it is stopped (no ``-wal``: its
    log was folded into the file at close), as an immutable file, which it then is."""
    if not path.exists():
        return None
    with _reading(path):
        return HistoryDB(path, readonly=True)
