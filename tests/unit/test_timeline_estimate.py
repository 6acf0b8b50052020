"""The estimate of when a create waiting for a quota or a member's cap can go
(``core/timeline_estimate``), with a fixed clock: scheduled ends free chips in time order, the
fair order (priority, fewest chips held, file order) decides who takes them, caps hold a
member's creates, a create that went holds its chips until its own end, a flex-start run that
renews competes again, and one that cannot fit says "never" and why. At ``now`` the replay is
the quota gate itself: it lets go exactly what ``plan`` lets go."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core import quota, quota_share
from reconciler.core.plan import Kind, plan
from reconciler.core.timeline_estimate import (
    CAP,
    QUOTA,
    Holder,
    Limit,
    Need,
    Waiter,
    active_from,
    estimate,
)
from reconciler.model.desired import MemberSpec, QuotaSpec
from tests.support.worlds import desired, qr, slot, world

NOW = 1_800_000_000.0
H = 3600.0
ZONE = "europe-west4-a"
LIMIT = QuotaSpec("v6e", "spot", "zone", ZONE, 32)


def need(name: str, chips: int = 8, zone: str = ZONE) -> Need:
    return Need(name, "v6e", "spot", zone, chips)


def lab(owners: dict[str, str], priority: dict[str, int] | None = None, caps=None):  # type: ignore[no-untyped-def]
    return quota_share.Lab(owners=owners, priority=priority or {}, caps=caps or {})


def starts(found: dict, *names: str) -> list[float | None]:  # type: ignore[type-arg]
    return [found[n].start for n in names]


def test_a_waiting_create_goes_when_a_scheduled_end_frees_its_chips() -> None:
    holders = [
        Holder(need("a", 16), NOW + 3 * H, "hold_until"),
        Holder(need("b", 16), NOW + 5 * H, "hold_for"),
    ]
    found = estimate([Limit(LIMIT, 32)], holders, [Waiter(need("w"), 0)], None, NOW)
    w = found["w"]
    assert w.start == NOW + 3 * H and w.never is None and w.waits_on == QUOTA
    assert w.because == "when a ends (hold_until)"


def test_a_create_that_fits_now_goes_now() -> None:
    found = estimate([Limit(LIMIT, 16)], [Holder(need("a", 16))], [Waiter(need("w"), 0)], None, NOW)
    assert found["w"].start == NOW and found["w"].because == "fits now"


def test_an_end_already_due_frees_at_once() -> None:
    holders = [Holder(need("a", 32), NOW - 60, "hold_until")]  # its release is under way
    found = estimate([Limit(LIMIT, 32)], holders, [Waiter(need("w"), 0)], None, NOW)
    assert found["w"].start == NOW and "a ends (hold_until)" in found["w"].because


def test_priority_goes_before_file_order_and_the_next_waits_for_the_next_end() -> None:
    holders = [
        Holder(need("a1"), NOW + 1 * H, "hold_until"),
        Holder(need("b1", 24), NOW + 2 * H, "hold_for"),
    ]
    waiters = [Waiter(need("a2"), 1), Waiter(need("b2"), 3)]  # a2 first in the file
    owners = {"a1": "alice", "a2": "alice", "b1": "bob", "b2": "bob"}
    found = estimate([Limit(LIMIT, 32)], holders, waiters, lab(owners, {"bob": 5}), NOW)
    assert starts(found, "b2", "a2") == [NOW + H, NOW + 2 * H]
    assert found["a2"].ahead == ("b2",)  # bob's went first for the chips alice's needed
    assert found["b2"].ahead == ()


def test_fewest_chips_held_goes_first_and_is_counted_again_after_each_create() -> None:
    # alice holds 16 until +1h and bob 8 for good; at +1h 16 chips are free: alice now holds
    # none, so her create goes before bob's, though it is later in the file; then both hold 8,
    # and the file order gives the other 8 to bob's first create; his second waits for +2h
    holders = [
        Holder(need("a1", 16), NOW + 1 * H, "hold_until"),
        Holder(need("b1"), None),
        Holder(need("c1"), NOW + 2 * H, "hold_until"),
    ]
    waiters = [Waiter(need("b2"), 0), Waiter(need("b3"), 1), Waiter(need("a2"), 2)]
    owners = {"a1": "alice", "a2": "alice", "b1": "bob", "b2": "bob", "b3": "bob", "c1": "carol"}
    found = estimate([Limit(LIMIT, 32)], holders, waiters, lab(owners), NOW)
    assert starts(found, "a2", "b2", "b3") == [NOW + H, NOW + H, NOW + 2 * H]
    assert found["b2"].ahead == ("a2",)
    assert found["b3"].ahead == ("a2", "b2")
    assert found["b3"].because == "when c1 (carol) ends (hold_until)"


def test_while_one_member_holds_more_the_other_goes_first_whatever_the_file_order() -> None:
    holders = [Holder(need("a1", 16)), Holder(need("b1")), Holder(need("c1"), NOW + H, "hold_for")]
    owners = {"a1": "alice", "a2": "alice", "b1": "bob", "b2": "bob", "c1": "carol"}
    waiters = [Waiter(need("a2"), 0), Waiter(need("b2"), 1)]
    found = estimate([Limit(LIMIT, 32)], holders, waiters, lab(owners), NOW)
    assert starts(found, "b2", "a2") == [NOW + H, None]


def test_without_a_lab_the_file_order_decides() -> None:
    waiters = [Waiter(need("late"), 5), Waiter(need("early"), 1)]
    holders = [Holder(need("h"), NOW + H, "hold_until")]
    found = estimate([Limit(LIMIT, 32)], holders, waiters, None, NOW)
    assert starts(found, "early", "late") == [NOW + H, None]
    assert found["late"].never is not None and "held with no scheduled end" in found["late"].never


def test_a_cap_holds_a_members_create_until_their_own_chips_end() -> None:
    limit = QuotaSpec("v6e", "spot", "zone", ZONE, 64)  # room under the quota
    holders = [
        Holder(need("a1", 16), NOW + 4 * H, "hold_for"),
        Holder(need("b1", 16), NOW + 1 * H, "hold_until"),  # another member's end: no help
    ]
    owners = {"a1": "alice", "a2": "alice", "b1": "bob"}
    found = estimate(
        [Limit(limit, 32)],
        holders,
        [Waiter(need("a2"), 1)],
        lab(owners, caps={"alice": {"v6e": 16}}),
        NOW,
    )
    a2 = found["a2"]
    assert a2.start == NOW + 4 * H and a2.waits_on == CAP
    assert a2.because == "when a1 (alice) ends (hold_for)"


def test_a_create_that_went_holds_until_its_own_end_and_then_frees_for_the_next() -> None:
    holders = [Holder(need("h", 32), NOW + H, "hold_until")]
    waiters = [
        Waiter(need("w1", 32), 0, wait=2 * H, run=6 * H),  # queued 2h, then held 6h
        Waiter(need("w2", 32), 1),
    ]
    found = estimate([Limit(LIMIT, 32)], holders, waiters, None, NOW)
    assert starts(found, "w1", "w2") == [NOW + H, NOW + H + 8 * H]
    assert found["w2"].because == "when w1 ends (after 8h)"


def test_hold_until_and_start_at_bound_a_create_that_went() -> None:
    w = Waiter(need("w"), 0, wait=H, run=10 * H, until=NOW + 5 * H, start_at=NOW + 3 * H)
    assert w.active(NOW) == NOW + 3 * H  # not before start_at, though the queue takes 1h
    assert w.end(NOW) == NOW + 5 * H  # hold_until comes before the 10h are served
    assert active_from(NOW, 0.0, start_after=1800) == NOW + 1800


def test_a_flex_start_run_that_renews_competes_again_in_the_fair_order() -> None:
    holders = [Holder(need("flex", 32), NOW + 2 * H, "flex-start run ends", renews=True, run=6 * H)]
    owners = {"flex": "carol", "vip": "bob"}
    found = estimate(
        [Limit(LIMIT, 32)], holders, [Waiter(need("vip", 32), 9)], lab(owners, {"bob": 1}), NOW
    )
    assert found["vip"].start == NOW + 2 * H  # bob's priority takes the chips first
    flex = found["flex"]  # its next run finds the chips taken, by a create with no end
    assert flex.renewal and flex.start is None
    assert flex.never is not None and "vip (bob) 32" in flex.never


def test_a_renewing_run_alone_starts_again_at_its_end() -> None:
    holders = [Holder(need("flex", 8), NOW + 2 * H, "flex-start run ends", renews=True)]
    found = estimate([Limit(LIMIT, 8)], holders, [], None, NOW)
    assert found["flex"].renewal and found["flex"].start == NOW + 2 * H
    assert found["flex"].because == "when its run ends"


def test_never_when_a_create_needs_more_than_the_limit_or_the_cap() -> None:
    owners = {"big": "carol", "capped": "alice"}
    found = estimate(
        [Limit(LIMIT, 0)],
        [],
        [Waiter(need("big", 64), 0), Waiter(need("capped", 24), 1)],
        lab(owners, caps={"alice": {"v6e": 16}}),
        NOW,
    )
    assert found["big"].start is None
    assert found["big"].never == "needs 64 spot v6e chips; the limit in europe-west4-a is 32"
    assert found["capped"].never == "needs 24 v6e chips; alice's cap is 16"


def test_never_when_the_chips_stay_held_with_no_scheduled_end_names_who_holds_them() -> None:
    holders = [
        Holder(
            need(f"h{i}", 8), None, "flex-start run over, counted until released" if i == 0 else ""
        )
        for i in range(4)
    ]
    owners = {f"h{i}": "bob" for i in range(4)}
    found = estimate([Limit(LIMIT, 32)], holders, [Waiter(need("w"), 0)], lab(owners), NOW)
    never = found["w"].never
    assert never is not None and found["w"].start is None
    assert never.startswith("quota: 32/32 spot v6e chips in europe-west4-a: held with no")
    assert "h0 (bob) 8 (flex-start run over, counted until released)" in never
    assert never.endswith("1 more")  # three named, the rest counted


def test_never_when_blocked_whatever_frees() -> None:
    holders = [Holder(need("h", 32), NOW + H, "hold_until")]
    found = estimate(
        [Limit(LIMIT, 32)],
        holders,
        [Waiter(need("w"), 0, blocked="paused (paused: true)")],
        None,
        NOW,
    )
    assert found["w"].start is None and found["w"].never == "paused (paused: true)"


def test_a_limit_in_another_zone_or_family_does_not_hold_a_create() -> None:
    other = QuotaSpec("v6e", "spot", "zone", "us-east1-d", 8)
    found = estimate([Limit(other, 8)], [], [Waiter(need("w", 8), 0)], None, NOW)
    assert found["w"].start == NOW


def test_the_region_limit_counts_every_zone_in_it() -> None:
    region = QuotaSpec("v6e", "spot", "region", "europe-west4", 16)
    holders = [Holder(need("b", 16, zone="europe-west4-b"), NOW + H, "hold_for")]
    found = estimate([Limit(region, 16)], holders, [Waiter(need("w"), 0)], None, NOW)
    assert found["w"].start == NOW + H


# --- at now, the replay is the gate -----------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    chips=st.integers(min_value=0, max_value=48),
    held=st.lists(st.sampled_from(["alice", "bob", "carol", None]), max_size=3),
    wanted=st.lists(
        st.tuples(st.sampled_from(["alice", "bob", "carol", None]), st.sampled_from([8, 16])),
        min_size=1,
        max_size=6,
    ),
    bob_first=st.booleans(),
    alice_cap=st.sampled_from([None, 8, 16, 24]),
)
def test_at_now_exactly_the_creates_the_gate_lets_go_start_now(
    chips: int,
    held: list[str | None],
    wanted: list[tuple[str | None, int]],
    bob_first: bool,
    alice_cap: int | None,
) -> None:
    from dataclasses import replace

    specs = [replace(slot(f"h{i}", ZONE, accelerator="v6e-8"), owner=o) for i, o in enumerate(held)]
    specs += [
        replace(slot(f"w{i}", ZONE, accelerator=f"v6e-{n}"), owner=o)
        for i, (o, n) in enumerate(wanted)
    ]
    members = (
        MemberSpec("bob", {}, 5 if bob_first else 0),
        MemberSpec("alice", {"v6e": alice_cap} if alice_cap is not None else {}, 0),
    )
    limit = QuotaSpec("v6e", "spot", "zone", ZONE, chips)
    d = replace(desired(*specs), quotas=(limit,), members=members)
    seen = world(
        *(replace(qr(f"h{i}", ZONE, QRState.ACTIVE, accelerator="v6e-8")) for i in range(len(held)))
    )
    p = plan(d, seen)
    went = {a.slot for a in p.actions if a.kind == Kind.CREATE}
    waits = {h.action.slot for h in p.gated if h.gate == quota.GATE}
    assert went | waits == {f"w{i}" for i in range(len(wanted))}

    used: Counter[tuple[str, str, str, str]] = quota.tally(seen)
    holders = [Holder(need(f"h{i}", 8)) for i in range(len(held))]
    waiters = [
        Waiter(need(s.name, 8 if s.accelerator == "v6e-8" else 16), s.order)
        for s in d.slots
        if s.name.startswith("w")
    ]
    found_lab = quota_share.lab(d, seen)
    if found_lab is not None:  # the estimate counts the holders' chips itself
        found_lab = replace(found_lab, held=Counter(), holders={})
    found = estimate([Limit(limit, used[quota.key(limit)])], holders, waiters, found_lab, NOW)
    assert {name for name, e in found.items() if e.start == NOW} == went
    assert all(found[name].start is None for name in waits)  # nothing ends: never
