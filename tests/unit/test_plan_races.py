"""Race groups: queue every candidate until enough win, then cancel the rest; race again when a
winner is lost. Winners are ranked further-along first, then earliest, then file order."""

from __future__ import annotations

import pytest

from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core.memory import Memory
from reconciler.core.plan import plan
from reconciler.model.capacity import CapacityRequest
from reconciler.model.desired import Desired
from reconciler.model.observed import Node, NodeState
from tests.support.worlds import (
    Z1,
    Z2,
    Z3,
    active,
    brief,
    desired,
    failed,
    group,
    node,
    qr,
    slot,
    world,
)

W = QRState.WAITING_FOR_RESOURCES
P = QRState.PROVISIONING


ZONES = (Z1, Z2, Z3)
T0 = "2026-11-30T09:00:00Z"


def race(count: int = 1, n: int = 3) -> Desired:
    """Candidates c0..c{n-1} of race g, spread over three zones in file order."""
    names = [f"c{i}" for i in range(n)]
    return desired(
        *(slot(name, _zone(name), accelerator="v6e-8") for name in names),
        groups=[group("g", *names, count=count)],
    )


def _zone(name: str) -> str:
    return ZONES[int(name[1:]) % 3]


def at(name: str, state: QRState, created: str = T0) -> CapacityRequest:
    return qr(name, _zone(name), state, accelerator="v6e-8", created=created)


def provisioning(name: str, created: str = T0) -> tuple[CapacityRequest, Node]:
    creating = node(name, _zone(name), NodeState.CREATING, accelerator="v6e-8")
    return at(name, P, created), creating


def running(name: str, created: str = T0) -> tuple[CapacityRequest, Node]:
    ready = node(name, _zone(name), uid=f"9{name[1:]}", accelerator="v6e-8")
    return at(name, QRState.ACTIVE, created), ready


def test_open_race_queues_every_candidate() -> None:
    p = plan(race(), world())
    assert brief(p) == [("+", "create", "c0"), ("+", "create", "c1"), ("+", "create", "c2")]
    (status,) = p.races
    assert status.open and status.winners == () and status.candidates == ("c0", "c1", "c2")
    assert p.decided_want == {"c0": "held", "c1": "held", "c2": "held"}


def test_open_race_queues_only_candidates_without_a_qr() -> None:
    p = plan(race(), world(at("c0", W), at("c1", QRState.ACCEPTED)))
    assert brief(p) == [("+", "create", "c2")]


def test_open_race_replaces_dead_candidates() -> None:
    p = plan(race(), world(at("c0", W), at("c1", QRState.SUSPENDED), at("c2", QRState.FAILED)))
    assert brief(p) == [("-/+", "replace", "c1"), ("-/+", "replace", "c2")]


@pytest.mark.parametrize("winner", ["c0", "c1", "c2"])
def test_provisioning_winner_cancels_the_others(winner: str) -> None:
    others = [c for c in ("c0", "c1", "c2") if c != winner]
    p = plan(race(), world(provisioning(winner), at(others[0], W), at(others[1], QRState.ACCEPTED)))
    assert brief(p) == [("-", "delete", others[0]), ("-", "delete", others[1])]
    assert all(not a.destructive and not a.force for a in p.actions)
    assert all(winner in a.reason for a in p.actions)
    (status,) = p.races
    assert status.winners == (winner,) and not status.open
    assert p.decided_want[winner] == "held"
    assert {p.decided_want[o] for o in others} == {"released"}


def test_closed_race_leaves_candidates_without_a_qr_alone() -> None:
    p = plan(race(), world(running("c1")))
    assert p.empty


def test_closed_race_deletes_dead_losers_instead_of_replacing_them() -> None:
    p = plan(race(), world(running("c0"), at("c1", QRState.FAILED), at("c2", QRState.SUSPENDED)))
    assert brief(p) == [("-", "delete", "c1"), ("-", "delete", "c2")]


def test_losing_provisioning_qr_is_force_deleted_and_not_destructive() -> None:
    p = plan(race(), world(running("c0"), provisioning("c1")))
    (a,) = p.actions
    assert (a.slot, a.force, a.destructive) == ("c1", True, False)


def test_delete_of_a_loser_that_failed_is_retried_until_the_qr_is_gone() -> None:
    seen = world(running("c0"), provisioning("c1"))
    (a,) = plan(race(), seen).actions
    memory = failed(a, message="cannot delete while PROVISIONING")
    waiting = plan(race(), seen, memory, now=1.0)
    assert waiting.empty and [h.action.slot for h in waiting.deferred] == ["c1"]
    retried = plan(race(), seen, memory, now=10.0)
    assert brief(retried) == [("-", "delete", "c1")]
    # gcloud --async exits 0 and the QR stays: still a loser, so still deleted.
    assert brief(plan(race(), seen, Memory(), now=20.0)) == [("-", "delete", "c1")]


