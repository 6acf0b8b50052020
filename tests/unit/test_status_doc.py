"""build_status: the document (docs/status-snapshot.md) that assistants and `status` read to
answer "what do I hold right now?" without calling the cloud."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core.memory import Memory, observe, record_latency, record_setup
from reconciler.core.plan import Plan, plan
from reconciler.core.render import format_status
from reconciler.core.status import STATUS_SCHEMA, build_status
from reconciler.model.capacity import ErrorInfo
from reconciler.model.desired import Desired
from reconciler.model.observed import Observation
from reconciler.model.status import from_json, to_json
from tests.support.worlds import (
    Z1,
    Z2,
    Z3,
    active,
    desired,
    failed,
    group,
    qr,
    setup,
    slot,
    world,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "status-snapshot.md"
NOW = 1_796_032_800.0  # 2026-11-30T10:00:00Z
UNSEEN = "asia-northeast1-b"


def documented_example() -> dict[str, Any]:
    block = re.search(r"```json\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert block, "docs/status-snapshot.md lost its example"
    example: dict[str, Any] = json.loads(block.group(1))
    return example


def scene() -> tuple[Desired, Observation, Memory, Plan]:
    want = desired(
        slot("held-v4", flags=setup(bootstrap=True, tailscale=True, tmux=True)),
        slot("queued-v4"),
        slot("dead-v4"),
        slot("gone-v4", want="released"),
        slot("c-ew4a", Z2, accelerator="v6e-8"),
        slot("c-use1d", Z3, accelerator="v6e-8"),
        slot("far", UNSEEN),
        groups=[group("any-v6e-8", "c-ew4a", "c-use1d")],
    )
    seen = world(
        active("held-v4", uid="42"),
        qr("dead-v4", state=QRState.FAILED, error=ErrorInfo(8, "no capacity")),
        qr("c-ew4a", Z2, QRState.PROVISIONING, accelerator="v6e-8"),
        qr("c-use1d", Z3, QRState.WAITING_FOR_RESOURCES, accelerator="v6e-8"),
        qr("stray", Z3, QRState.ACTIVE, labelled=False),
        unreachable=[UNSEEN],
    )
    memory = observe(Memory(), want, seen, now=NOW - 600)
    memory = record_setup(memory, "held-v4", "bootstrap", "held-v4@42", 0)
    p = plan(want, seen, memory, NOW)
    return want, seen, memory, p


def status(**overrides: Any) -> dict[str, Any]:
    want, seen, memory, p = scene()
    args: dict[str, Any] = {
        "desired": want,
        "desired_file": "/home/me/desired.yaml",
        "errors": [],
        "observation": seen,
        "observed_at": NOW - 2,
        "memory": memory,
        "plan": p,
        "now": NOW,
        "backend": "rest",
        "tmux_windows": ["tpu-usc2b:held-v4"],
        "tmux_orphans": ["tpu-usc2b:old"],
    }
    return to_json(build_status(**(args | overrides)))


def rows(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {(r["name"] if r["managed"] else f"unmanaged:{r['name']}"): r for r in doc["slots"]}


def _keys_cover(built: Any, documented: Any, where: str) -> None:
    if isinstance(documented, dict):
        assert isinstance(built, dict), where
        for key, value in documented.items():
            assert key in built, f"{where}.{key} is documented but missing"
            _keys_cover(built[key], value, f"{where}.{key}")
    elif isinstance(documented, list) and documented and isinstance(documented[0], dict):
        assert built, f"{where}: expected items to compare"
        for item in built:
            _keys_cover(item, documented[0], f"{where}[]")


def test_every_documented_field_is_there() -> None:
    doc = status()
    example = documented_example()
    _keys_cover(doc, {k: v for k, v in example.items() if k != "slots"}, "$")
    for row in doc["slots"]:
        if row["managed"]:
            _keys_cover(row, example["slots"][0], f"slot {row['name']}")
        else:
            assert set(example["slots"][0]) <= set(row)


def test_it_is_json_with_versioned_schema_and_utc_times() -> None:
    doc = json.loads(json.dumps(status()))
    assert doc["schema_version"] == STATUS_SCHEMA
    assert (doc["generated_at"], doc["observed_at"]) == (
        "2026-11-30T10:00:00Z",
        "2026-11-30T09:59:58Z",
    )
    assert doc["backend"] == "rest"
    assert doc["unreachable_zones"] == [UNSEEN]


def test_a_running_slot_shows_node_ips_setup_and_window() -> None:
    r = rows(status())["held-v4"]
    assert (r["want"], r["managed"], r["state"], r["node_state"]) == (
        "held",
        True,
        "ACTIVE",
        "READY",
    )
    assert r["ips"] == ["10.0.0.2"] and r["health"] == "HEALTHY"
    assert r["state_since"] == "2026-11-30T09:50:00Z"
    assert r["setup"] == {
        "bootstrap": "done",
        "tailscale": "pending",
        "generation": 0,
        "detail": None,
    }
    assert r["tmux"] == {"target": "tpu-usc2b:held-v4", "open": True}


def test_a_slot_with_no_qr_is_not_queued_and_one_in_an_unseen_zone_is_unknown() -> None:
    r = rows(status())
    assert (r["queued-v4"]["state"], r["queued-v4"]["want"]) == ("NOT_QUEUED", "held")
    assert r["queued-v4"]["ips"] == [] and r["queued-v4"]["node_state"] is None
    assert r["far"]["state"] == "UNKNOWN"
    assert r["gone-v4"]["want"] == "released"


def test_setup_waits_for_a_node() -> None:
    r = rows(status())["queued-v4"]
    assert r["setup"]["bootstrap"] == "off"
    want = desired(slot("a", flags=setup(bootstrap=True)))
    doc = status(desired=want, observation=world(qr("a")), plan=plan(want, world(qr("a"))))
    assert rows(doc)["a"]["setup"]["bootstrap"] == "waiting"


def test_a_failed_setup_step_is_shown_with_its_error() -> None:
    _, _, memory, p = scene()
    (join,) = [a for a in p.actions if a.slot == "held-v4" and a.kind.value == "tailscale"]
    memory = failed(join, memory=memory, now=NOW, message="tailscale up: auth key expired")
    r = rows(status(memory=memory))["held-v4"]
    assert r["setup"]["tailscale"] == "failed"
    assert r["setup"]["detail"] == "tailscale up: auth key expired"


def test_the_clouds_error_is_shown() -> None:
    assert rows(status())["dead-v4"]["last_error"] == "code 8: no capacity"


def test_race_candidates_show_the_groups_decision() -> None:
    doc = status()
    r = rows(doc)
    assert (r["c-ew4a"]["want"], r["c-ew4a"]["race_group"]) == ("held", "any-v6e-8")
    assert (r["c-use1d"]["want"], r["c-use1d"]["race_group"]) == ("released", "any-v6e-8")
    assert doc["race_groups"] == [
        {
            "name": "any-v6e-8",
            "count": 1,
            "winners": ["c-ew4a"],
            "candidates": ["c-ew4a", "c-use1d"],
            "open": False,
        }
    ]


def test_unmanaged_qrs_are_listed_with_want_null() -> None:
    r = rows(status())["unmanaged:stray"]
    assert (r["want"], r["managed"], r["labelled"], r["zone"], r["state"]) == (
        None,
        False,
        False,
        Z3,
        "ACTIVE",
    )
    assert (r["setup"], r["tmux"], r["race_group"]) == (None, None, None)


def test_the_pending_plan_is_included() -> None:
    doc = status()
    assert doc["plan"]["summary"] == "Plan: 2 to add, 2 to change, 2 to destroy."
    items = {(a["symbol"], a["kind"], a["slot"]) for a in doc["plan"]["actions"]}
    assert items == {
        ("+", "create", "queued-v4"),
        ("-/+", "replace", "dead-v4"),
        ("-", "delete", "c-use1d"),
        ("~", "tailscale", "held-v4"),
        ("~", "tmux", "held-v4"),
    }
    assert all(
        set(a) == {"symbol", "kind", "slot", "zone", "reason", "destructive"}
        for a in doc["plan"]["actions"]
    )
    assert doc["tmux"] == {"windows": ["tpu-usc2b:held-v4"], "orphans": ["tpu-usc2b:old"]}


def test_an_invalid_file_is_reported_and_nothing_is_planned() -> None:
    doc = status(
        desired=None,
        errors=["desired.yaml:3:11: invalid name 'A'"],
        plan=plan(None, world(qr("x", Z1))),
    )
    assert doc["desired"] == {
        "file": "/home/me/desired.yaml",
        "valid": False,
        "errors": ["desired.yaml:3:11: invalid name 'A'"],
        "digest": None,
    }
    assert doc["plan"]["actions"] == [] and doc["plan"]["summary"] == "No changes."
    assert [r["managed"] for r in doc["slots"]] == [False]


def test_status_text_shows_invalid_intent_races_and_orphans() -> None:
    doc = status(errors=["desired.yaml:3:11: invalid name 'A'"])
    text = format_status(from_json(doc), now=NOW)
    assert "INVALID — last valid intent in force" in text
    assert "  desired.yaml:3:11: invalid name 'A'" in text
    assert "race any-v6e-8: 1/1 won (c-ew4a)" in text
    assert "tmux orphans (slot not ACTIVE; left open): tpu-usc2b:old" in text
    assert "unmanaged (not in file)" in text
    assert f"unreachable zones: {UNSEEN}" in text
    assert text.rstrip().endswith("next: Plan: 2 to add, 2 to change, 2 to destroy.")


def test_each_row_shows_its_zones_round_trip_where_something_is_held_there() -> None:
    _, _, memory, _ = scene()
    memory = record_latency(memory, Z1, 141.26, NOW - 30)  # held-v4 is ACTIVE in Z1
    memory = record_latency(memory, Z3, 80.0, NOW - 30)  # only a stray QR is ACTIVE there
    r = rows(status(memory=memory))
    assert r["held-v4"]["latency_ms"] == 141.3
    assert r["queued-v4"]["latency_ms"] == 141.3  # its zone's value, though not held itself
    assert "latency_ms" not in r["c-use1d"] and "latency_ms" not in r["unmanaged:stray"]
    assert "latency_ms" not in r["c-ew4a"]  # never measured
    assert all("latency_ms" not in row for row in status()["slots"])  # none measured: v1 as is
    text = format_status(from_json(status(memory=memory)), now=NOW)
    header, *lines = [
        line for line in text.splitlines() if line.startswith(("SLOT", "held-v4", "c-use1d"))
    ]
    assert header.split()[:3] == ["SLOT", "ZONE", "LATENCY"]
    assert lines[0].split()[:3] == ["held-v4", Z1, "~141ms"]
    assert lines[1].split()[:3] == ["c-use1d", Z3, "-"]


def test_status_text_without_any_valid_intent_says_nothing_acts() -> None:
    doc = status(desired=None, plan=None, errors=["desired.yaml:1:1: file not found"])
    text = format_status(from_json(doc), now=NOW)
    assert "INVALID — no valid intent yet: nothing acts" in text
    assert "last valid intent in force" not in text
