"""Which edit each TUI key asks for (``surfaces/tui/_keys``): pure, from a frame's values."""

from __future__ import annotations

import pytest

from reconciler.surfaces.tui import _keys
from reconciler.surfaces.tui._frame import Frame, RaceRow, SlotRow


def frame(*slots: SlotRow, races: tuple[RaceRow, ...] = ()) -> Frame:
    return Frame(file="desired.yaml", now=0.0, valid=True, slots=slots, races=races)


PARKED = SlotRow("parked", state="NOT_QUEUED", want="released")
ACTIVE = SlotRow("busy", state="ACTIVE", want="held")
CANDIDATE = SlotRow("cand", state="NOT_QUEUED", want="held", race_group="g")
GENERATED = SlotRow("gen", state="NOT_QUEUED", want="released", generated=True)
STRAY = SlotRow("stray", state="ACTIVE", managed=False)


def test_a_holds_only_unqueued_slots_of_their_own() -> None:
    proposal = _keys.hold_all(frame(PARKED, ACTIVE, CANDIDATE, GENERATED, STRAY))
    assert proposal.edit.kind == "hold_many" and proposal.edit.args == {"names": ["parked"]}
    with pytest.raises(_keys.Refusal, match="already queued or held"):
        _keys.hold_all(frame(ACTIVE, CANDIDATE))


def test_release_asks_twice_and_a_running_tpu_also_asks_yes_no() -> None:
    idle = _keys.release(SlotRow("failed", state="FAILED", want="held"))
    assert idle.twice and idle.ask is None and idle.confirmed
    running = _keys.release(ACTIVE)
    assert running.twice and running.ask and "releasing deletes it" in running.ask
    again = _keys.release(PARKED)  # already released: nothing to confirm
    assert again.twice is None and not again.confirmed


def test_bucket_race_replacing_candidates_asks_twice() -> None:
    first = _keys.race_bucket(frame(PARKED, ACTIVE), ["parked", "busy"])
    assert first.edit.args == {
        "group": _keys.BUCKET_GROUP,
        "slots": ["parked", "busy"],
        "count": 1,
        "exact": True,
    }
    assert first.twice is None and not first.confirmed
    group = RaceRow(_keys.BUCKET_GROUP, 1, (), ("parked", "busy"))
    smaller = _keys.race_bucket(frame(PARKED, ACTIVE, races=(group,)), ["parked"])
    assert smaller.twice and "busy are released" in smaller.twice and smaller.confirmed
    with pytest.raises(_keys.Refusal, match="bucket is empty"):
        _keys.race_bucket(frame(PARKED), [])


def test_bucket_toggles_and_unmanaged_slots_are_refused() -> None:
    bucket = _keys.toggle_bucket((), PARKED)
    assert bucket == ("parked",) and _keys.toggle_bucket(bucket, PARKED) == ()
    for make in (_keys.hold, _keys.release, _keys.tmux_open, _keys.rerun_setup):
        with pytest.raises(_keys.Refusal, match="unmanaged"):
            make(STRAY)
    with pytest.raises(_keys.Refusal, match="no slot selected"):
        _keys.hold(None)


def test_setup_keys_are_setup_edits() -> None:
    assert _keys.tmux_open(ACTIVE).edit.args == {"name": "busy", "tmux": True}
    assert _keys.rerun_setup(ACTIVE).edit.args == {"name": "busy", "rerun": True}
    assert _keys.tailscale_on(ACTIVE).edit.args == {"name": "busy", "tailscale": True}
