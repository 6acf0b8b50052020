"""The history recorder: a background thread that keeps the capacity history store.

The controller calls ``observe(desired, observation, memory, now)`` once per pass; that call
only puts the (immutable) values on a queue and returns — it never touches the disk, so a slow
or full disk cannot stall a pass. The recorder's own thread diffs the looks
(``core.history.Tracker``), batches the records and writes each batch in one SQLite
transaction (``adapters.history_db``), at most once per ``batch_seconds``.

- **First start**: before recording live it fills the store from the event log
  (``events.jsonl`` and its rotations: ``qr.state`` and failed creates), then marks the store
  as filled, so a second start does not duplicate the past. The tracker's per-request state is saved
  with every batch, in the same transaction, so a restart continues the waits in progress.
- **Failures**: a write that fails is reported (event ``history.failed`` and a log warning, once
  per distinct error) and retried with the next batch; the loop of the controller never sees
  it. A file SQLite calls corrupt is moved aside (``history.sqlite.corrupt-<time>``) and rebuilt
  from the event log (event ``history.rebuilt``); so is one found deleted, replaced, cut short or
  with its header overwritten, which the writer checks before every batch (SQLite itself would
  go on writing to the open inode and notice nothing). The queue is bounded: when the writer cannot
  keep up, the oldest looks are dropped and counted, never blocking the caller; records handed
  over directly (workload attempts) and flush / stop requests are never dropped.
- **Expected waits**: after a batch, at most once a minute, the thread recomputes the small
  place -> (p50, samples) summary (``hints``) that the controller puts into its snapshot, so
  ``status`` shows "p50 2h10m here, 14 samples" without anyone reading SQLite on a pass.
- **Retention**: records older than ``settings.history_retention`` (default 365 days) are
  deleted at start and then hourly.

Workloads record attempts with ``record_workload_attempt(...)``. What reads the store
(``history``, ``recommend``, the pictures, the timeline) is ``runtime/history_reads``.

May: own the recorder thread and its store connection. May not: decide anything for the
controller, or block a caller.
"""

from __future__ import annotations

import logging
import queue
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from reconciler.adapters.history_db import HistoryDB, corrupt, move_aside, open_store
from reconciler.adapters.statedir import StateDir
from reconciler.core import memory as mem
from reconciler.core.capacity import WaitHints, wait_hints
from reconciler.core.chip_use import ChipSummary
from reconciler.core.history import (
    Record,
    Refusal,
    Seen,
    Tracker,
    WorkloadAttempt,
    from_event,
    open_samples,
)
from reconciler.errors import HistoryUnreadable
from reconciler.model.desired import Desired, SlotSpec
from reconciler.model.multislice import place_accelerator
from reconciler.model.observed import Observation
from reconciler.runtime.backends import word_state
from reconciler.runtime.events import EventLog, parse_ts, read_events, redact_text
from reconciler.runtime.history_reads import tracker_from_json, tracker_to_json

# the recorder saves its tracker as the reads parse it: tests and scripts name these here
_tracker_to_json, _tracker_from_json = tracker_to_json, tracker_from_json

log = logging.getLogger(__name__)

DEFAULT_RETENTION: Final = 365 * 86400.0
PRUNE_EVERY: Final = 3600.0
HINTS_EVERY: Final = 60.0  # how often the expected waits shown by status are recomputed


class _Look:
    __slots__ = ("desired", "memory", "now", "observation")

    def __init__(self, desired: Desired, observation: Observation, memory: mem.Memory, now: float):
        self.desired, self.observation, self.memory, self.now = desired, observation, memory, now


_STOP: Final = object()


