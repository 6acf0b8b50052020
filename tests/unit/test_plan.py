"""The planner's rules for single slots: hold, re-queue, release, unmanaged, prune, zones,
backoff and permanent errors. One row per rule; races and setup have their own files."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core.memory import (
    Memory,
    observe,
    record_dead_replaced,
    record_success,
)
from reconciler.core.plan import UNBACKED_NEW_DECISIONS, Action, Kind, Plan, in_motion, plan
from reconciler.errors import InvalidDesiredState
from reconciler.model.capacity import MANAGED_LABEL, MANAGED_VALUE, ErrorInfo
from reconciler.model.desired import Desired
from reconciler.model.load import parse_desired
from reconciler.model.observed import NodeState, Observation
from tests.support.worlds import Z1, Z2, active, brief, desired, failed, node, qr, slot, world

HELD = desired(slot("a"))
RELEASED = desired(slot("a", want="released"))
PRUNING = desired(slot("a"), prune=True)
FAILED_CAPACITY = ErrorInfo(8, "There is no more capacity in the zone")
FAILED_WINDOW = ErrorInfo(4, "valid_until_time passed before the request was granted")


@dataclass(frozen=True)
class Row:
    id: str
    want: Desired
    seen: Observation
    actions: list[tuple[str, str, str]]
    destructive: bool = False
    force: bool = False
    warns: str | None = None
    unmanaged: list[str] = field(default_factory=list)


ROWS = [
    # want: held
    Row("held, nothing queued: create", HELD, world(), [("+", "create", "a")]),
    *(
        Row(f"held, {s.value}: wait", HELD, world(qr("a", state=s)), [])
        for s in (
            QRState.CREATING,
            QRState.ACCEPTED,
            QRState.WAITING_FOR_RESOURCES,
            QRState.PROVISIONING,
            QRState.ACTIVE,
            QRState.SUSPENDING,
        )
    ),
    Row(
        "held, preempted (SUSPENDED by SERVICE): replace, force (the node still exists)",
        HELD,
        world(qr("a", state=QRState.SUSPENDED, initiator="SERVICE")),
        [("-/+", "replace", "a")],
        force=True,
    ),
    Row(
        "held, FAILED on capacity: replace",
        HELD,
        world(qr("a", state=QRState.FAILED, error=FAILED_CAPACITY)),
        [("-/+", "replace", "a")],
    ),
    Row(
        "held, FAILED after its window expired: replace",
        HELD,
        world(qr("a", state=QRState.FAILED, error=FAILED_WINDOW)),
        [("-/+", "replace", "a")],
    ),
    Row(
        "held, DELETING: wait for it to go, then create",
        HELD,
        world(qr("a", state=QRState.DELETING)),
        [],
    ),
    Row(
        "held, a state this version does not know: warn, touch nothing",
        HELD,
        world(qr("a", state=QRState.UNKNOWN, raw_state="HIBERNATING")),
        [],
        warns="HIBERNATING",
    ),
    Row(
        "held, QR of another accelerator: replace, destructive (the delete guard counts it)",
        HELD,
        world(active("a", accelerator="v4-16")),
        [("-/+", "replace", "a")],
        destructive=True,
        force=True,
    ),
    # want: released
    Row("released, nothing queued: nothing to do", RELEASED, world(), []),
    Row(
        "released, ACCEPTED: delete without force",
        RELEASED,
        world(qr("a")),
        [("-", "delete", "a")],
    ),
    Row(
        "released, WAITING_FOR_RESOURCES: delete without force",
        RELEASED,
        world(qr("a", state=QRState.WAITING_FOR_RESOURCES)),
        [("-", "delete", "a")],
    ),
    Row(
        "released, PROVISIONING: delete with force, not destructive",
        RELEASED,
        world(qr("a", state=QRState.PROVISIONING), node("a", state=NodeState.CREATING)),
        [("-", "delete", "a")],
        force=True,
    ),
    Row(
        "released, ACTIVE: delete with force, destructive",
        RELEASED,
        world(active("a")),
        [("-", "delete", "a")],
        destructive=True,
        force=True,
    ),
    Row(
        "released, ACTIVE but the node was already preempted: not destructive",
        RELEASED,
        world(qr("a", state=QRState.ACTIVE), node("a", state=NodeState.PREEMPTED)),
        [("-", "delete", "a")],
        force=True,
    ),
    Row(
        "released, ACTIVE, node not listed yet: still destructive",
        RELEASED,
        world(qr("a", state=QRState.ACTIVE)),
        [("-", "delete", "a")],
        destructive=True,
        force=True,
    ),
    Row(
        "released, SUSPENDED: delete with force",
        RELEASED,
        world(qr("a", state=QRState.SUSPENDED, initiator="SERVICE")),
        [("-", "delete", "a")],
        force=True,
    ),
    Row(
        "released, FAILED without a node: plain delete",
        RELEASED,
        world(qr("a", state=QRState.FAILED, error=FAILED_CAPACITY)),
        [("-", "delete", "a")],
    ),
    Row(
        "released, ACCEPTED but a node exists: force",
        RELEASED,
        world(qr("a"), node("a", state=NodeState.CREATING)),
        [("-", "delete", "a")],
        force=True,
    ),
    Row("released, already DELETING: wait", RELEASED, world(qr("a", state=QRState.DELETING)), []),
    # unmanaged and prune
    Row(
        "QR not in the file: reported, untouched",
        HELD,
        world(qr("a", state=QRState.WAITING_FOR_RESOURCES), active("stray")),
        [],
        unmanaged=["stray"],
    ),
    Row(
        "QR not in the file, prune on, labelled: deleted",
        PRUNING,
        world(qr("a"), qr("stray", state=QRState.WAITING_FOR_RESOURCES)),
        [("-", "delete", "stray")],
        unmanaged=["stray"],
    ),
    Row(
        "QR not in the file, prune on, labelled, ACTIVE: deleted, destructive",
        PRUNING,
        world(qr("a"), active("stray")),
        [("-", "delete", "stray")],
        destructive=True,
        force=True,
        unmanaged=["stray"],
    ),
    Row(
        "QR not in the file, prune on, without our label: untouched",
        PRUNING,
        world(qr("a"), qr("stray", labelled=False)),
        [],
        unmanaged=["stray"],
    ),
    Row(
        "QR not in the file, prune on, already DELETING: untouched",
        PRUNING,
        world(qr("a"), qr("stray", state=QRState.DELETING)),
        [],
        unmanaged=["stray"],
    ),
    Row(
        "slot's name in another zone: that QR is unmanaged; the slot's own is created",
        HELD,
        world(qr("a", Z2, state=QRState.ACTIVE)),
        [("+", "create", "a")],
        unmanaged=["a"],
    ),
    # zones that were not seen
    Row(
        "held in an unreachable zone: no create, a warning",
        HELD,
        world(unreachable=[Z1]),
        [],
        warns="unreachable",
    ),
    Row(
        "held in a zone the observation did not cover: no create",
        HELD,
        world(zones=[Z2]),
        [],
        warns="unreachable",
    ),
    Row(
        "prune never reaches into a zone whose listing failed",
        PRUNING,
        world(qr("a"), qr("stray", Z2), unreachable=[Z2]),
        [],
        unmanaged=["stray"],
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_rule(row: Row) -> None:
    p = plan(row.want, row.seen)
    assert brief(p) == row.actions
    for a in p.actions:
        assert (a.destructive, a.force) == (row.destructive, row.force)
        assert a.reason
    if row.warns:
        assert any(row.warns in w for w in p.warnings), p.warnings
    else:
        assert not p.warnings
    assert [q.name for q in p.unmanaged] == row.unmanaged


def test_destructive_deletes_say_so_in_their_reason() -> None:
    (a,) = plan(RELEASED, world(active("a"))).actions
    assert "running TPU" in a.reason


def test_replace_reason_names_the_cause() -> None:
    (preempted,) = plan(HELD, world(qr("a", state=QRState.SUSPENDED, initiator="SERVICE"))).actions
    assert "preempted" in preempted.reason
    (failed,) = plan(HELD, world(qr("a", state=QRState.FAILED, error=FAILED_CAPACITY))).actions
    assert "code 8" in failed.reason and "no more capacity" in failed.reason


def test_create_carries_label_mode_runtime_network_and_window() -> None:
    want = desired(
        slot("a", Z2, accelerator="v6e-8", mode="on-demand", valid_until=6 * 3600),
        network="tpu-net",
        subnets={Z2: "tpu-sub-ew4", Z1: "tpu-sub-usc2"},
        runtime_versions={"v6e": "v2-alpha-tpuv6e"},
        internal_ips=True,
    )
    (a,) = plan(want, world()).actions
    assert a.create is not None
    assert a.create.labels == {MANAGED_LABEL: MANAGED_VALUE}
    assert (a.create.name, a.create.zone) == ("a", Z2)
    assert (a.create.accelerator, a.create.mode) == ("v6e-8", "on-demand")
    assert a.create.image == want.slots[0].runtime_version
    assert (a.create.network, a.create.subnetwork) == ("tpu-net", "tpu-sub-ew4")
    assert a.create.valid_until_seconds == 6 * 3600
    assert a.create.internal_ips is True
    assert a.state == "NOT_QUEUED"


def test_create_without_network_settings_leaves_them_to_the_cloud() -> None:
    (a,) = plan(HELD, world()).actions
    assert a.create is not None
    assert (a.create.network, a.create.subnetwork, a.create.valid_until_seconds) == (
        None,
        None,
        None,
    )


def test_no_valid_intent_plans_nothing_and_reports_everything_as_unmanaged() -> None:
    seen = world(active("a"), qr("b", state=QRState.FAILED), qr("c", Z2))
    p = plan(None, seen)
    assert p.empty and not p.deferred and not p.blocked
    assert {q.name for q in p.unmanaged} == {"a", "b", "c"}
    assert p.warnings


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n   \n",
        "# only a comment\n",
        "project: my-project-123\nslots:\n  - name: a\n    zone: us-central2-b\n    accel",
        "project: my-project-123\nslots:\n  - name: a\n    zone: us-central2-b\n",
        "project: my-project-123\nslots: [\n",
        "project: my-project-123\nslots:\n  - name: a\n    zone: us-cen",
    ],
    ids=["empty", "blank", "comment", "cut-in-key", "cut-before-want", "open-flow", "cut-zone"],
)
def test_empty_or_half_written_file_yields_no_intent(text: str) -> None:
    """The loader refuses it, so the controller keeps planning from the last valid intent."""
    with pytest.raises(InvalidDesiredState):
        parse_desired(text)


# --- backoff after repeated deaths -----------------------------------------------------------

DEAD = world(qr("a", state=QRState.FAILED, error=FAILED_CAPACITY))


def test_first_death_is_requeued_at_once() -> None:
    memory = record_dead_replaced(Memory(), "a", now=100.0)
    assert brief(plan(HELD, world(), memory, now=100.0)) == [("+", "create", "a")]


def test_repeated_deaths_defer_the_create_exponentially() -> None:
    memory = Memory()
    for _ in range(3):
        memory = record_dead_replaced(memory, "a", now=100.0)
    p = plan(HELD, world(), memory, now=100.0)
    assert p.empty
    (held,) = p.deferred
    assert held.action.kind is Kind.CREATE and held.until == 120.0
    assert brief(plan(HELD, world(), memory, now=120.0)) == [("+", "create", "a")]


def test_backoff_is_per_slot() -> None:
    memory = record_dead_replaced(record_dead_replaced(Memory(), "a", 0.0), "a", 0.0)
    want = desired(slot("a"), slot("b"))
    assert brief(plan(want, world(), memory, now=0.0)) == [("+", "create", "b")]


def test_winning_capacity_forgets_the_death_streak() -> None:
    memory = Memory()
    for _ in range(4):
        memory = record_dead_replaced(memory, "a", now=0.0)
    memory = observe(memory, HELD, world(qr("a", state=QRState.PROVISIONING)), now=1.0)
    assert brief(plan(HELD, world(), memory, now=1.0)) == [("+", "create", "a")]


def test_the_dead_qr_is_deleted_even_while_the_create_backs_off() -> None:
    """A dead QR still holds quota: backoff only delays the re-create."""
    memory = record_dead_replaced(record_dead_replaced(Memory(), "a", 0.0), "a", 0.0)
    assert brief(plan(HELD, DEAD, memory, now=0.0)) == [("-/+", "replace", "a")]


# --- failed actions: backoff and permanent errors -------------------------------------------


def _create() -> Action:
    (a,) = plan(HELD, world()).actions
    return a


def test_a_failed_action_is_deferred_until_its_backoff_ends() -> None:
    memory = failed(_create(), now=50.0, message="UNAVAILABLE")
    p = plan(HELD, world(), memory, now=55.0)
    assert p.empty
    (held,) = p.deferred
    assert held.until == 60.0 and "UNAVAILABLE" in held.why
    assert brief(plan(HELD, world(), memory, now=60.0)) == [("+", "create", "a")]


def test_success_forgets_the_failures() -> None:
    create = _create()
    memory = record_success(failed(create), create.key)
    assert brief(plan(HELD, world(), memory, now=0.0)) == [("+", "create", "a")]


def test_a_permanent_error_blocks_until_the_intent_changes() -> None:
    memory = failed(_create(), permanent=True, message="no permission to submit into this queue")
    late = 10_000.0  # long past any backoff: only the fingerprint can unblock it
    p = plan(HELD, world(), memory, now=late)
    assert p.empty and not p.deferred
    (held,) = p.blocked
    assert "permission" in held.why
    changed = desired(slot("a", runtime_version="tpu-ubuntu2204-base-v2"))
    assert brief(plan(changed, world(), memory, now=late)) == [("+", "create", "a")]


def test_a_permanent_error_blocks_until_the_world_changes() -> None:
    seen = world(qr("a", state=QRState.WAITING_FOR_RESOURCES))
    (a,) = plan(RELEASED, seen).actions
    memory = failed(a, permanent=True)
    assert plan(RELEASED, seen, memory, now=10_000.0).blocked
    moved = world(qr("a", state=QRState.PROVISIONING))
    assert brief(plan(RELEASED, moved, memory, now=10_000.0)) == [("-", "delete", "a")]


def test_a_changed_intent_after_a_permanent_error_waits_for_no_backoff() -> None:
    """The fix of a refused request is a new decision: it goes at once, not after the
    backoff of the refusal; the refused request itself stays blocked meanwhile."""
    memory = failed(_create(), now=100.0, permanent=True, message="INVALID_ARGUMENT")
    assert (e := memory.error(_create().key)) is not None and e.not_before > 101.0
    assert plan(HELD, world(), memory, now=101.0).blocked
    changed = desired(slot("a", runtime_version="tpu-ubuntu2204-base-v2"))
    assert brief(plan(changed, world(), memory, now=101.0)) == [("+", "create", "a")]


def test_a_changed_world_after_a_permanent_error_waits_for_no_backoff() -> None:
    seen = world(qr("a", state=QRState.WAITING_FOR_RESOURCES))
    (a,) = plan(RELEASED, seen).actions
    memory = failed(a, now=100.0, permanent=True)
    assert plan(RELEASED, seen, memory, now=101.0).blocked
    moved = world(qr("a", state=QRState.PROVISIONING))
    assert brief(plan(RELEASED, moved, memory, now=101.0)) == [("-", "delete", "a")]


def test_a_world_flipping_between_refused_states_is_paced_by_the_backoff() -> None:
    """A new fingerprint skips the backoff only a few times in a row: a cloud that keeps
    flipping a QR between two states it refuses to delete in does not get a request per flip."""
    states = [QRState.WAITING_FOR_RESOURCES, QRState.PROVISIONING]
    memory, now, sent = None, 100.0, 0
    for flip in range(10):
        seen = world(qr("a", state=states[flip % 2]))
        p = plan(RELEASED, seen, memory or Memory(), now=now)
        if p.actions:
            sent += 1
            memory = failed(p.actions[0], memory=memory, now=now, permanent=True)
        now += 1.0
    assert sent == UNBACKED_NEW_DECISIONS
    assert p.deferred and not p.actions  # and then it waits out the backoff


def test_a_transient_error_still_backs_off_whatever_the_fingerprint() -> None:
    memory = failed(_create(), now=100.0, message="UNAVAILABLE")
    changed = desired(slot("a", runtime_version="tpu-ubuntu2204-base-v2"))
    p = plan(changed, world(), memory, now=101.0)
    assert p.empty and p.deferred


def test_errors_are_per_slot() -> None:
    memory = failed(_create(), permanent=True)
    want = desired(slot("a"), slot("b"))
    assert brief(plan(want, world(), memory, now=0.0)) == [("+", "create", "b")]


# --- zones the observation could not see -----------------------------------------------------

# rest.observe() reports a zone as unreachable when *either* the QR list or the node list could
# not reach it, so QRs can be present in an Observation for a zone it does not know.
_UNSEEN = [
    ("released", RELEASED, world(active("a"), unreachable=[Z1])),
    ("dead", HELD, world(qr("a", state=QRState.FAILED), unreachable=[Z1])),
]


@pytest.mark.parametrize(("want", "seen"), [r[1:] for r in _UNSEEN], ids=[r[0] for r in _UNSEEN])
def test_nothing_is_deleted_in_a_zone_that_was_not_fully_seen(
    want: Desired, seen: Observation
) -> None:
    assert plan(want, seen).cloud_actions == ()


# --- polling ----------------------------------------------------------------------------------


def test_poll_fast_while_a_managed_qr_moves_and_slow_when_steady() -> None:
    queued = world(qr("a", state=QRState.WAITING_FOR_RESOURCES))
    assert in_motion(HELD, queued, plan(HELD, queued).races)
    steady = world(active("a"), qr("stray", state=QRState.WAITING_FOR_RESOURCES))
    assert not in_motion(HELD, steady, plan(HELD, steady).races)


def test_plan_counts_follow_terraform() -> None:
    want = desired(slot("a"), slot("b"), slot("c", want="released"))
    seen = world(qr("b", state=QRState.FAILED), active("c"))
    p: Plan = plan(want, seen)
    assert sorted(brief(p)) == [
        ("+", "create", "a"),
        ("-", "delete", "c"),
        ("-/+", "replace", "b"),
    ]
    assert p.counts() == (2, 0, 2)


# --- zones not known to offer the accelerator ---------------------------------------------------


@pytest.mark.parametrize(
    ("zone", "accelerator", "unlisted"),
    [
        (Z1, "v4-8", False),  # us-central2-b offers v4
        (Z2, "v6e-8", False),  # europe-west4-a offers v6e
        ("us-east1-d", "v4-8", True),  # no v4 there, as far as model/tpu_zones knows
        ("us-east9-z", "v6e-8", True),  # a zone the table has never heard of
        (Z1, "v9z-8", False),  # a family the table does not know: no claim either way
    ],
)
def test_a_create_in_a_zone_not_known_to_offer_the_accelerator_is_marked_not_refused(
    zone: str, accelerator: str, unlisted: bool
) -> None:
    want = desired(slot("a", zone, accelerator=accelerator, runtime_version="tpu-base"))
    (create,) = plan(want, world(zones=[zone])).actions
    assert (create.kind, create.unlisted_zone) == (Kind.CREATE, unlisted)
