"""format_plan: Terraform-style text a user reads before `apply` — symbols, reasons, the
destructive flag, what is held back and why, and the summary line; and the status table's
LATENCY cell."""

from __future__ import annotations

import pytest

from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core.memory import Memory, record_dead_replaced
from reconciler.core.plan import Plan, plan
from reconciler.core.render import format_latency, format_plan
from reconciler.model.capacity import ErrorInfo
from reconciler.model.desired import Desired
from reconciler.model.observed import Observation
from tests.support.worlds import (
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

UNSEEN = "asia-northeast1-b"


def _mixed() -> tuple[Desired, Observation]:
    want = desired(
        slot("od-v4-8-usc2b-1", flags=setup(bootstrap=True, tmux=True)),
        slot("spot-v48-usc2b-1"),
        slot("spot-v48-usc2b-2"),
        slot("old-v4-8", want="released"),
        slot("c-ew4a", Z2, accelerator="v6e-8"),
        slot("c-use1d", Z3, accelerator="v6e-8"),
        slot("denied", "us-east5-b"),
        slot("lost", UNSEEN),
        groups=[group("any-v6e-8", "c-ew4a", "c-use1d")],
    )
    seen = world(
        active("od-v4-8-usc2b-1", uid="42"),
        qr("spot-v48-usc2b-2", state=QRState.FAILED, error=ErrorInfo(8, "no capacity")),
        active("old-v4-8", uid="7"),
        qr("c-ew4a", Z2, QRState.PROVISIONING, accelerator="v6e-8"),
        qr("c-use1d", Z3, QRState.WAITING_FOR_RESOURCES, accelerator="v6e-8"),
        qr("stray", Z3, QRState.ACTIVE, labelled=False),
        unreachable=[UNSEEN],
    )
    return want, seen


def mixed_plan() -> Plan:
    """Every kind of line: -, ~, -/+, destructive, deferred, blocked, warning, unmanaged."""
    want, seen = _mixed()
    memory = Memory()
    for _ in range(3):  # third death in a row: the re-create backs off 20 s
        memory = record_dead_replaced(memory, "spot-v48-usc2b-1", 1000.0)
    (denied,) = [a for a in plan(want, seen, memory, 1000.0).actions if a.slot == "denied"]
    memory = failed(
        denied,
        memory=memory,
        now=1000.0,
        permanent=True,
        message="no permission to submit into this queue",
    )
    return plan(want, seen, memory, 1005.0)


GOLDEN = "\n".join(
    [
        "tpu-reconciler will perform these actions:",
        "    - delete    c-use1d           us-east1-d       race any-v6e-8 won by c-ew4a",
        "    ~ bootstrap od-v4-8-usc2b-1   us-central2-b    "
        "node od-v4-8-usc2b-1@42 generation 0 not set up",
        "    ~ tmux      od-v4-8-usc2b-1   us-central2-b    open an SSH window",
        "  -/+ replace   spot-v48-usc2b-2  us-central2-b    FAILED (code 8): no capacity; re-queue",
        "    - delete    old-v4-8          us-central2-b    "
        "want: released — deletes a running TPU  [destructive]",
        "",
        "  deferred create spot-v48-usc2b-1: re-queue backing off after repeated failures (in 15s)",
        "  blocked  create denied: permanent error: no permission to submit into this queue",
        "  warning: lost: zone asia-northeast1-b unreachable; not acting",
        "  unmanaged (not in the file; left alone): stray (us-east1-d, ACTIVE)",
        "",
        "Plan: 1 to add, 2 to change, 3 to destroy.",
        "",
    ]
)


def test_a_mixed_plan_reads_like_terraform() -> None:
    assert format_plan(mixed_plan(), now=1005.0) == GOLDEN


def test_creates_and_replaces_both_count_as_added() -> None:
    want = desired(slot("a"), slot("b"))
    text = format_plan(plan(want, world(qr("b", state=QRState.SUSPENDED))))
    assert text == (
        "tpu-reconciler will perform these actions:\n"
        "    + create    a  us-central2-b    want: held, not queued\n"
        "  -/+ replace   b  us-central2-b    suspended (SUSPENDED by unknown); re-queue\n"
        "\n"
        "Plan: 2 to add, 0 to change, 1 to destroy.\n"
    )


def test_nothing_to_do_says_no_changes() -> None:
    assert format_plan(plan(desired(slot("a")), world(active("a")))) == "No changes.\n"


def test_held_back_actions_alone_are_still_no_changes() -> None:
    want = desired(slot("a"))
    memory = failed(plan(want, world()).actions[0], now=0.0, message="UNAVAILABLE")
    assert format_plan(plan(want, world(), memory, now=1.0), now=1.0) == (
        "  deferred create a: retrying after error: UNAVAILABLE (in 9s)\n\nNo changes.\n"
    )


def test_without_a_clock_the_wait_is_not_guessed() -> None:
    assert "(in " not in format_plan(mixed_plan())


def test_a_create_in_a_zone_not_known_to_offer_the_accelerator_says_so_on_its_line() -> None:
    want = desired(slot("odd", "us-east9-z", accelerator="v6e-8"), slot("usual"))
    text = format_plan(plan(want, world(zones=["us-east9-z", "us-central2-b"])))
    lines = {line.split()[2]: line for line in text.splitlines() if line.startswith("  + ")}
    assert lines["odd"].endswith("  [zone not known to offer v6e-8]"), text
    assert "not known" not in lines["usual"], text


@pytest.mark.parametrize(
    ("ms", "cell"),
    [(None, "-"), (0.2, "<1ms"), (1.0, "~1ms"), (139.6, "~140ms"), (1999.4, "~1999ms")],
)
def test_a_round_trip_reads_as_the_earlier_tools_column(ms: float | None, cell: str) -> None:
    assert format_latency(ms) == cell


def test_a_create_in_an_unlisted_zone_carries_its_note_into_the_snapshot() -> None:
    from reconciler.core.status import plan_status

    want = desired(slot("odd", "us-east9-z", accelerator="v6e-8"), slot("usual"))
    status = plan_status(plan(want, world(zones=["us-east9-z", "us-central2-b"])))
    notes = {a.slot: a.note for a in status.actions}
    assert notes == {"odd": "zone not known to offer v6e-8", "usual": ""}


def test_the_race_line_names_an_across_groups_one_program() -> None:
    from reconciler.core.render import race_line
    from reconciler.model.status import RaceGroupStatus, WorkloadStatus

    plain = RaceGroupStatus(name="pair", count=2, winners=("a1",), candidates=("a1", "a2"))
    assert race_line(plain) == "race pair: 1/2 won (a1)"
    running = WorkloadStatus(state="running", summary="running 5m · attempt 2")
    across = RaceGroupStatus(name="pair", count=2, winners=("a1", "a2"), workload=running)
    assert race_line(across) == "race pair: 2/2 won (a1, a2); program running 5m · attempt 2"