class _Inbox:
    """The recorder's queue. Looks are bounded: when ``max_looks`` wait already, the oldest
    *look* is dropped (a newer look supersedes it). Everything else (workload attempts, flush
    and stop requests) is never dropped and never blocks: such items are rare, so they are
    kept however many there are."""

    def __init__(self, max_looks: int) -> None:
        self.max_looks = max(1, max_looks)
        self._items: deque[Any] = deque()
        self._looks = 0
        self._ready = threading.Condition()

    def put(self, item: Any) -> bool:
        """Add ``item``; True when an older look was dropped to make room."""
        with self._ready:
            dropped = False
            if isinstance(item, _Look):
                if self._looks >= self.max_looks:
                    for i, queued in enumerate(self._items):
                        if isinstance(queued, _Look):
                            del self._items[i]
                            self._looks -= 1
                            dropped = True
                            break
                self._looks += 1
            self._items.append(item)
            self._ready.notify()
            return dropped

    def get(self, timeout: float) -> Any:
        """The oldest item, waiting up to ``timeout`` seconds; ``queue.Empty`` when none came."""
        with self._ready:
            if not self._ready.wait_for(lambda: bool(self._items), timeout):
                raise queue.Empty
            item = self._items.popleft()
            if isinstance(item, _Look):
                self._looks -= 1
            return item

    def empty(self) -> bool:
        with self._ready:
            return not self._items


def looks_of(observation: Observation, tracker: Tracker) -> tuple[list[Seen], set[tuple[str, str]]]:
    """The managed requests of one observation whose state the tracker does not have yet, and
    the keys of all of them (most passes change nothing: only the changed ones become values)."""
    changed: list[Seen] = []
    present: set[tuple[str, str]] = set()
    tracks = tracker.tracks
    for r in observation.requests:
        if not r.managed:
            continue
        key = (r.zone, r.name)
        present.add(key)
        track = tracks.get(key)
        if track is not None and track.state == r.api_state:
            continue
        changed.append(
            Seen(
                slot=r.name,
                zone=r.zone,
                state=r.api_state,
                accelerator=place_accelerator(r.accelerator or "?", r.slices),
                mode=r.mode or "?",
                code=r.error.code if r.error else None,
                message=redact_text(r.error.message) if r.error else "",
                request=r.state,
                api=r.api,
            )
        )
    return changed, present


