"""Which edit each TUI key asks for (``surfaces/tui/_keys``): pure, from a frame's values."""

from __future__ import annotations

import pytest

from reconciler.intent.edits import HoldMany, Setup
from reconciler.intent.edits_race import Race
from reconciler.intent.edits_workload import RestartWorkload
from reconciler.surfaces.tui import _keys
from reconciler.surfaces.tui._frame import (
    COLUMNS,
    Frame,
    RaceRow,
    SlotRow,
    fit_columns,
    format_latency,
)


def frame(*slots: SlotRow, races: tuple[RaceRow, ...] = ()) -> Frame:
    return Frame(file="desired.yaml", now=0.0, valid=True, slots=slots, races=races)


PARKED = SlotRow("parked", state="NOT_QUEUED", want="released")
ACTIVE = SlotRow("busy", state="ACTIVE", want="held")
CANDIDATE = SlotRow("cand", state="NOT_QUEUED", want="held", race_group="g")
GENERATED = SlotRow("gen", state="NOT_QUEUED", want="released", generated=True)
STRAY = SlotRow("stray", state="ACTIVE", managed=False)


def test_a_holds_only_unqueued_slots_of_their_own() -> None:
    proposal = _keys.hold_all(frame(PARKED, ACTIVE, CANDIDATE, GENERATED, STRAY))
    assert proposal.edit == HoldMany(("parked",)) and proposal.edit.kind == "hold_many"
    with pytest.raises(_keys.Refusal, match="already queued or held"):
        _keys.hold_all(frame(ACTIVE, CANDIDATE))


def test_release_asks_twice_and_a_running_tpu_also_asks_yes_no() -> None:
    idle = _keys.release(SlotRow("failed", state="FAILED", want="held"))
    assert idle.twice and idle.ask is None and idle.confirmed
    running = _keys.release(ACTIVE)
    assert running.twice and running.ask and "releasing deletes it" in running.ask
    again = _keys.release(PARKED)  # already released: nothing to confirm
    assert again.twice is None and not again.confirmed


def test_bucket_race_of_idle_slots_applies_at_once() -> None:
    spare = SlotRow("spare", accelerator="v4-8", state="NOT_QUEUED", want="released")
    idle = SlotRow("idle", accelerator="v4-8", state="NOT_QUEUED")
    first = _keys.race_bucket(frame(spare, idle), ["spare", "idle"])
    assert first.edit == Race(_keys.BUCKET_GROUP, ("spare", "idle"), count=1, exact=True)
    assert first.twice is None and first.ask is None and not first.confirmed
    with pytest.raises(_keys.Refusal, match="bucket is empty"):
        _keys.race_bucket(frame(PARKED), [])


def test_bucket_race_over_held_or_queued_slots_asks_twice_then_yes_no_naming_them() -> None:
    held = SlotRow("held-v48", accelerator="v4-8", state="ACTIVE", want="held")
    queued = SlotRow("queued-v48", accelerator="v4-8", state="WAITING_FOR_RESOURCES")
    spare = SlotRow("spare-v48", accelerator="v4-8", state="NOT_QUEUED", want="released")
    bucket = ["held-v48", "queued-v48", "spare-v48"]
    proposal = _keys.race_bucket(frame(held, queued, spare), bucket)
    assert proposal.confirmed and proposal.twice and "may cancel 2 held or queued" in proposal.twice
    assert proposal.ask is not None
    assert "held-v48 (ACTIVE, held)" in proposal.ask
    assert "queued-v48 (WAITING_FOR_RESOURCES)" in proposal.ask
    assert "spare-v48" not in proposal.ask.split("cancelled:")[1]  # nothing of it is at stake
    assert "held-v48 already runs: it wins at once" in proposal.ask


