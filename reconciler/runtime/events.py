"""The append-only event log: one JSON object per line in ``<state dir>/events.jsonl``.

Every record is ``{"ts": "2025-01-01T12:00:00.123Z", "seq": 7, "kind": "qr.state",
"slot": "...", ...fields}``. Kinds are free dotted names (``desired.loaded``, ``action.failed``,
``setup.step``, ...): the log is generic, the controller names what happened. ``seq`` rises by
one per record and carries on across restarts and rotations (one writer: the controller holding
the lock). Past ``max_bytes`` the file is renamed to ``events.jsonl.1`` (older ones shift to
``.2``...) so a controller running for weeks cannot fill the disk; readers read those too.

Secrets never reach the file: a field whose *name* looks secret (``*key*``, ``*token*``,
``*secret*``, ``*password*``...) is replaced whole, and secret-shaped text inside any string
(``tskey-...``, ``ya29.``, bearer tokens, private keys, ``name=value`` of such names, URL
passwords) is cut out, at every depth.

May: append to, rotate and read the event files, and hand each record written to the
listeners registered (the metrics count events so). May not: print, or keep a secret it was
given.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Final

from reconciler.adapters.files import append_jsonl, read_jsonl
from reconciler.adapters.statedir import StateDir
from reconciler.model.times import utc_text

REDACTED: Final = "[REDACTED]"
DEFAULT_MAX_BYTES: Final = 20 * 1024 * 1024
RESERVED: Final = frozenset({"ts", "seq", "kind", "slot"})

_SECRET_NAME: Final = re.compile(
    r"key|token|secret|passw|credential|authorization|cookie|private", re.IGNORECASE
)
_PUBLIC_NAME: Final = re.compile(r"fingerprint", re.IGNORECASE)
_SECRET_TEXT: Final = (
    (
        re.compile(
            r"-----BEGIN[A-Z ]*PRIVATE KEY-----.*?(?:-----END[A-Z ]*PRIVATE KEY-----|\Z)", re.DOTALL
        ),
        REDACTED,
    ),
    (re.compile(r"tskey-[A-Za-z0-9_-]+"), REDACTED),
    (re.compile(r"ya29\.[A-Za-z0-9._-]+"), REDACTED),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"), REDACTED),
    (re.compile(r"\b(?:gh[pousr]_|github_pat_)[A-Za-z0-9_]{20,}"), REDACTED),
    (re.compile(r"\btk_[A-Za-z0-9]{20,}"), REDACTED),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), rf"\1 {REDACTED}"),
    (
        re.compile(r"(?i)([A-Za-z0-9_.-]*(?:key|token|secret|passw)[A-Za-z0-9_.-]*=)[^\s&\"',;]+"),
        rf"\1{REDACTED}",
    ),
    (re.compile(r"(://[^/\s:@]+:)[^/\s@]+@"), rf"\1{REDACTED}@"),
)


def redact_text(text: str) -> str:
    for pattern, replacement in _SECRET_TEXT:
        text = pattern.sub(replacement, text)
    return text


def secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name)) and not _PUBLIC_NAME.search(name)


def redact(value: Any, name: str | None = None) -> Any:
    """A JSON-ready copy of ``value`` with secrets removed; ``name`` is the field it sits in."""
    if value is None or isinstance(value, bool):
        return value  # cannot carry a secret; "auth_key": null still says "none configured"
    if name is not None and secret_name(name):
        return REDACTED
    if isinstance(value, int | float):
        return value
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {str(k): redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [redact(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return redact_text(str(value))


def format_ts(moment: datetime) -> str:
    """UTC, ISO-8601, milliseconds, ``Z``: ``2025-01-01T12:00:00.123Z``."""
    return utc_text(moment, milliseconds=True)


def parse_ts(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def log_files(path: Path) -> list[Path]:
    """The rotated files (oldest first), then ``path`` itself — existing or not."""
    rotated = []
    for p in path.parent.glob(f"{_glob_escape(path.name)}.*"):
        suffix = p.name[len(path.name) + 1 :]
        if suffix.isdigit():
            rotated.append((int(suffix), p))
    return [p for _, p in sorted(rotated, reverse=True)] + [path]


def _glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


def _last_seq(files: list[Path]) -> int:
    """The seq of the newest record, looking at the last 64 KiB of the newest non-empty file."""
    for path in reversed(files):
        try:
            with path.open("rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 65536))
                lines = f.read().split(b"\n")
        except FileNotFoundError:
            continue
        for raw in reversed(lines):
            with contextlib.suppress(ValueError):
                record = json.loads(raw)
                if isinstance(record, dict) and isinstance(record.get("seq"), int):
                    return int(record["seq"])
    return 0


class EventLog:
    """Appends events to ``state_dir.events``. Thread-safe within one process.

    ``write=False``: a process that may not write the log (a lab member's ``plan``: the log is
    the lab controller's) still builds and hands out its records, and writes none."""

    def __init__(
        self,
        state_dir: StateDir,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        backups: int = 1,
        clock: Callable[[], datetime] | None = None,
        write: bool = True,
    ) -> None:
        if backups < 1:
            raise ValueError("backups must be at least 1")
        self.path = state_dir.ensure().events
        self.max_bytes = max_bytes
        self.backups = backups
        self.write = write
        self._clock = clock or (lambda: datetime.now(UTC))
        self._lock = threading.Lock()
        self._seq = _last_seq(log_files(self.path))
        if write:
            self._heal_torn_tail()
        #: called with each record once it is written (the metrics count events this way)
        self.listeners: list[Callable[[dict[str, Any]], None]] = []

    def _heal_torn_tail(self) -> None:
        """A crash mid-append leaves a line without its newline; end it, so the next record
        starts on a line of its own instead of being glued to the fragment and lost."""
        try:
            with self.path.open("rb") as f:
                f.seek(-1, os.SEEK_END)
                torn = f.read(1) != b"\n"
        except (FileNotFoundError, OSError):
            return
        if torn:
            with self.path.open("ab") as f:
                f.write(b"\n")

    def emit(self, kind: str, *, slot: str | None = None, **fields: Any) -> dict[str, Any]:
        """Append one event; returns the record exactly as written (redacted)."""
        if not kind:
            raise ValueError("an event needs a kind")
        clash = RESERVED & fields.keys()
        if clash:
            raise ValueError(f"reserved event field(s): {', '.join(sorted(clash))}")
        with self._lock:
            self._seq += 1
            record: dict[str, Any] = {"ts": format_ts(self._clock()), "seq": self._seq}
            record["kind"] = kind
            if slot is not None:
                record["slot"] = slot
            for name, value in fields.items():
                record[name] = redact(value, name)
            if self.write:
                self._rotate_if_full()
                append_jsonl(self.path, record)
        for listener in self.listeners:
            listener(record)
        return record

    def _rotate_if_full(self) -> None:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size < self.max_bytes:
            return
        name = self.path.name
        for i in range(self.backups, 1, -1):
            with contextlib.suppress(FileNotFoundError):
                os.replace(
                    self.path.with_name(f"{name}.{i - 1}"), self.path.with_name(f"{name}.{i}")
                )
        os.replace(self.path, self.path.with_name(f"{name}.1"))


def _matcher(since: datetime | None, slot: str | None) -> Callable[[dict[str, Any]], bool]:
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=UTC)

    def matches(record: dict[str, Any]) -> bool:
        if slot is not None and record.get("slot") != slot:
            return False
        if since is not None:
            ts = parse_ts(record.get("ts"))
            if ts is None or ts < since:
                return False
        return True

    return matches


