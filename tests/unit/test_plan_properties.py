"""Properties of the planner over generated intents and worlds.

- Applying a plan and planning again converges: nothing is left to do (a tailscale step that
  waited for its bootstrap, and the queueing of a race whose winner was replaced for a changed
  shape, are the only things a second pass may add).
- No action touches a QR that is not ours (unless prune is on and it carries our label), no
  held slot is deleted unless it is dead or of another shape (replaced) or lost its race,
  nothing happens in a zone the observation did not see, and every create carries the intent.
- A failed action is held back (deferred or blocked) and the rest of the plan is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core.memory import Memory, record_dead_replaced
from reconciler.core.plan import CLOUD_KINDS, Kind, Plan, plan
from reconciler.model.capacity import (
    DEAD_STATES,
    MANAGED_LABEL,
    MANAGED_VALUE,
    WON_STATES,
    CapacityRequest,
)
from reconciler.model.desired import Desired, RaceGroupSpec, SlotSpec
from reconciler.model.observed import Node, NodeState, Observation
from tests.support.worlds import (
    ZONES,
    apply_plan,
    desired,
    failed,
    group,
    node,
    qr,
    scaled_world,
    setup,
    slot,
    world,
)

Draw = Callable[[st.SearchStrategy[Any]], Any]
Scenario = tuple[Desired, Observation, Memory, float]

_NODE_STATES = (NodeState.READY, NodeState.CREATING, NodeState.PREEMPTED, NodeState.REPAIRING)
_TIMES = ("2026-11-30T09:00:00Z", "2026-11-30T09:00:01Z", None)  # few values: ties happen


def _slots(draw: Draw, names: list[str]) -> list[SlotSpec]:
    specs = []
    for name in names:
        flags = setup(
            bootstrap=draw(st.booleans()),
            tailscale=draw(st.booleans()),
            tmux=draw(st.booleans()),
            generation=draw(st.integers(0, 2)),
        )
        specs.append(
            slot(
                name,
                draw(st.sampled_from(ZONES)),
                accelerator=draw(st.sampled_from(("v4-8", "v6e-8"))),
                want=draw(st.sampled_from(("held", "released"))),
                mode=draw(st.sampled_from(("spot", "on-demand", "reserved"))),
                valid_until=draw(st.none() | st.integers(60, 86400)),
                flags=flags,
            )
        )
    return specs


def _groups(draw: Draw, names: list[str]) -> list[RaceGroupSpec]:
    pool = list(draw(st.permutations(names)))
    groups = []
    for gi in range(draw(st.integers(0, 3))):
        size = draw(st.integers(1, 4))
        members, pool = pool[:size], pool[size:]
        if not members:
            break
        groups.append(group(f"g{gi}", *members, count=draw(st.integers(0, len(members)))))
    return groups


def _resources(draw: Draw, name: str, home: str, accelerator: str) -> list[CapacityRequest | Node]:
    state = draw(st.none() | st.sampled_from(QRState))
    if state is None:
        return []
    zone = home if draw(st.integers(0, 4)) else draw(st.sampled_from(ZONES))
    if draw(st.integers(0, 6)) == 0:
        accelerator = "v4-16"
    out: list[CapacityRequest | Node] = [
        qr(
            name,
            zone,
            state,
            accelerator=accelerator,
            labelled=draw(st.booleans()),
            created=draw(st.sampled_from(_TIMES)),
            initiator=draw(st.sampled_from(("SERVICE", "USER", None))),
            raw_state="SOMETHING_NEW" if state is QRState.UNKNOWN else "",
        )
    ]
    if state not in (QRState.ACCEPTED, QRState.WAITING_FOR_RESOURCES) and draw(st.booleans()):
        out.append(
            node(
                name,
                zone,
                draw(st.sampled_from(_NODE_STATES)),
                uid=draw(st.sampled_from(("1", "2"))),
                ips=draw(st.sampled_from(((), ("10.0.0.2",), ("10.0.0.2", "10.0.0.3")))),
                accelerator=accelerator,
            )
        )
    return out


@st.composite
def scenarios(draw: Draw) -> Scenario:
    names = [f"s{i}" for i in range(draw(st.integers(0, 8)))]
    specs = _slots(draw, names)
    want = desired(
        *specs,
        groups=_groups(draw, names),
        prune=draw(st.booleans()),
        network=draw(st.none() | st.just("tpu-net")),
        subnets={ZONES[0]: "sub-a"},
    )
    unreachable = draw(st.frozensets(st.sampled_from(ZONES), max_size=2))
    items: list[CapacityRequest | Node] = []
    for spec in specs:
        items += _resources(draw, spec.name, spec.zone, spec.accelerator)
    for i in range(draw(st.integers(0, 3))):  # QRs that are not in the file
        items += _resources(draw, f"stray{i}", draw(st.sampled_from(ZONES)), "v4-8")
    # A listing that could not reach a zone returns nothing from it.
    seen = world(*(i for i in items if i.zone not in unreachable), unreachable=unreachable)
    memory = Memory()
    for name in draw(st.lists(st.sampled_from(names), max_size=3)) if names else ():
        memory = record_dead_replaced(memory, name, now=0.0)
    return want, seen, memory, draw(st.sampled_from((0.0, 5.0, 1000.0)))


def _converged(want: Desired, seen: Observation, memory: Memory, now: float) -> None:
    first = plan(want, seen, memory, now)
    assert plan(want, seen, memory, now) == first, "the same inputs give the same plan"
    assert all(a.reason for a in first.actions), "every action says why"
    seen2, memory2 = apply_plan(first, want, seen, memory, now)
    second = plan(want, seen2, memory2, now)
    bootstrapped = {a.slot for a in first.actions if a.kind is Kind.BOOTSTRAP}
    # a winner replaced because the file changed its shape no longer holds: its race reopens
    reshaped = {a.slot for a in first.actions if a.reshape}
    reopened = {n for g in want.race_groups if reshaped & set(g.slots) for n in g.slots}
    assert all(
        (a.kind is Kind.TAILSCALE and a.slot in bootstrapped)
        or (a.kind is Kind.CREATE and a.slot in reopened)
        for a in second.actions
    ), second.actions
    assert second.notices == ()
    seen3, memory3 = apply_plan(second, want, seen2, memory2, now)
    third = plan(want, seen3, memory3, now)
    assert third.actions == (), third.actions


@settings(max_examples=250, deadline=None)
@given(scenarios())
def test_applying_a_plan_then_planning_again_leaves_nothing_to_do(s: Scenario) -> None:
    _converged(*s)


def test_a_large_mixed_world_converges() -> None:
    want, seen = scaled_world(600, seed=7)
    _converged(want, seen, Memory(), 0.0)


def _is_ours(want: Desired, q: CapacityRequest) -> bool:
    spec = want.slot(q.name)
    return spec is not None and spec.zone == q.zone


def _check_safety(want: Desired, seen: Observation, p: Plan) -> None:
    keys = [(a.zone, a.slot) for a in p.cloud_actions]
    assert len(keys) == len(set(keys)), "two cloud actions on one QR in one pass"
    open_race = {r.name: r.open for r in p.races}
    for a in p.cloud_actions:
        assert a.zone not in seen.unreachable, f"{a} in a zone that was not seen"
        q = seen.request(a.zone, a.slot)
        spec = want.slot(a.slot)
        if a.kind is Kind.CREATE:
            assert q is None and spec is not None and spec.zone == a.zone
            assert p.decided_want[a.slot] == "held"
            assert a.create is not None
            assert a.create.labels == {MANAGED_LABEL: MANAGED_VALUE}
            assert (a.create.accelerator, a.create.mode) == (spec.accelerator, spec.mode)
            assert a.create.image == spec.runtime_version
            assert a.create.valid_until_seconds == spec.valid_until_seconds
            assert a.create.network == want.settings.network
            assert a.create.subnetwork == want.settings.subnets.get(a.zone)
            continue
        assert q is not None and q.api_state != QRState.DELETING
        n = seen.node_of(q)
        running = q.api_state == QRState.ACTIVE and (
            n is None or n.state is not NodeState.PREEMPTED
        )
        assert a.destructive == running
        if not _is_ours(want, q):
            assert want.settings.prune and q.managed and a.kind is Kind.DELETE, a
            continue
        assert spec is not None
        if a.kind is Kind.REPLACE and a.reshape:  # another shape than the file's
            assert q.accelerator != spec.accelerator and p.decided_want[a.slot] == "held"
        elif a.kind is Kind.REPLACE:
            assert q.state in DEAD_STATES and p.decided_want[a.slot] == "held"
        else:
            assert p.decided_want[a.slot] == "released"
            if spec.race_group is None:
                assert spec.want == "released"
            else:
                assert not open_race[spec.race_group], "a candidate deleted in an open race"
    for a in p.actions:
        if a.kind not in CLOUD_KINDS:
            assert a.zone not in seen.unreachable
            q = seen.request(a.zone, a.slot)
            assert q is not None and q.api_state == QRState.ACTIVE and _is_ours(want, q)


@settings(max_examples=250, deadline=None)
@given(scenarios())
def test_no_action_on_what_is_not_ours_or_is_held_or_unseen(s: Scenario) -> None:
    want, seen, memory, now = s
    _check_safety(want, seen, plan(want, seen, memory, now))


@settings(max_examples=100, deadline=None)
@given(scenarios())
def test_a_closed_race_deletes_every_other_winner_and_an_open_one_deletes_none(
    s: Scenario,
) -> None:
    want, seen, memory, now = s
    p = plan(want, seen, memory, now)
    deleted = {(a.zone, a.slot) for a in p.cloud_actions if a.kind is Kind.DELETE}
    for race in p.races:
        specs = [spec for c in race.candidates if (spec := want.slot(c)) is not None]
        won = [
            c.name
            for c in specs
            if (q := seen.request(c.zone, c.name)) is not None and q.state in WON_STATES
        ]
        cancelled = {c.name for c in specs if (c.zone, c.name) in deleted}
        assert set(race.winners) <= set(won)
        assert len(race.winners) == min(race.count, len(won))
        if race.open:
            assert not cancelled, race
        else:
            for c in won:
                assert (c in race.winners) != (c in cancelled), (race, c)


@settings(max_examples=100, deadline=None)
@given(scenarios(), st.data())
def test_a_failed_action_is_held_back_and_the_rest_of_the_plan_stands(
    s: Scenario, data: st.DataObject
) -> None:
    want, seen, memory, now = s
    first = plan(want, seen, memory, now)
    picks = data.draw(st.sets(st.integers(0, max(0, len(first.actions) - 1))))
    broken = [first.actions[i] for i in sorted(picks) if i < len(first.actions)]
    permanent = data.draw(st.booleans())
    for a in broken:
        memory = failed(a, memory=memory, now=now, permanent=permanent)
    again = plan(want, seen, memory, now)
    keys = {a.key for a in broken}
    assert again.actions == tuple(a for a in first.actions if a.key not in keys)
    held = again.blocked if permanent else again.deferred
    assert all(a in [h.action for h in held] for a in broken)