def test_bucket_race_of_mixed_accelerators_is_refused() -> None:
    v4 = SlotRow("a-v48", accelerator="v4-8", state="ACTIVE", want="held")
    v6 = SlotRow("b-v6e8", accelerator="v6e-8", state="WAITING_FOR_RESOURCES", want="held")
    mixed = r"mixes accelerator types \(v4-8: a-v48; v6e-8: b-v6e8\)"
    with pytest.raises(_keys.Refusal, match=mixed):
        _keys.race_bucket(frame(v4, v6), ["a-v48", "b-v6e8"])


def test_bucket_race_replacing_candidates_asks_twice() -> None:
    spare = SlotRow("spare", accelerator="v4-8", state="NOT_QUEUED", want="released")
    idle = SlotRow("idle", accelerator="v4-8", state="NOT_QUEUED", race_group=_keys.BUCKET_GROUP)
    group = RaceRow(_keys.BUCKET_GROUP, 1, (), ("spare", "idle"))
    smaller = _keys.race_bucket(frame(spare, idle, races=(group,)), ["spare"])
    assert smaller.twice and "idle are released" in smaller.twice and smaller.confirmed
    assert smaller.ask is None  # nothing held or queued: the second press is the confirmation


def test_w_on_a_slot_without_a_workload_is_refused_at_once() -> None:
    with pytest.raises(_keys.Refusal, match="busy has no workload: nothing to restart"):
        _keys.restart_workload(frame(ACTIVE), ACTIVE)
    running = SlotRow("runs", state="ACTIVE", want="held", workload="running")
    proposal = _keys.restart_workload(frame(running), running)
    assert proposal.twice and "press w again" in proposal.twice
    assert proposal.edit == RestartWorkload("runs")


def test_want_reads_the_race_group_for_a_race_member() -> None:
    assert CANDIDATE.want_cell() == "race:g"
    assert ACTIVE.want_cell() == "held" and STRAY.want_cell() == "unmanaged"
    assert SlotRow("x", want="").want_cell() == "-"


def test_latency_cells() -> None:
    assert format_latency(None) == "-"
    assert format_latency(139.6) == "~140ms"
    assert format_latency(1234.0) == "~1.2s"
    assert format_latency(float("nan")) == "-"
    cells = SlotRow("x", latency_ms=42.0).cells(0.0)
    assert cells[[key for _, key in COLUMNS].index("latency")] == "~42ms"


def test_a_narrow_table_keeps_zone_and_leaves_out_others_first() -> None:
    keys = [key for _, key in COLUMNS]
    widths = [18, 14, 6, 6, 4, 14, 12, 6, 10, 2, 7, 10, 6]
    assert len(widths) == len(COLUMNS)
    assert fit_columns(widths, 200) == tuple(range(len(COLUMNS)))
    at_80 = [keys[i] for i in fit_columns(widths, 78)]
    assert at_80[:2] == ["slot", "zone"] and "want" in at_80 and "state" in at_80
    assert sum(widths[keys.index(k)] + 2 for k in at_80) <= 78
    assert "mode" not in at_80 and "latency" not in at_80
    at_120 = [keys[i] for i in fit_columns(widths, 118)]
    assert "zone" in at_120 and "latency" in at_120 and "mode" not in at_120


def test_bucket_toggles_and_unmanaged_slots_are_refused() -> None:
    bucket = _keys.toggle_bucket((), PARKED)
    assert bucket == ("parked",) and _keys.toggle_bucket(bucket, PARKED) == ()
    for make in (_keys.hold, _keys.release, _keys.tmux_open, _keys.rerun_setup):
        with pytest.raises(_keys.Refusal, match="unmanaged"):
            make(STRAY)
    with pytest.raises(_keys.Refusal, match="no slot selected"):
        _keys.hold(None)


def test_setup_keys_are_setup_edits() -> None:
    assert _keys.tmux_open(ACTIVE).edit == Setup("busy", tmux=True)
    assert _keys.rerun_setup(ACTIVE).edit == Setup("busy", rerun=True)
    assert _keys.tailscale_on(ACTIVE).edit == Setup("busy", tailscale=True)