def _history(files: list[Path]) -> Iterator[dict[str, Any]]:
    for path in files:
        yield from read_jsonl(path)


def read_events(
    path: Path,
    *,
    since: datetime | None = None,
    slot: str | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """Events oldest first, rotated files included; ``limit`` keeps the newest N of those that
    match. A torn or corrupt line is skipped. A naive ``since`` is taken as UTC."""
    matches = _matcher(since, slot)
    kept: deque[dict[str, Any]] = deque(maxlen=None if limit is None else max(limit, 0))
    kept.extend(r for r in _history(log_files(path)) if matches(r))
    return list(kept)


class _Tail:
    """Complete new lines of a file that may be rotated (renamed away) or truncated."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file: IO[bytes] | None = None
        self.ident: tuple[int, int] | None = None
        self.partial = b""

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None

    def open(self) -> None:
        try:
            self.file = self.path.open("rb")
        except FileNotFoundError:
            return
        st = os.fstat(self.file.fileno())
        self.ident, self.partial = (st.st_dev, st.st_ino), b""

    def _drain(self) -> list[dict[str, Any]]:
        assert self.file is not None
        data = self.file.read()
        if not data:
            return []
        *lines, self.partial = (self.partial + data).split(b"\n")
        out = []
        for raw in lines:
            with contextlib.suppress(ValueError):
                record = json.loads(raw)
                if isinstance(record, dict):
                    out.append(record)
        return out

    def read(self) -> list[dict[str, Any]]:
        if self.file is None:
            self.open()
            if self.file is None:
                return []
        out = self._drain()
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return out  # mid-rotation: the new file appears with the next record
        if (st.st_dev, st.st_ino) != self.ident:
            out += self._drain()  # the last records written before the rename
            self.close()
            self.open()
            if self.file is not None:
                out += self._drain()
        elif st.st_size < self.file.tell():  # truncated in place
            self.file.seek(0)
            self.partial = b""
            out += self._drain()
        return out


async def follow_events(
    path: Path,
    *,
    since: datetime | None = None,
    slot: str | None = None,
    limit: int | None = None,
    stop: asyncio.Event | None = None,
    poll_interval: float = 0.2,
) -> AsyncIterator[dict[str, Any]]:
    """``events --follow``: first the matching history (the newest ``limit``; ``limit=0`` for
    none), then every new matching event as it is appended, across rotation and truncation,
    until ``stop`` is set (or the consumer stops iterating)."""
    matches = _matcher(since, slot)
    stop = stop or asyncio.Event()
    tail = _Tail(path)
    try:
        backlog: deque[dict[str, Any]] = deque(maxlen=None if limit is None else max(limit, 0))
        tail.open()  # before the rotated files are read, so a rotation between loses nothing
        backlog.extend(r for r in _history(log_files(path)[:-1]) if matches(r))
        backlog.extend(r for r in tail.read() if matches(r))
        for record in backlog:
            yield record
        del backlog
        while not stop.is_set():
            fresh = tail.read()
            for record in fresh:
                if matches(record):
                    yield record
            if not fresh:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), poll_interval)
    finally:
        tail.close()
