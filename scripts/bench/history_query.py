"""Benchmark: the history store at 1,000,000 transitions — query time and bytes on disk.

A store is filled the way the controller fills it: the tracker (``core.history.Tracker``)
walks synthetic queued resources through their lifecycle (CREATING, ACCEPTED, WAITING, then
PROVISIONING, ACTIVE, SUSPENDED, DELETING, gone; or deleted while waiting) over 12 places
(4 zones x 3 accelerators, spot), and the records are written in batches of 1,000 by
``HistoryDB.write``, until ``--transitions`` transitions are stored. Then:

- ``history`` computation: ``HistoryDB.stats()`` (what ``history`` runs) over the
  whole store, in process (median of 5; target <= 300 ms);
- ``tpu-reconciler history --json`` end to end (interpreter start included), median of 3;
- bytes per transition: the file size (after a checkpoint) over the transitions stored,
  the other tables (waits, lifetimes) and the names included (target <= 200).

    python scripts/bench/history_query.py [--transitions 1000000] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, ensure_repo_on_path, median, print_header

ensure_repo_on_path()

from reconciler.adapters.history_db import HistoryDB  # noqa: E402
from reconciler.adapters.tpu_api_parse import request_state  # noqa: E402
from reconciler.core.history import Record, Seen, Tracker, Transition  # noqa: E402

ZONES = ("us-central2-b", "europe-west4-a", "us-east1-d", "us-east5-a")
ACCELERATORS = ("v4-8", "v6e-8", "v5litepod-16")
SERVED = ("CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING", "ACTIVE",
          "SUSPENDED", "DELETING", None)  # fmt: skip
GAVE_UP = ("CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES", "DELETING", None)
TARGET_MS = 300.0
TARGET_BYTES = 200.0


def fill(db: HistoryDB, transitions: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    tracker = Tracker()
    written = 0
    batch: list[Record] = []
    now = 1.7e9
    serial = 0
    while written < transitions:
        serial += 1
        zone, acc = rng.choice(ZONES), rng.choice(ACCELERATORS)
        slot = f"spot-{acc.replace('-', '')}-{zone[:6]}-{serial % 500}"
        path = SERVED if rng.random() < 0.8 else GAVE_UP
        for state in path:
            now += rng.expovariate(1 / 600.0)
            look = Seen(slot, zone, state, acc, "spot", request=request_state(state))
            records = tracker.step([look], now)
            written += sum(isinstance(r, Transition) for r in records)
            batch += records
        if len(batch) >= 1000:
            db.write(batch)
            batch = []
    db.write(batch)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--transitions", type=int, default=1_000_000)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--keep", type=Path, default=None, help="fill (or reuse) this directory")
    args = parser.parse_args()
    print_header(f"history store: {args.transitions:,} transitions")
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-history-query-"))
    state = root / "state"
    state.mkdir(parents=True, exist_ok=True)
    path = state / "history.sqlite"
    reuse = path.exists()
    db = HistoryDB(path)
    t0 = time.perf_counter()
    stored = db.count("transitions") if reuse else fill(db, args.transitions)
    fill_s = time.perf_counter() - t0
    db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = os.path.getsize(path)
    counts = {t: db.count(t) for t in ("transitions", "waits", "lifetimes")}
    db.close()

    reader = HistoryDB(path, readonly=True)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        places = reader.stats()
        times.append(time.perf_counter() - t0)
    reader.close()
    query_ms = median(times) * 1000

    (root / "desired.yaml").write_text("project: p\nslots: []\n")
    cli = [sys.executable, "-m", "reconciler", "--file", str(root / "desired.yaml"),
           "--state-dir", str(state), "history", "--json"]  # fmt: skip
    walls = []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run(cli, check=True, capture_output=True, cwd=REPO)
        walls.append(time.perf_counter() - t0)
    per = size / stored
    print(f"  stored: {stored:,} transitions, {counts['waits']:,} waits, "
          f"{counts['lifetimes']:,} lifetimes, {len(places)} places; "
          f"filled in {fill_s:.1f} s")  # fmt: skip
    ok_q, ok_b = query_ms <= TARGET_MS, per <= TARGET_BYTES
    print(f"  history computation (HistoryDB.stats), median of 5      {query_ms:8.1f} ms"
          f"  (target <= {TARGET_MS:g} ms)  {'PASS' if ok_q else 'MISS'}")  # fmt: skip
    print(
        f"  tpu-reconciler history --json, wall, median of 3        {median(walls) * 1000:8.1f} ms"
    )
    print(f"  file size                                               {size / 1e6:8.1f} MB")
    print(f"  bytes per transition (all tables)                       {per:8.1f} B"
          f"  (target <= {TARGET_BYTES:g} B)  {'PASS' if ok_b else 'MISS'}")  # fmt: skip
    if args.json:
        import json

        doc = {"query_ms": query_ms, "cli_ms": median(walls) * 1000,
               "bytes_per_transition": per, "stored": stored}  # fmt: skip
        args.json.write_text(json.dumps(doc))
    return 0 if ok_q and ok_b else 1


if __name__ == "__main__":
    sys.exit(main())
