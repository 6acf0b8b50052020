"""Capacity history end to end: the real controller against the emulator with scripted
capacity, the real SQLite store, and the real CLI reading it (``history``, ``recommend``,
``recommend --apply``)."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.statedir import StateDir
from reconciler.emulator import Emulator
from reconciler.emulator._scenario import Scenario
from reconciler.runtime.backends import make_cloud
from reconciler.runtime.controller import Controller
from reconciler.runtime.desired_loader import DesiredLoader
from reconciler.runtime.events import EventLog
from reconciler.runtime.history import HistoryRecorder
from tests.fixtures.controller import desired_text

pytestmark = pytest.mark.integration

FAST, SLOW, PREEMPT = "europe-west4-a", "us-east5-b", "us-east1-d"
ROOT = Path(__file__).resolve().parents[2]
QUEUED = ("CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES")

# Emulated seconds (speed 20: one real second is 20 of these). FAST serves at once; SLOW has
# no capacity until 20s; PREEMPT serves at 45s, is preempted at 60s and then has none left.
SCENARIO = f"""
capacity:
  - {{zone: {SLOW}, accelerator: v6e-8, count: 0}}
  - {{at: 20s, zone: {SLOW}, accelerator: v6e-8, count: 1}}
  - {{zone: {PREEMPT}, accelerator: v6e-8, count: 0}}
  - {{at: 45s, zone: {PREEMPT}, accelerator: v6e-8, count: 1}}
  - {{at: 61s, zone: {PREEMPT}, accelerator: v6e-8, count: 0}}
preemptions:
  - {{at: 60s, zone: {PREEMPT}, node: spot-v6e8-ue1d-1}}
"""

SLOTS = f"""slots:
  - {{name: spot-v6e8-ew4a-1, zone: {FAST}, accelerator: v6e-8, want: held}}
  - {{name: spot-v6e8-ue5b-1, zone: {SLOW}, accelerator: v6e-8, want: held}}
  - {{name: spot-v6e8-ue1d-1, zone: {PREEMPT}, accelerator: v6e-8, want: held}}