class HistoryRecorder:
    """Owns the history writer thread. ``start()`` it, feed it, ``close()`` it."""

    def __init__(
        self,
        state: StateDir,
        events: EventLog | None = None,
        *,
        batch_seconds: float = 1.0,
        max_queue: int = 10_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path: Path = state.history
        self.events_path = state.events
        self.events = events
        self.batch_seconds = batch_seconds
        self.clock = clock
        self._queue = _Inbox(max_queue)
        self._thread: threading.Thread | None = None
        self._tracker = Tracker()
        self._db: HistoryDB | None = None
        self._pending: list[Record] = []
        self._retention = DEFAULT_RETENTION
        self._pruned_at = 0.0
        self._filled = False
        self._last_desired: Desired | None = None
        self._idle = threading.Event()
        self._idle.set()
        self.dropped = 0
        self.written = 0
        self.last_error: str | None = None
        #: place -> (p50 to ACTIVE, samples), for the snapshot; replaced whole, never mutated
        self.hints: WaitHints = {}
        self._hinted_at = -HINTS_EVERY
        self._hinted_written = -1

    # -- caller side (never blocks) -------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, name="history-writer", daemon=True)
            self._thread.start()

    def observe(
        self, desired: Desired, observation: Observation, memory: mem.Memory, now: float
    ) -> None:
        """Hand one pass's look to the recorder (the controller's one call per pass)."""
        self._put(_Look(desired, observation, memory, now))

    def record_workload_attempt(
        self,
        *,
        slot: str,
        zone: str,
        accelerator: str,
        run_id: str,
        attempt: int,
        started_at: float,
        ended_at: float | None = None,
        exit_code: int | None = None,
        cause: str = "",
        chips: ChipSummary | None = None,
    ) -> None:
        """Record one workload attempt (call it when the attempt ends; ``ended_at`` None for
        an attempt still running when the controller stops; ``chips`` its duty-cycle p50 and
        idle periods, with ``setup.telemetry``). Never blocks."""
        self._put(
            WorkloadAttempt(
                slot,
                zone,
                accelerator,
                run_id,
                attempt,
                started_at,
                ended_at,
                exit_code,
                cause,
                chips,
            )
        )

    def _put(self, item: Any) -> None:
        self._idle.clear()
        if self._queue.put(item):  # only a superseded look is ever dropped, never a record
            self.dropped += 1

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything handed over so far is written (tests, ``close``)."""
        self._idle.clear()  # else an idle writer's set flag would answer before the flush ran
        self._queue.put(("flush",))
        return self._idle.wait(timeout)

    def close(self, timeout: float = 10.0) -> None:
        if self._thread is None:
            return
        self._queue.put(_STOP)
        self._thread.join(timeout)
        self._thread = None

    def health(self) -> dict[str, Any]:
        return {
            "ok": self.last_error is None,
            "error": self.last_error,
            "written": self.written,
            "dropped": self.dropped,
        }

    # -- writer thread --------------------------------------------------------------------------
    def _main(self) -> None:
        try:
            self._open()
        except Exception as e:  # cannot even open: report, keep draining so callers never block
            self._failed(e)
        deadline = time.monotonic() + self.batch_seconds
        while True:
            timeout = max(0.0, deadline - time.monotonic())
            try:
                item = self._queue.get(timeout=timeout)
            except queue.Empty:
                item = None
            if item is _STOP:
                self._write()
                break
            if isinstance(item, tuple):  # flush request
                self._write()
                if self._queue.empty():
                    self._idle.set()
                continue
            try:
                if item is not None:
                    self._take(item)
                if time.monotonic() >= deadline or len(self._pending) >= 5000:
                    self._write()
                    deadline = time.monotonic() + self.batch_seconds
            except Exception as e:  # a bug here must not end recording for good
                log.exception("history writer")
                self._failed(e)
                deadline = time.monotonic() + self.batch_seconds
            if self._queue.empty() and not self._pending:
                self._idle.set()
        if self._db is not None:
            self._db.close()
            self._db = None

    def _open(self) -> None:
        self._db, aside = open_store(self.path)
        if aside is not None:
            self._emit("history.rebuilt", moved_to=str(aside))
        self._filled = self._db.meta("backfilled") is not None
        saved = self._db.meta("tracker")
        if saved and self._filled:
            self._tracker = tracker_from_json(saved)

    def _take(self, item: Any) -> None:
        if isinstance(item, WorkloadAttempt):
            self._pending.append(item)
            return
        look: _Look = item
        self._last_desired = look.desired
        retention = getattr(look.desired.settings, "history_retention", None)
        if retention:
            self._retention = float(retention)
        errors = {  # messages as the event log keeps them: secret-shaped text cut out
            k: (e.not_before, redact_text(e.message))
            for k, e in look.memory.errors.items()
            if k.endswith(":cloud")
        }
        if not self._filled:
            self._backfill(look.desired, until=look.now)
            self._tracker.refusals(errors, {}, look.now)  # those are in the log already
        obs = look.observation
        changed, present = looks_of(obs, self._tracker)
        if changed or len(present) != len(self._tracker.tracks):
            groups = {s.name: s.race_group for s in look.desired.slots if s.race_group}
            zones = {k[0] for k in self._tracker.tracks} | {k[0] for k in present}
            self._pending += self._tracker.step(
                changed,
                look.now,
                gone_zones=[z for z in zones if obs.knows(z)],
                complete=True,
                groups=groups,
                present=present,
            )
        absent: dict[str, tuple[str, str, str, str]] = {}
        for key in errors:
            zone, _, rest = key.partition("/")
            slot = rest.rsplit(":", 1)[0]
            spec = look.desired.slot(slot)
            if spec is not None and obs.knows(zone) and obs.request(zone, slot) is None:
                absent[key] = (slot, *_place_of(spec)[1:])
        self._pending += self._tracker.refusals(errors, absent, look.now)

    def _backfill(self, desired: Desired | None, *, until: float) -> None:
        """Replay the event log into the tracker (and the pending batch), once per store: the
        events before ``until`` (the first look's time), since the looks after it are recorded
        live."""
        slots = {s.name: _place_of(s) for s in (desired.slots if desired else ())}
        self._tracker = Tracker()
        replayed = 0
        try:
            events = read_events(self.events_path)
        except OSError as e:
            self._failed(e)
            events = []
        for event in events:
            moment = parse_ts(event.get("ts"))
            if moment is None:
                continue
            at = moment.timestamp()
            if at >= until:
                break
            fact = from_event(event, at, slots, word_state)
            if isinstance(fact, Seen):
                self._pending += self._tracker.step([fact], at)
                replayed += 1
            elif isinstance(fact, Refusal):
                self._pending.append(fact)
                replayed += 1
        self._filled = True
        if replayed:
            self._emit("history.filled", events=replayed)

    def _write(self) -> None:
        if len(self._pending) > 200_000:  # the store has been failing for long: keep the newest
            self.dropped += len(self._pending) - 100_000
            self._pending = self._pending[-100_000:]
        if self._db is None:
            try:
                self._open()
            except Exception as e:
                self._failed(e)
                return
        assert self._db is not None
        damage = self._db.damage()
        if damage is not None:  # deleted, replaced, truncated or overwritten under us
            self._rebuild(HistoryUnreadable(f"capacity history {self.path}: {damage}"))
            return
        now = self.clock()
        try:
            if self._pending or not self._db.meta("backfilled"):
                meta = {"tracker": tracker_to_json(self._tracker)}
                if self._filled:
                    meta["backfilled"] = str(round(now))
                self.written += self._db.write(self._pending, meta=meta)
                self._pending = []
            if now - self._pruned_at >= PRUNE_EVERY:
                self._db.prune(now - self._retention)
                self._pruned_at = now
            if self.written != self._hinted_written and now - self._hinted_at >= HINTS_EVERY:
                self._hinted_at, self._hinted_written = now, self.written
                open_ = open_samples(self._tracker.tracks, now)
                self.hints = wait_hints(self._db.stats(open_=open_))
            if self.last_error is not None:
                self._emit("history.recovered")
            self.last_error = None
        except HistoryUnreadable as e:  # reading the figures back failed: report, go on
            self._failed(e)
        except sqlite3.DatabaseError as e:
            if corrupt(e):
                self._rebuild(e)
            else:
                self._failed(e)

    def _rebuild(self, error: Exception) -> None:
        """Move the corrupt file aside and refill a new one from the event log."""
        self._failed(error)
        if self._db is not None:
            self._db.close()
            self._db = None
        aside = move_aside(self.path)
        self._emit("history.rebuilt", moved_to=str(aside), error=str(error))
        self._pending = []
        self._filled = False
        try:
            self._open()
        except Exception as e:
            self._failed(e)
            return
        self._backfill(self._last_desired, until=self.clock())
        self._write()

    def _failed(self, error: Exception) -> None:
        message = f"{type(error).__name__}: {error}"
        if message != self.last_error:
            log.warning("history store %s: %s", self.path, message)
            self._emit("history.failed", error=message)
        self.last_error = message

    def _emit(self, kind: str, **fields: Any) -> None:
        if self.events is None:
            return
        try:
            self.events.emit(kind, **fields)
        except Exception:  # the event log itself failing must not end the writer
            log.exception("could not record %s", kind)


def _place_of(spec: SlotSpec) -> tuple[str, str, str, str]:
    """(zone, accelerator, mode, api) of a slot's requests, as the history keeps a place."""
    return (spec.zone, place_accelerator(spec.accelerator, spec.slices), spec.mode, spec.api)