def test_deleting_loser_is_left_to_finish() -> None:
    assert plan(race(), world(running("c0"), at("c1", QRState.DELETING))).empty


def test_active_beats_provisioning_even_when_created_later() -> None:
    p = plan(
        race(),
        world(provisioning("c0", "2026-11-30T08:00:00Z"), running("c1", "2026-11-30T09:00:00Z")),
    )
    assert p.races[0].winners == ("c1",)
    assert brief(p) == [("-", "delete", "c0")]


def test_earlier_creation_wins_among_equals() -> None:
    p = plan(
        race(),
        world(
            provisioning("c0", "2026-11-30T09:00:05Z"), provisioning("c2", "2026-11-30T09:00:01Z")
        ),
    )
    assert p.races[0].winners == ("c2",)
    assert brief(p) == [("-", "delete", "c0")]


def test_earlier_creation_wins_when_timestamps_differ_in_precision() -> None:
    """The API writes 0, 3, 6 or 9 fractional digits, so one second can be spelled two ways."""
    p = plan(
        race(),
        world(
            provisioning("c1", "2026-11-30T09:00:00.500Z"),
            provisioning("c2", "2026-11-30T09:00:00Z"),
        ),
    )
    assert p.races[0].winners == ("c2",)


def test_file_order_breaks_the_last_tie() -> None:
    p = plan(race(), world(provisioning("c2"), provisioning("c1")))
    assert p.races[0].winners == ("c1",)
    assert brief(p) == [("-", "delete", "c2")]


def test_surplus_active_winner_is_deleted_and_marked_destructive() -> None:
    p = plan(
        race(),
        world(running("c0", "2026-11-30T09:00:00Z"), running("c1", "2026-11-30T09:30:00Z")),
    )
    (a,) = p.actions
    assert (a.symbol, a.slot, a.destructive, a.force) == ("-", "c1", True, True)


def test_lost_winner_reopens_the_race() -> None:
    # c1 won earlier, so c0 and c2 were cancelled; then c1 was preempted.
    p = plan(race(), world(at("c1", QRState.SUSPENDED)))
    assert brief(p) == [
        ("+", "create", "c0"),
        ("-/+", "replace", "c1"),
        ("+", "create", "c2"),
    ]
    assert p.races[0].open


def test_count_two_keeps_queueing_after_the_first_win() -> None:
    p = plan(race(count=2, n=4), world(running("c0"), at("c1", W)))
    assert brief(p) == [("+", "create", "c2"), ("+", "create", "c3")]
    assert p.races[0].winners == ("c0",) and p.races[0].open


def test_count_two_cancels_the_rest_once_two_have_won() -> None:
    p = plan(race(count=2, n=4), world(running("c0"), provisioning("c2"), at("c1", W), at("c3", W)))
    assert brief(p) == [("-", "delete", "c1"), ("-", "delete", "c3")]
    assert p.races[0].winners == ("c0", "c2") and not p.races[0].open


def test_count_zero_releases_every_candidate() -> None:
    p = plan(race(count=0), world(running("c0"), at("c1", W)))
    assert brief(p) == [("-", "delete", "c0"), ("-", "delete", "c1")]
    assert [a.destructive for a in p.actions] == [True, False]
    assert set(p.decided_want.values()) == {"released"}
    assert not p.races[0].open


def test_unreachable_candidate_is_not_queued_and_the_blind_spot_is_reported() -> None:
    p = plan(race(), world(unreachable=[Z2]))
    assert brief(p) == [("+", "create", "c0"), ("+", "create", "c2")]
    assert any("c1" in w and "unreachable" in w for w in p.warnings)


def test_races_are_independent() -> None:
    want = desired(
        slot("a0"),
        slot("a1", Z2),
        slot("b0"),
        slot("b1", Z2),
        groups=[group("ga", "a0", "a1"), group("gb", "b0", "b1")],
    )
    p = plan(want, world(active("a1", Z2), qr("a0"), qr("b0")))
    assert brief(p) == [("-", "delete", "a0"), ("+", "create", "b1")]


def test_a_loser_in_a_zone_that_was_not_fully_seen_is_not_deleted() -> None:
    p = plan(race(), world(running("c0"), at("c1", W), unreachable=[Z2]))
    assert all(a.zone != Z2 for a in p.actions)
