"""The lab's timeline as a value (``core/timeline``, ``timeline_facts``, ``timeline_past``) and
as text and JSON (``core/timeline_text``), pure, as of a fixed moment: the fixture lab of
``tests/support/timeline_world`` (three members on one 32-chip spot v6e limit) made into rows,
spans, marks and estimates; the window; the groups; the history's transitions folded into
spans; lines that fit the width."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from reconciler.core.capacity import WaitHint
from reconciler.core.history import Transition
from reconciler.core.timeline import (
    END,
    EXPECTED,
    MAINTENANCE,
    SCHEMA,
    START_AT,
    LabTimeline,
    build,
    moment,
    only,
    window,
)
from reconciler.core.timeline_past import (
    DEAD,
    EST_HELD,
    EST_QUEUED,
    HELD,
    PREEMPTION,
    QUEUED_SPAN,
    RUN_ENDED,
    WAITING,
    spans,
)
from reconciler.core.timeline_text import chart, format_timeline, plain, timeline_doc
from reconciler.model.load import parse_desired
from reconciler.model.status import SlotQuotaStatus, StatusSnapshot
from reconciler.runtime.backends import word_state
from tests.support.timeline_world import AS_OF, DESIRED, H, snapshot

DESIRED_SPEC = parse_desired(DESIRED)
P50 = WaitHint(2 * H, 12)
HINTS = {
    ("europe-west4-a", "v6e-8", "spot", "tpu"): P50,
    ("us-east5-b", "v6e-8", "spot", "tpu"): P50,
}


def lab_snapshot(running: bool = True) -> StatusSnapshot:
    return snapshot(Path("/lab/desired.yaml"), running=running)


def made(snap: StatusSnapshot | None = None, *, by: str = "owner", **kwargs: object) -> LabTimeline:
    return build(
        snap or lab_snapshot(),
        DESIRED_SPEC,
        as_of=AS_OF,
        hints=HINTS,
        by=by,
        state_of=word_state,
        **kwargs,  # type: ignore[arg-type]
    )


def row(t: LabTimeline, name: str):  # type: ignore[no-untyped-def]
    return next(r for r in t.rows() if r.slot == name)


# --- the estimate, as the lab's snapshot and file say --------------------------------------


def test_waiting_slots_start_at_the_scheduled_ends_in_the_fair_order() -> None:
    t = made()
    bob, alice = row(t, "bob-v6e8").estimate, row(t, "spot-v6e8-eua-2").estimate
    assert bob.start == AS_OF + 3 * H  # alice's hold_until frees 8; bob's priority takes them
    assert bob.because == "when spot-v6e8-eua-1 (alice) ends (hold_until)"
    assert alice.start == AS_OF + 4 * H and alice.ahead == ("bob-v6e8",)
    assert alice.because == "when bob-v6e16 (bob) ends (hold_for)"
    big = row(t, "carol-v6e64").estimate
    assert big.start is None
    assert big.never == "needs 64 spot v6e chips; the limit in europe-west4-a is 32"
    flex = row(t, "carol-flex").estimate  # renews at its end, into the 8 still free
    assert flex.renewal and flex.start == AS_OF + 5 * H


def test_a_waiting_row_waits_then_queues_for_the_history_s_wait_then_holds_for_its_hold() -> None:
    r = row(made(), "spot-v6e8-eua-2")  # hold_for: 8h in the file
    start = AS_OF + 4 * H
    drawn = [(s.kind, s.start, s.end, s.estimate) for s in r.spans]
    assert drawn[-3:] == [
        (WAITING, AS_OF - H, start, False),
        (EST_QUEUED, start, start + 2 * H, True),
        (EST_HELD, start + 2 * H, start + 10 * H, True),
    ]
    assert r.expected_wait == P50


def test_held_rows_run_to_their_scheduled_end() -> None:
    t = made()
    r = row(t, "spot-v6e8-eua-1")
    assert (r.ends_at, r.end_reason) == (AS_OF + 3 * H, "hold_until")
    assert r.spans[-1] == replace(r.spans[-1], kind=HELD, start=AS_OF - 5 * H, end=AS_OF + 3 * H)
    assert [(m.kind, m.text) for m in r.marks] == [(END, "hold_until")]
    assert row(t, "bob-v6e16").end_reason == "hold_for"
    flex = row(t, "carol-flex")  # its run ends, then its next run (renew: true), estimated
    assert flex.end_reason == "flex-start run ends"
    assert [s.kind for s in flex.spans] == [HELD, EST_HELD]  # no flex-start history: no wait
    assert flex.spans[-1].end == AS_OF + 5 * H + 6 * H  # a 6h run


def test_an_expired_flex_start_run_that_does_not_renew_stays_counted() -> None:
    desired = parse_desired(DESIRED.replace("renew: true", "renew: false"))
    t = build(lab_snapshot(), desired, as_of=AS_OF, hints=HINTS, state_of=word_state)
    flex = row(t, "carol-flex")
    assert flex.estimate is None and flex.spans[-1] == replace(flex.spans[-1], kind=DEAD, end=None)
    alice = row(t, "spot-v6e8-eua-2").estimate  # 8 chips stay counted: one create fewer fits
    assert alice.start == AS_OF + 4 * H


def test_queued_rows_show_the_history_s_expected_wait_and_start_at_bounds_it() -> None:
    t = made()
    q = row(t, "spot-v6e8-usb-1")  # queued an hour ago, p50 2h: ACTIVE in about an hour
    assert [s.kind for s in q.spans][-3:] == [QUEUED_SPAN, EST_QUEUED, EST_HELD]
    assert [m.at for m in q.marks if m.kind == EXPECTED] == [AS_OF + H]
    later = row(t, "dave-later")  # start_at 10:00: not ACTIVE before, whatever the queue
    assert [m.kind for m in later.marks] == [START_AT]
    assert later.expected_wait is None  # no history for v4-8 in us-central2-b here


def test_maintenance_unmanaged_and_dead_rows() -> None:
    t = made()
    m = [m for m in row(t, "spot-v48-usb-1").marks if m.kind == MAINTENANCE]
    window = (AS_OF + 8 * H, AS_OF + 10 * H, "SCHEDULED PENDING")
    assert [(x.at, x.until, x.text) for x in m] == [window]
    old = row(t, "old-experiment")
    assert not old.managed and old.owner is None and old.estimate is None
    assert old.spans == (replace(old.spans[0], kind=DEAD, start=AS_OF - 200 * H, end=None),)


def test_the_controller_suspended_or_a_paused_slot_never_starts() -> None:
    t = made(replace(lab_snapshot(), suspended=True))
    assert row(t, "bob-v6e8").estimate.never.startswith("the controller is suspended")
    slots = tuple(
        replace(s, paused=True) if s.name == "bob-v6e8" else s for s in lab_snapshot().slots
    )
    t = made(replace(lab_snapshot(), slots=slots))
    assert row(t, "bob-v6e8").estimate.never == "paused (paused: true): nothing is done for it"
    assert row(t, "spot-v6e8-eua-2").estimate.start == AS_OF + 3 * H  # bob's turn is alice's


def test_without_an_observation_nothing_is_estimated_and_it_says_so() -> None:
    t = made(replace(lab_snapshot(), observed_at=None))
    assert all(r.estimate is None for r in t.rows())
    assert any("no observation yet" in n for n in t.notes)


def test_a_create_the_cloud_refused_waits_on_the_limit_it_named() -> None:
    refused = SlotQuotaStatus("refused", "Quota exhausted", "TPUV6E...", 16, "us-east5-b")
    slots = tuple(
        replace(s, state="NOT_QUEUED", quota=refused, create_time=None)
        if s.name == "spot-v6e8-usb-1"
        else s
        for s in lab_snapshot().slots
    )
    extra = replace(
        lab_snapshot().slots[0], name="other", zone="us-east5-b", owner=None, managed=False,
        releases_at=None, state="ACTIVE", accelerator="v6e-16",
    )  # fmt: skip
    t = made(replace(lab_snapshot(), slots=(*slots, extra)))
    e = row(t, "spot-v6e8-usb-1").estimate
    assert e.start is None and "16/16 spot v6e chips in us-east5-b" in e.never
    assert "other 16" in e.never


def test_without_the_file_the_snapshot_alone_is_used() -> None:
    t = build(lab_snapshot(), None, as_of=AS_OF, state_of=word_state)
    # no priorities: bob's create is later in the file than alice's, which goes first now
    assert row(t, "spot-v6e8-eua-2").estimate.start == AS_OF + 3 * H
    assert row(t, "bob-v6e8").estimate.start == AS_OF + 4 * H


# --- the window and the groups ----------------------------------------------------------------


def test_the_default_window_shows_every_scheduled_moment_and_half_as_much_past() -> None:
    t = made()
    assert t.until % H == 0 and t.until >= AS_OF + 14 * H  # the last estimated end, +10%
    assert t.since == AS_OF - (t.until - AS_OF) / 2
    empty = made(replace(lab_snapshot(), slots=()))
    assert (empty.since, empty.until) == (AS_OF - 6 * H, AS_OF + 6 * H)
    assert window([], AS_OF, AS_OF - H, AS_OF + H) == (AS_OF - H, AS_OF + H)
    assert window([], AS_OF + 1500, None, None) == (AS_OF - 6 * H, AS_OF + 7 * H)  # to the hour
    with pytest.raises(ValueError, match="is not before"):
        window([], AS_OF, AS_OF + H, AS_OF)


def test_since_and_until_read_durations_and_times() -> None:
    assert moment("12h", AS_OF, ahead=False) == AS_OF - 12 * H
    assert moment("1d", AS_OF, ahead=True) == AS_OF + 24 * H
    assert moment("2026-03-02T06:00:00+01:00", AS_OF, ahead=True) == AS_OF + 5 * H
    with pytest.raises(ValueError, match="expected a duration like 12h"):
        moment("yesterday", AS_OF, ahead=False)
    with pytest.raises(ValueError, match="UTC offset"):
        moment("2026-03-02T06:00", AS_OF, ahead=True)


def test_groups_by_owner_zone_and_quota() -> None:
    assert [g.name for g in made().groups] == ["alice", "bob", "carol", "(no owner)"]
    assert [g.name for g in made(by="zone").groups] == [
        "europe-west4-a", "us-central2-b", "us-east5-b",
    ]  # fmt: skip
    by_quota = made(by="quota")
    assert [g.name for g in by_quota.groups] == [
        "spot v6e chips in europe-west4-a", "(no chip limit)",
    ]  # fmt: skip
    assert len(by_quota.groups[0].rows) == 6
    with pytest.raises(ValueError, match="by must be one of"):
        made(by="colour")
    narrowed = only(made(), zone="us-central2-b")
    assert {r.slot for r in narrowed.rows()} == {"spot-v48-usb-1", "dave-later", "old-experiment"}


# --- the history's part -------------------------------------------------------------------------


def tr(
    slot: str, before: str | None, after: str | None, at: float, mode: str = "spot"
) -> Transition:
    return Transition(slot, "europe-west4-a", "v6e-8", mode, before, after, at)


def test_transitions_fold_into_spans_and_marks() -> None:
    past = spans(
        [
            tr("a", None, "WAITING_FOR_RESOURCES", 0),
            tr("a", "WAITING_FOR_RESOURCES", "PROVISIONING", 10),
            tr("a", "PROVISIONING", "ACTIVE", 20),  # still held: one span
            tr("a", "ACTIVE", "SUSPENDED", 100),
            tr("a", "SUSPENDED", None, 110),
            tr("f", None, "ACTIVE", 0, mode="flex-start"),
            tr("f", "ACTIVE", "SUSPENDED", 50, mode="flex-start"),
        ],
        word_state,
    )
    a = past[("europe-west4-a", "a")]
    assert [(s.kind, s.start, s.end) for s in a.spans] == [
        (QUEUED_SPAN, 0, 10), (HELD, 10, 100), (DEAD, 100, 110),
    ]  # fmt: skip
    assert [(m.kind, m.at) for m in a.marks] == [(PREEMPTION, 100)] and a.state is None
    f = past[("europe-west4-a", "f")]
    assert [m.kind for m in f.marks] == [RUN_ENDED]  # its end, not a preemption
    assert f.spans[-1].end is None and f.state == "SUSPENDED"


def test_the_past_comes_before_the_snapshot_and_gone_requests_keep_a_row() -> None:
    past = spans(
        [
            tr("spot-v6e8-eua-1", None, "ACTIVE", AS_OF - 9 * H),
            tr("spot-v6e8-eua-1", "ACTIVE", "SUSPENDED", AS_OF - 7 * H),
            tr("spot-v6e8-eua-1", "SUSPENDED", None, AS_OF - 6.5 * H),
            tr("gone", None, "WAITING_FOR_RESOURCES", AS_OF - 3 * H),
            tr("gone", "WAITING_FOR_RESOURCES", None, AS_OF - 2 * H),
            tr("long-gone", None, "ACTIVE", AS_OF - 90 * H),
            tr("long-gone", "ACTIVE", None, AS_OF - 80 * H),
        ],
        word_state,
    )
    t = made(past=past)
    r = row(t, "spot-v6e8-eua-1")
    assert [s.kind for s in r.spans] == [HELD, DEAD, HELD]
    assert [m.kind for m in r.marks] == [PREEMPTION, END]
    gone = row(t, "gone")
    assert not gone.managed and [s.kind for s in gone.spans] == [QUEUED_SPAN]
    assert "long-gone" not in {x.slot for x in t.rows()}  # nothing in the window


# --- text and JSON -----------------------------------------------------------------------------


@pytest.mark.parametrize("width", [40, 80, 160])
def test_every_line_fits_the_width(width: int) -> None:
    text = format_timeline(made(), width)
    assert max(len(line) for line in text.splitlines()) <= width
    assert "bob-v6e8 (bob) starts ~03-02 03:00 (in 3h)" in text.replace("\n    ", " ")


def test_a_long_name_keeps_its_start_and_its_end() -> None:
    text = format_timeline(made(), 60)  # 13 columns for a name
    assert "  spot~e8-eua-1 " in text and "  spot~e8-eua-2 " in text
    assert "  bob-v6e8 " in text


def test_the_chart_draws_each_span_and_mark_and_now() -> None:
    t = made(since=AS_OF - 10 * H, until=AS_OF + 10 * H)
    lines = plain(chart(t, 78))  # the names take 18
    axis = next(line for line in lines if line.lstrip().startswith(("-", "+")))
    left = len(axis) - len(axis.lstrip())
    assert len(axis) - left == 60  # 60 columns of 20 minutes
    assert axis[left + 30] == "|"  # now, half way
    drawn = {line.split()[0]: line[left:] for line in lines if line.startswith("  ")}
    cells = drawn["spot-v6e8-eua-1"]
    assert cells[15:39] == "#" * 24 and cells[39] == "]"  # held 5h before now to 3h after
    assert drawn["carol-v6e64"].endswith(".>")  # waits past the window: never
    assert "x" not in "".join(drawn.values())
    light = chart(t, 80, selected="bob-v6e8")
    assert [c for line in light for c in line if c[1] == "selected"] != []


def test_the_json_document() -> None:
    doc = timeline_doc(made())
    assert doc["schema_version"] == SCHEMA and doc["as_of"] == "2026-03-02T00:00:00Z"
    assert [g["name"] for g in doc["groups"]] == ["alice", "bob", "carol", "(no owner)"]
    slot = next(s for s in doc["slots"] if s["name"] == "spot-v6e8-eua-2")
    assert slot["estimate"] == {
        "estimate": True,
        "waits_on": "quota",
        "earliest_start": "2026-03-02T04:00:00Z",
        "in_seconds": 4 * 3600,
        "never": None,
        "because": "when bob-v6e16 (bob) ends (hold_for)",
        "ahead": ["bob-v6e8"],
        "expected_active": "2026-03-02T06:00:00Z",
        "renewal": False,
    }
    assert slot["quota"] == "spot v6e chips in europe-west4-a" and slot["chips"] == 8
    assert slot["spans"][-1] == {
        "kind": EST_HELD, "start": "2026-03-02T06:00:00Z", "end": "2026-03-02T14:00:00Z",
        "estimate": True,
    }  # fmt: skip
