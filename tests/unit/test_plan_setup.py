"""Setup steps and notices on a live TPU: once per node instance and setup generation; tailscale
waits for bootstrap; a bumped generation or a re-created node runs them again."""

from __future__ import annotations

import pytest

from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core.memory import Memory, record_notice, record_setup
from reconciler.core.plan import Kind, Plan, plan
from reconciler.model.capacity import ErrorInfo
from reconciler.model.desired import Desired, SetupSpec
from reconciler.model.observed import NodeState, Observation
from tests.support.worlds import (
    Z2,
    active,
    brief,
    desired,
    failed,
    group,
    node,
    qr,
    setup,
    slot,
    world,
)

ALL = setup(bootstrap=True, tailscale=True, tmux=True)
LIVE = world(active("a", uid="1001"))


def held(flags: SetupSpec = ALL) -> Desired:
    return desired(slot("a", flags=flags))


def done(memory: Memory, *kinds: Kind, instance: str = "a@1001", generation: int = 0) -> Memory:
    for kind in kinds:
        memory = record_setup(
            memory, "a", kind.value, instance, 0 if kind is Kind.TMUX else generation
        )
    return memory


def test_a_new_tpu_gets_bootstrap_and_a_tmux_window_and_tailscale_waits() -> None:
    p = plan(held(), LIVE)
    assert brief(p) == [("~", "bootstrap", "a"), ("~", "tmux", "a")]
    assert all(a.instance == "a@1001" and a.state == "ACTIVE" for a in p.actions)
    assert p.counts() == (0, 2, 0)


def test_tailscale_follows_once_bootstrap_is_done() -> None:
    p = plan(held(), LIVE, done(Memory(), Kind.BOOTSTRAP, Kind.TMUX))
    assert brief(p) == [("~", "tailscale", "a")]


def test_everything_done_means_no_changes() -> None:
    memory = done(Memory(), Kind.BOOTSTRAP, Kind.TAILSCALE, Kind.TMUX)
    assert plan(held(), LIVE, memory).empty


def test_tailscale_alone_does_not_wait_for_a_bootstrap_that_is_off() -> None:
    p = plan(held(setup(tailscale=True)), LIVE)
    assert brief(p) == [("~", "tailscale", "a")]


def test_tailscale_waits_while_bootstrap_backs_off() -> None:
    (boot, _tmux) = plan(held(), LIVE).actions
    memory = failed(boot, message="script exited 1")
    p = plan(held(), LIVE, memory, now=1.0)
    assert brief(p) == [("~", "tmux", "a")]
    assert [h.action.kind for h in p.deferred] == [Kind.BOOTSTRAP]


def test_bumping_the_generation_reruns_setup_but_not_the_window() -> None:
    memory = done(Memory(), Kind.BOOTSTRAP, Kind.TAILSCALE, Kind.TMUX)
    bumped = held(setup(bootstrap=True, tailscale=True, tmux=True, generation=1))
    p = plan(bumped, LIVE, memory)
    assert brief(p) == [("~", "bootstrap", "a")]
    assert p.actions[0].generation == 1
    memory = done(memory, Kind.BOOTSTRAP, generation=1)
    assert brief(plan(bumped, LIVE, memory)) == [("~", "tailscale", "a")]


def test_a_recreated_node_is_set_up_again() -> None:
    memory = done(Memory(), Kind.BOOTSTRAP, Kind.TAILSCALE, Kind.TMUX)
    p = plan(held(), world(active("a", uid="2002")), memory)
    assert brief(p) == [("~", "bootstrap", "a"), ("~", "tmux", "a")]
    assert {a.instance for a in p.actions} == {"a@2002"}


def test_setup_off_does_nothing() -> None:
    assert plan(held(setup()), LIVE).empty


@pytest.mark.parametrize(
    "seen",
    [
        world(qr("a", state=QRState.PROVISIONING), node("a", state=NodeState.CREATING)),
        world(qr("a", state=QRState.ACTIVE), node("a", state=NodeState.REPAIRING)),
        world(qr("a", state=QRState.ACTIVE), node("a", ips=())),
        world(qr("a", state=QRState.ACTIVE)),
        world(qr("a", state=QRState.SUSPENDING), node("a")),
    ],
    ids=["provisioning", "node-repairing", "no-endpoints", "node-not-listed", "suspending"],
)
def test_no_setup_until_the_node_is_ready_to_ssh(seen: Observation) -> None:
    assert not [a for a in plan(held(), seen).actions if a.kind != Kind.CREATE]


def test_a_released_tpu_is_not_set_up() -> None:
    want = desired(slot("a", want="released", flags=ALL))
    assert brief(plan(want, LIVE)) == [("-", "delete", "a")]


def test_race_winner_is_set_up_and_losers_are_not() -> None:
    want = desired(slot("a", flags=ALL), slot("b", Z2, flags=ALL), groups=[group("g", "a", "b")])
    seen = world(
        active("a", uid="1"),
        qr("b", Z2, QRState.ACTIVE, created="2026-11-30T10:00:00Z"),
        node("b", Z2, uid="2"),
    )
    assert sorted(brief(plan(want, seen))) == [
        ("-", "delete", "b"),
        ("~", "bootstrap", "a"),
        ("~", "tmux", "a"),
    ]


# --- notices -----------------------------------------------------------------------------------


def _events(p: Plan) -> list[tuple[str, str]]:
    return [(n.slot, n.event) for n in p.notices]


def test_active_is_announced_once_per_instance() -> None:
    p = plan(held(setup()), LIVE)
    (notice,) = p.notices
    assert (notice.slot, notice.event) == ("a", "active") and "ACTIVE" in notice.title
    memory = record_notice(Memory(), notice.key)
    assert plan(held(setup()), LIVE, memory).notices == ()
    assert _events(plan(held(setup()), world(active("a", uid="2002")), memory)) == [("a", "active")]


def test_preemption_is_announced_once() -> None:
    seen = world(qr("a", state=QRState.SUSPENDED, initiator="SERVICE"))
    (notice,) = plan(held(), seen).notices
    assert notice.event == "preempted"
    assert plan(held(), seen, record_notice(Memory(), notice.key)).notices == ()


def test_failure_is_announced_with_the_clouds_message() -> None:
    seen = world(qr("a", state=QRState.FAILED, error=ErrorInfo(8, "out of v4 capacity")))
    (notice,) = plan(held(), seen).notices
    assert notice.event == "failed" and "out of v4 capacity" in notice.message


def test_a_user_suspension_is_not_announced_as_preemption() -> None:
    seen = world(qr("a", state=QRState.SUSPENDED, initiator="USER"))
    assert plan(held(), seen).notices == ()


def test_preemption_notice_of_a_released_slot_does_not_promise_a_requeue() -> None:
    want = desired(slot("a", want="released"))
    seen = world(qr("a", state=QRState.SUSPENDED, initiator="SERVICE"))
    for notice in plan(want, seen).notices:
        assert "re-queue" not in notice.message
