"""A fixed week of capacity history, written through the project's own store API.

``fill_history(path)`` replays seeded looks (queued, PROVISIONING, ACTIVE, preempted,
deleted, ...) of a few slots in three zones through ``core.history.Tracker`` and writes the
records it returns with ``HistoryDB.write``, the recorder's saved tracker included (so a slot
still queued and a node still held at the end count as in progress). The same seed gives the
same file contents, so a picture of it can be a golden.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Final

from reconciler.adapters.history_db import HistoryDB
from reconciler.adapters.tpu_api_parse import request_state
from reconciler.core.history import Seen, Tracker
from reconciler.runtime.history import _tracker_to_json

#: 2026-02-23T00:00:00Z: the week runs over the end of February (28 -> March 1 in 2026).
START: Final = 1_771_804_800.0
DAYS: Final = 7
UNTIL: Final = START + DAYS * 86400
UNTIL_TEXT: Final = "2026-03-02T00:00:00Z"
ZONES: Final = (
    ("europe-west4-a", "v6e-8", 0.6),  # zone, accelerator, chance a request is served soon
    ("us-east5-b", "v6e-8", 0.3),
    ("us-central2-b", "v4-8", 0.8),
)


def fill_history(path: Path, *, seed: int = 7) -> int:
    """Write the week into the store at ``path``; returns how many records."""
    rng = random.Random(seed)
    tracker = Tracker()
    records = []
    slots = [
        (f"spot-{acc.replace('-', '')}-{zone[:2]}{zone[-1]}-{k}", zone, acc, serve)
        for zone, acc, serve in ZONES
        for k in (1, 2)
    ]
    state = dict.fromkeys((name for name, *_ in slots), None)
    t = START
    while t + 5400 < UNTIL - 3600:  # the last look an hour before ``UNTIL`` at the latest
        t += rng.uniform(600, 5400)
        name, zone, acc, serve = rng.choice(slots)
        before = state[name]
        if before is None:
            after: str | None = "WAITING_FOR_RESOURCES"
        elif before == "WAITING_FOR_RESOURCES":
            gave_up = rng.choice(["WAITING_FOR_RESOURCES", None])
            after = "ACTIVE" if rng.random() < serve else gave_up
        elif before == "ACTIVE":
            after = rng.choice(["ACTIVE", "ACTIVE", "SUSPENDED", None])
        else:  # SUSPENDED: deleted, then queued again later
            after = None
        if after == before:
            continue
        state[name] = after
        phase = request_state(after) if after is not None else None
        seen = Seen(slot=name, zone=zone, state=after, accelerator=acc, mode="spot", request=phase)
        records += tracker.step([seen], t)
    # The last slot ends the week holding a node (in progress: counted up to ``until``).
    name, zone, acc, _ = slots[-1]
    for after in ("WAITING_FOR_RESOURCES", "ACTIVE") if state[name] != "ACTIVE" else ():
        if state[name] != after:
            t += 600
            state[name] = after
            look = Seen(name, zone, after, acc, "spot", request=request_state(after))
            records += tracker.step([look], t)
    db = HistoryDB(path)
    try:
        db.write(records, meta={"tracker": _tracker_to_json(tracker), "backfilled": str(round(t))})
    finally:
        db.close()
    return len(records)