"""


CANDIDATES = ((FAST, "spot-v6e8-ew4a-1"), (SLOW, "spot-v6e8-ue5b-1"), (PREEMPT, "spot-v6e8-ue1d-1"))


def _env(emu: Emulator, tmp_path: Path) -> dict[str, str]:
    token = tmp_path / "token"
    token.write_text("test-token\n")
    return {
        **os.environ,
        "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"),
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU": emu.url,
        "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": str(token),
        "CLOUDSDK_CORE_PROJECT": "test-project",
        "PYTHONPATH": str(ROOT),
    }


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", "--file", str(tmp_path / "desired.yaml"),
         "--state-dir", str(tmp_path / "state"), *args],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


async def run_until(
    controller: Controller, check: Callable[[], bool], timeout: float = 30.0
) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    try:
        deadline = asyncio.get_running_loop().time() + timeout
        while not check():
            assert asyncio.get_running_loop().time() < deadline, "timed out"
            assert not task.done(), task
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=20)


def recording_controller(
    path: Path, state: StateDir, events: EventLog, env: dict[str, str]
) -> Controller:
    """The production controller with the history recorder on (as ``run`` builds it)."""
    return Controller(
        store=DesiredLoader(path, env),
        state=state,
        cloud_factory=lambda d: make_cloud(d, env),
        events=events,
        history=HistoryRecorder(state, events, batch_seconds=0.2),
    )


def rows(db: Path, sql: str) -> list[Any]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


async def test_scripted_capacity_gives_history_and_recommend_ranks_zones(
    make_emulator: Callable[..., Emulator], tmp_path: Path
) -> None:
    emu = make_emulator(Scenario.from_yaml(SCENARIO), speed=0)  # still until all are queued
    env = _env(emu, tmp_path)
    path = tmp_path / "desired.yaml"
    path.write_text(desired_text(SLOTS))
    state = StateDir(tmp_path / "state").ensure()
    events = EventLog(state)
    controller = recording_controller(path, state, events, env)

    def preempted_and_back_in_queue() -> bool:
        """As the controller last saw it (its snapshot), not as the emulator has it now."""
        try:
            slots = json.loads(state.status.read_text())["slots"]
        except (OSError, ValueError, KeyError):
            return False
        seen = {s["name"]: s["state"] for s in slots}
        if emu.now() == 0 and all(emu.queued_resource(z, n) for z, n in CANDIDATES):
            emu.set_speed(20.0)  # the three requests start the race at the same moment
        return emu.now() > 70 and seen.get("spot-v6e8-ue1d-1") in QUEUED

    await run_until(controller, preempted_and_back_in_queue)

    db = state.history
    names = dict(rows(db, "SELECT id, name FROM names"))
    waits = {
        names[z]: (to_active, to_prov)
        for z, to_active, to_prov in rows(db, "SELECT zone, t, to_prov FROM waits WHERE served")
    }
    assert set(waits) == {FAST, SLOW, PREEMPT}
    assert waits[FAST][0] < waits[SLOW][0] < waits[PREEMPT][0]
    lifetimes = [(names[z], p) for z, p in rows(db, "SELECT zone, preempted FROM lifetimes")]
    assert lifetimes == [(PREEMPT, 1)]
    seen = [
        (names.get(b), names.get(a))
        for b, a in rows(db, f"SELECT before, after FROM transitions WHERE zone="
                             f"(SELECT id FROM names WHERE name='{PREEMPT}') ORDER BY rowid")
    ]  # fmt: skip
    assert ("PROVISIONING", "ACTIVE") in seen and ("ACTIVE", "SUSPENDED") in seen
    assert seen[-1][1] in QUEUED  # queued again after the preempted QR was deleted
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"

    shown = json.loads(cli(tmp_path, "history", "--json", "--accelerator", "v6e-8").stdout)
    assert shown["schema_version"] == "tpu-reconciler.history.v1"
    by_zone = {p["zone"]: p for p in shown["places"]}
    assert by_zone[PREEMPT]["preemptions"] == 1
    assert by_zone[PREEMPT]["median_lifetime_seconds"] > 0

    ranked = json.loads(cli(tmp_path, "recommend", "v6e-8", "--json").stdout)
    assert ranked["schema_version"] == "tpu-reconciler.recommend.v1"
    assert [z["zone"] for z in ranked["zones"]] == [FAST, SLOW, PREEMPT]
    assert all(z["samples"] == 1 for z in ranked["zones"])

    csv_out = cli(tmp_path, "history", "--export", "csv", "--zone", FAST).stdout.splitlines()
    assert csv_out[0].startswith("time,slot,zone") and len(csv_out) >= 4
    assert all(f",{FAST}," in line for line in csv_out[1:])

    # --apply writes the race group through the intent engine: a validated, comment-keeping edit.
    path.write_text("# my TPUs\n" + path.read_text())
    done = cli(tmp_path, "recommend", "v6e-8", "--count", "2", "--apply", "v6e-race")
    assert done.returncode == 0, done.stderr
    text = path.read_text()
    assert text.startswith("# my TPUs\n") and "name: v6e-race" in text
    valid = cli(tmp_path, "validate")
    assert valid.returncode == 0, valid.stderr
    from reconciler.model.load import parse_desired

    desired = parse_desired(text, "desired.yaml", env)
    (group,) = desired.race_groups
    assert [desired.slot(s).zone for s in group.slots] == [FAST, SLOW]  # type: ignore[union-attr]
    # What it printed names the slots it wrote (where the file's name was taken, index 2),
    # and no snippet to paste that would name others.
    assert group.slots[0] == "spot-v6e8-ew4a-2", group.slots
    assert f"from {list(group.slots)}" in done.stdout
    assert all(f"added slot {s!r}" in done.stdout for s in group.slots), done.stdout
    assert "to paste" not in done.stdout and "- spot-v6e8-ew4a-1" not in done.stdout


async def test_first_start_fills_from_the_event_log_once(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state").ensure()
    events = EventLog(state)
    for before, after in ((None, "ACCEPTED"), ("ACCEPTED", "ACTIVE"), ("ACTIVE", "SUSPENDED")):
        events.emit("qr.state", slot="a", zone=FAST, before=before, after=after)
    events.emit("action.failed", slot="b", action="create",
                error="PERMISSION_DENIED: no permission to submit into this queue")  # fmt: skip
    from tests.support.worlds import desired, slot

    want = desired(slot("a", zone=FAST, accelerator="v6e-8"), slot("b", zone=SLOW,
                   accelerator="v6e-8"))  # fmt: skip
    from reconciler.model.observed import Observation

    for _ in range(2):  # a second start must not import the past again
        recorder = HistoryRecorder(state, events)
        recorder.start()
        from reconciler.core.memory import Memory

        recorder.observe(want, Observation(zones=frozenset({FAST, SLOW})), Memory(), 1e10)
        assert recorder.flush()
        recorder.close()
    db = state.history
    assert rows(db, "SELECT count(*) FROM transitions")[0][0] == 4  # 3 replayed + gone
    assert rows(db, "SELECT count(*) FROM lifetimes")[0][0] == 1
    assert rows(db, "SELECT code, closed FROM refusals") == [(7, 1)]
    shown = json.loads(cli(tmp_path, "history", "--json").stdout)
    closed = {p["zone"]: p["queue_closed"] for p in shown["places"]}
    assert closed[SLOW] is True
    ranked = json.loads(cli(tmp_path, "recommend", "v6e-8", "--json").stdout)
    assert ranked["closed"] == [SLOW] and SLOW not in [z["zone"] for z in ranked["zones"]]


WRITER = """
import sys
from pathlib import Path
from reconciler.adapters.history_db import HistoryDB
from reconciler.core.history import Transition

