"""The capacity history keeps the API as part of the place, through the real CLI in a
subprocess on a real SQLite store: ``history`` (its API column, ``--api``, ``--json``,
``--export csv``, ``--plot``), ``recommend`` (places on both APIs, ``--api``) and
``recommend --apply`` (a pick off the accelerator's default API is written with ``api:``,
and the file it writes validates); and a store written before rows said their API reads as
the TPU API's."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from reconciler.adapters.history_db import HistoryDB
from reconciler.adapters.history_sql import SCHEMA
from reconciler.adapters.statedir import StateDir
from reconciler.core.history import Lifetime, Transition, Wait
from reconciler.model.load import parse_desired
from tests.support.cli import Cli, clean_env

pytestmark = pytest.mark.integration

ZONE = "us-east5-b"
T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
FILE = (
    "project: my-project-1\n"
    "slots:\n  - {name: keep, zone: us-east5-b, accelerator: v6e-8, want: held}\n"
)


def records(api: str, wait: float) -> list[object]:
    """Three served waits of ``wait`` seconds in ZONE on ``api``, one preemption."""
    out: list[object] = [
        Wait(f"{api}-{i}", ZONE, "v6e-8", "spot", T0 + i, wait / 2, wait, wait, api)
        for i in range(3)
    ]
    out.append(Transition(f"{api}-0", ZONE, "v6e-8", "spot", None, "X", T0, api=api))
    out.append(Lifetime(f"{api}-0", ZONE, "v6e-8", "spot", T0 + wait, T0 + 7200, "preempted", api))
    return out


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    (tmp_path / "desired.yaml").write_text(FILE)
    state = StateDir(tmp_path / "state").ensure()
    db = HistoryDB(state.history)
    db.write(records("compute", 60.0) + records("tpu", 3600.0))  # type: ignore[arg-type]
    db.close()
    return Cli(
        "-f", str(tmp_path / "desired.yaml"), "--state-dir", str(state.root),
        env=clean_env(), cwd=tmp_path,
    )  # fmt: skip


def test_history_shows_and_filters_the_api(cli: Cli) -> None:
    table = cli("history").stdout.splitlines()
    assert table[0].split()[:4] == ["ZONE", "ACCELERATOR", "MODE", "API"]
    assert {line.split()[3] for line in table[1:3]} == {"tpu", "compute"}
    doc = json.loads(cli("history", "--api", "compute", "--json").stdout)
    assert doc["filters"]["api"] == "compute"
    assert [(p["zone"], p["api"], p["samples"]) for p in doc["places"]] == [(ZONE, "compute", 3)]
    csv_lines = cli("history", "--export", "csv", "--api", "compute").stdout.splitlines()
    assert csv_lines[0].endswith(",api") and csv_lines[1].endswith(",compute")
    assert len(csv_lines) == 2
    plot = cli("history", "--plot", "--width", "100", "--until", "2026-01-01T03:00:00Z").stdout
    assert f"{ZONE} (compute)" in plot, "the zone on Compute Engine is a series of its own"
    nothing = cli("history", "--api", "compute", "--zone", "europe-west4-a")
    assert "No capacity history matches" in nothing.stdout


def test_recommend_ranks_places_on_both_apis_and_apply_writes_the_api(
    cli: Cli, tmp_path: Path
) -> None:
    text = cli("recommend", "v6e-8").stdout
    lines = text.splitlines()
    assert f"1. {ZONE} (compute)" in lines[1] and f"2. {ZONE} " in lines[2], text
    doc = json.loads(cli("recommend", "v6e-8", "--json").stdout)
    assert [(z["zone"], z["api"]) for z in doc["zones"]] == [(ZONE, "compute"), (ZONE, "tpu")]
    assert "api: compute" in doc["race_group_yaml"]
    only = json.loads(cli("recommend", "v6e-8", "--api", "tpu", "--json").stdout)
    assert [z["api"] for z in only["zones"]] == ["tpu"] and only["api"] == "tpu"
    done = cli("recommend", "v6e-8", "--count", "2", "--apply", "both")
    assert done.returncode == 0, done.stderr
    written = (tmp_path / "desired.yaml").read_text()
    assert written.count("api: compute") == 1
    assert cli("validate").returncode == 0
    desired = parse_desired(written, "desired.yaml")
    (group,) = desired.race_groups
    picks = [desired.slot(n) for n in group.slots]
    assert [(s.zone, s.api) for s in picks if s] == [(ZONE, "compute"), (ZONE, "tpu")]
    refused = cli("recommend", "v6e-8", "--api", "gke")
    assert refused.returncode != 0 and "invalid choice" in refused.stderr


def test_a_store_from_before_rows_said_their_api_reads_as_the_tpu_apis(tmp_path: Path) -> None:
    (tmp_path / "desired.yaml").write_text(FILE)
    state = StateDir(tmp_path / "state").ensure()
    with sqlite3.connect(state.history) as conn:
        conn.executescript(SCHEMA)
        conn.execute("INSERT INTO meta VALUES ('schema_version', '2')")
        conn.executemany(
            "INSERT INTO names(id, name) VALUES (?, ?)",
            [(1, "a"), (2, ZONE), (3, "v6e-8"), (4, "spot")],
        )
        conn.execute("INSERT INTO waits VALUES (2, 3, 4, 1, 60000, ?, 1, 30000)", (T0 * 1000,))
    conn.close()
    cli = Cli(
        "-f", str(tmp_path / "desired.yaml"), "--state-dir", str(state.root),
        env=clean_env(), cwd=tmp_path,
    )  # fmt: skip
    doc = json.loads(cli("history", "--json").stdout)
    assert [(p["zone"], p["api"], p["samples"]) for p in doc["places"]] == [(ZONE, "tpu", 1)]
    assert json.loads(cli("history", "--api", "compute", "--json").stdout)["places"] == []
    with sqlite3.connect(state.history) as conn:  # read only: not migrated by a reader
        version = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    conn.close()
    assert version == ("2",)
