"""A lab sharing one project's quota (``core/quota_share``): creates go by priority, then by
fewest chips held (fair share), then file order; a member's cap holds their creates; a
waiting slot says who is ahead. ``owner`` is read defensively: here a slot type that has it
stands in for the file's ``owner:`` key."""

from __future__ import annotations

from dataclasses import dataclass, replace

from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core import quota, quota_share
from reconciler.core.plan import Kind, plan
from reconciler.model.capacity import CapacityRequest
from reconciler.model.desired import Desired, MemberSpec, QuotaSpec, SlotSpec
from reconciler.model.load import parse_desired
from reconciler.model.observed import Observation
from tests.support.worlds import qr, world

ZONE = "europe-west4-a"


@dataclass(frozen=True, slots=True)
class OwnedSlot(SlotSpec):
    owner: str | None = None


def lab_file(
    *owned: tuple[str, str | None],
    chips: int = 16,
    members: tuple[MemberSpec, ...] = (),
    accelerator: str = "v6e-8",
) -> Desired:
    slots = tuple(
        OwnedSlot(
            name=name,
            zone=ZONE,
            accelerator=accelerator,
            mode="spot",
            runtime_version="v2-alpha-tpuv6e",
            want="held",
            order=i,
            owner=owner,
        )
        for i, (name, owner) in enumerate(owned)
    )
    return Desired(
        project="my-project-1",
        settings=parse_desired("project: my-project-1\nslots: []\n").settings,
        slots=slots,
        quotas=(QuotaSpec("v6e", "spot", "zone", ZONE, chips),),
        members=members,
    )


def holding(name: str) -> CapacityRequest:
    return replace(qr(name, ZONE, QRState.ACTIVE, accelerator="v6e-8"), mode="spot")


def decided(d: Desired, seen: Observation) -> tuple[list[str], dict[str, str]]:
    p = plan(d, seen)
    return (
        sorted(a.slot for a in p.actions if a.kind == Kind.CREATE),
        {h.action.slot: h.why for h in p.gated if h.gate == quota.GATE},
    )


def test_higher_priority_goes_first_and_the_others_say_behind_whom() -> None:
    d = lab_file(
        ("a1", "alice"), ("a2", "alice"), ("b1", "bob"), ("b2", "bob"),
        members=(MemberSpec("bob", {}, 5),),
    )  # fmt: skip
    creates, waits = decided(d, world())
    assert creates == ["b1", "b2"]
    behind = " (behind b1 (bob), b2 (bob))"
    assert waits == {
        "a1": f"waiting for quota: 16/16 spot v6e chips in {ZONE}{behind}",
        "a2": f"waiting for quota: 16/16 spot v6e chips in {ZONE}{behind}",
    }


def test_fair_share_the_one_holding_fewer_chips_goes_first() -> None:
    d = lab_file(
        ("a0", "alice"), ("a1", "alice"), ("a2", "alice"), ("b1", "bob"), ("b2", "bob"), chips=24
    )
    creates, waits = decided(d, world(holding("a0")))
    # alice holds 8: bob's b1 first (0), then a tie at 8 broken by file order (a1), then full
    assert creates == ["a1", "b1"]
    assert set(waits) == {"a2", "b2"}
    assert waits["b2"].endswith("(behind b1 (bob), a1 (alice))")


def test_a_members_cap_holds_their_creates_only() -> None:
    d = lab_file(
        ("a0", "alice"), ("a1", "alice"), ("a2", "alice"), ("b1", "bob"), chips=64,
        members=(MemberSpec("alice", {"v6e": 16}, 0),),
    )  # fmt: skip
    creates, waits = decided(d, world(holding("a0")))
    assert creates == ["a1", "b1"]
    assert waits == {"a2": "waiting for alice's cap: 16/16 v6e chips"}


def test_a_full_quota_says_who_holds_it() -> None:
    d = lab_file(("a0", "alice"), ("c", "carol"), chips=16)
    theirs = replace(holding("theirs"), labels={})
    _, waits = decided(d, world(holding("a0"), theirs))
    assert waits == {
        "c": f"waiting for quota: 16/16 spot v6e chips in {ZONE} (held by alice 8, others 8)"
    }
    (limit,) = quota.limits(
        d.quotas, world(holding("a0"), theirs), plan(d, world(holding("a0"), theirs)).gated
    )
    assert limit.waiting == ("c",), "the limit still lists who waits on it"


def test_without_members_or_owners_nothing_changes() -> None:
    d = lab_file(("a", None), ("b", None), ("c", None))
    assert quota_share.lab(d, world()) is None
    creates, waits = decided(d, world())
    assert creates == ["a", "b"]
    assert waits == {"c": f"waiting for quota: 16/16 spot v6e chips in {ZONE}"}


def test_members_are_read_from_the_file() -> None:
    d = parse_desired(
        "project: my-project-1\nmembers:\n  alice: {chips: {v6e: 32}, priority: 2}\n"
        "  bob: {}\nslots: []\n"
    )
    assert d.members == (MemberSpec("alice", {"v6e": 32}, 2), MemberSpec("bob", {}, 0))
