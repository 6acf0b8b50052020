"""The capacity history's reads for ``history``, ``recommend``, ``status --live``, ``plan``,
the TUI's history pane, the lab's timeline and MCP: the store opened read-only, the figures
computed by ``core``, with what the recorder's saved tracker still has in progress (requests
still queued, nodes still held) counted as of now. Also the tracker's JSON form, which the
recorder saves with every batch (``runtime/history``).

Every read filters by place: ``zone``, ``accelerator``, ``mode`` and ``api`` (the API that
holds the requests: ``tpu``, ``compute``).

May: open the store read-only. May not: write it, or decide anything for the controller.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from reconciler.adapters.history_db import open_readonly
from reconciler.core.capacity import (
    ExpectedWait,
    PlaceStats,
    WaitHints,
    rank,
    wait_hints,
    waiting_hints,
)
from reconciler.core.capacity_chart import Timeline, merged, narrowed, open_timeline
from reconciler.core.capacity_report import history_doc, recommend_doc
from reconciler.core.history import RequestTrack, Tracker, WorkloadAttempt, open_samples
from reconciler.errors import HistoryUnreadable
from reconciler.model import names
from reconciler.model.capacity import DEFAULT_API
from reconciler.model.desired import Desired
from reconciler.model.observed import Observation
from reconciler.model.tpu_zones import zones_for
from reconciler.model.vocabulary import DEFAULT_MODE
from reconciler.runtime.backends import word_state

log = logging.getLogger("reconciler.runtime.history")


def tracker_to_json(tracker: Tracker) -> str:
    return json.dumps(
        {
            "tracks": [[z, s, asdict(t)] for (z, s), t in tracker.tracks.items()],
            "failures": tracker.failures_seen,
        },
        separators=(",", ":"),
    )


def tracker_from_json(text: str) -> Tracker:
    try:
        data = json.loads(text)
        # a track saved before tracks kept their neutral state gets it from its word, read
        # with its API's words (one saved before tracks kept their API: the TPU API's); a
        # saved one wins
        tracks = {
            (z, s): RequestTrack(
                **{"request": word_state(f["state"], f.get("api") or DEFAULT_API).value, **f}
            )
            for z, s, f in data["tracks"]
        }
        failures = {str(k): float(v) for k, v in data["failures"].items()}
    except (ValueError, TypeError, KeyError):
        return Tracker()
    return Tracker(tracks=tracks, failures_seen=failures)


def summary_stats(path: Path, *, now: float | None = None, **filters: Any) -> list[PlaceStats]:
    """Place statistics from the store at ``path`` (empty when there is none), counting what
    the recorder's saved tracker still has in progress at ``now`` (default: the clock): the
    requests still queued and the nodes still held. An unreadable store raises
    ``HistoryUnreadable``."""
    db = open_readonly(path)
    if db is None:
        return []
    try:
        saved = db.read_meta("tracker")
        tracks = tracker_from_json(saved).tracks if saved else {}
        moment = time.time() if now is None else now
        open_ = open_samples(tracks, moment, since=filters.get("since"))
        return db.stats(open_=open_, **filters)
    finally:
        db.close()


def chart_timeline(path: Path, *, now: float, **filters: Any) -> Timeline:
    """The store's waits and holdings over time (``core.capacity_chart``), with what the
    recorder's saved tracker still has in progress at ``now`` (requests still queued, nodes
    still held); empty when there is no store. An unreadable store raises
    ``HistoryUnreadable``."""
    db = open_readonly(path)
    if db is None:
        return Timeline()
    try:
        saved = db.read_meta("tracker")
        stored = db.timeline(**filters)
    finally:
        db.close()
    tracks = tracker_from_json(saved).tracks if saved else {}
    live = narrowed(open_timeline(tracks, now), **filters)
    return merged(stored, live)


def history_document(
    path: Path,
    *,
    zone: str | None = None,
    accelerator: str | None = None,
    mode: str | None = None,
    since: float | None = None,
    api: str | None = None,
) -> dict[str, Any]:
    """``tpu-reconciler.history.v1`` for the store at ``path`` (CLI ``history``, MCP)."""
    filters: dict[str, Any] = {"zone": zone, "accelerator": accelerator, "mode": mode, "api": api}
    stats = summary_stats(path, since=since, **filters)
    attempts = workload_attempts(path, since=since, zone=zone, accelerator=accelerator)
    return history_doc(stats, since=since, attempts=attempts, **filters)


def workload_attempts(
    path: Path,
    *,
    since: float | None = None,
    zone: str | None = None,
    accelerator: str | None = None,
) -> list[WorkloadAttempt]:
    """The workload attempts in the store at ``path``, newest first (none without a store).
    An unreadable store raises ``HistoryUnreadable``."""
    db = open_readonly(path)
    if db is None:
        return []
    try:
        return db.attempts(since=since, zone=zone, accelerator=accelerator)
    finally:
        db.close()


def recommend_document(
    path: Path,
    accelerator: str,
    *,
    mode: str = DEFAULT_MODE,
    count: int = 3,
    since: float | None = None,
    group: str | None = None,
    now: float | None = None,
    api: str | None = None,
) -> dict[str, Any]:
    """``tpu-reconciler.recommend.v1`` for the store at ``path`` (CLI ``recommend``, MCP);
    ``now`` as for ``summary_stats``; ``api``: only that API's places (None: both)."""
    stats = summary_stats(path, since=since, accelerator=accelerator, mode=mode, api=api, now=now)
    picks = rank(stats, accelerator, mode, count=count, api=api)
    used: dict[str, int] = {}  # a zone ranked on two APIs gets two candidates
    slot_names = []
    for p in picks:
        code = names.zone_code(p.zone)
        used[code] = used.get(code, 0) + 1
        slot_names.append(names.slot_name(mode, accelerator, code, used[code]))
    return recommend_doc(
        stats,
        accelerator,
        mode,
        count=count,
        group=group or f"{accelerator.replace('-', '')}-race",
        slot_names=slot_names,
        catalogue=zones_for(accelerator) or (),
        api=api,
    )


def store_hints(path: Path) -> WaitHints:
    """The place -> (p50, samples) summary from the store at ``path`` (``status --live``)."""
    try:
        return wait_hints(summary_stats(path))
    except HistoryUnreadable as e:  # a hint is a nicety: plan and status go on without it
        log.warning("%s", e)
        return {}


def expected_waits(path: Path, desired: Desired, observation: Observation) -> list[ExpectedWait]:
    """What ``plan`` shows for waiting slots: the store is read here, and only the small pure
    summary (place -> p50, samples) goes on to ``core.capacity``."""
    return waiting_hints(desired, observation, store_hints(path))