db = HistoryDB(Path(sys.argv[1]))
batch = int(sys.argv[2])
n = 0
while True:
    n += 1
    db.write(Transition(f"s{i % 50}", "europe-west4-a", "v6e-8", "spot", "ACCEPTED", "ACTIVE",
                        n * 1000.0 + i, None, "") for i in range(batch))
    print(n, flush=True)
"""


def test_kill_9_mid_write_leaves_a_sound_database_losing_at_most_one_batch(
    tmp_path: Path,
) -> None:
    db = tmp_path / "history.sqlite"
    batch = 2000
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), str(batch)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.stdout is not None
    committed = 0
    while committed < 5:
        committed = int(proc.stdout.readline())
    proc.kill()  # SIGKILL: no cleanup, most likely inside the next batch's transaction
    proc.wait()
    for line in proc.stdout.read().split():  # what it acknowledged before it died
        committed = max(committed, int(line))
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        count = conn.execute("SELECT count(*) FROM transitions").fetchone()[0]
    assert count % batch == 0  # whole batches only: never half of one
    # every acknowledged batch is kept; at most the one being written (unacknowledged) is lost
    assert committed * batch <= count <= (committed + 1) * batch


async def test_corrupt_store_is_moved_aside_and_rebuilt_while_the_controller_runs(
    make_emulator: Callable[..., Emulator], tmp_path: Path
) -> None:
    emu = make_emulator(speed=20.0)
    env = _env(emu, tmp_path)
    path = tmp_path / "desired.yaml"
    path.write_text(desired_text("\n".join(SLOTS.splitlines()[:2]) + "\n"))
    state = StateDir(tmp_path / "state").ensure()
    events = EventLog(state)
    events.emit("qr.state", slot="old", zone=SLOW, before=None, after="ACCEPTED")
    events.emit("qr.state", slot="old", zone=SLOW, before="ACCEPTED", after="ACTIVE")
    state.history.write_bytes(b"SQLite format 3\x00" + b"\xff" * 8000)  # a torn, bad header
    controller = recording_controller(path, state, events, env)

    def active() -> bool:
        qr = emu.queued_resource(FAST, "spot-v6e8-ew4a-1") or {}
        return bool(qr.get("state", {}).get("state") == "ACTIVE")

    await run_until(controller, active)
    aside = list(state.root.glob("history.sqlite.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes().startswith(b"SQLite format 3")
    kinds = [json.loads(line)["kind"] for line in state.events.read_text().splitlines()]
    assert "history.rebuilt" in kinds and "history.filled" in kinds
    with sqlite3.connect(state.history) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        slots = {n for (n,) in conn.execute(
            "SELECT name FROM names WHERE id IN (SELECT slot FROM transitions)")}  # fmt: skip
    assert slots == {"old", "spot-v6e8-ew4a-1"}  # the past from the log, then live passes


def test_cli_reports_an_unreadable_store_and_validate_warns_on_unknown_zones(
    tmp_path: Path,
) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "history.sqlite").write_bytes(b"garbage" * 500)
    (tmp_path / "desired.yaml").write_text(
        "project: test-project\nslots:\n"
        "  - {name: a, zone: europe-west4-a, accelerator: v6e-8, want: held}\n"
        "  - {name: b, zone: asia-east1-c, accelerator: v6e-8, want: held}\n"
    )
    for verb in (("history",), ("recommend", "v6e-8")):
        done = cli(tmp_path, *verb)
        assert done.returncode == 1 and "capacity history" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    valid = cli(tmp_path, "validate")
    assert valid.returncode == 0, valid.stderr  # a warning, never an error
    assert "slot 'b': zone asia-east1-c is not known to offer v6e" in valid.stderr
    assert "'a'" not in valid.stderr
