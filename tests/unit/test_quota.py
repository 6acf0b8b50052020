"""Chip quotas in the pure planner (``core/quota``) and the words around them: limits per zone
and per region, QRs counted in every state, races, waiting reasons, quota refusals parsed and
retried only when the use under them drops, and the ``quotas:`` entries' validation."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from reconciler.adapters.cloud_errors import Operation, classify
from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core import quota
from reconciler.core.memory import Memory, from_dict, to_dict
from reconciler.core.outcome import outcome
from reconciler.core.plan import Kind, Plan, plan
from reconciler.core.render import format_plan
from reconciler.errors import InvalidDesiredState, QuotaExceeded, TransientCloudError
from reconciler.model.capacity import CapacityRequest
from reconciler.model.desired import Desired, QuotaSpec
from reconciler.model.load import parse_desired
from reconciler.model.names import chip_count as chips
from reconciler.model.observed import Observation
from reconciler.model.quotas import parse_refusal, quota_id
from tests.support.worlds import qr, world

EW4A, EW4B, USC2B = "europe-west4-a", "europe-west4-b", "us-central2-b"
REFUSED = (
    "Quota 'TPUV6EPreemptiblePerProjectPerZoneForTPUAPI' exhausted. Limit: 16 in zone "
    "europe-west4-a."
)


def text(*slots: str, quotas: str = "", groups: str = "") -> str:
    body = "project: my-project-1\n"
    if quotas:
        body += "quotas:\n" + quotas
    body += ("slots:\n" + "".join(slots)) if slots else "slots: []\n"
    return body + (("race_groups:\n" + groups) if groups else "")


def s(
    name: str, zone: str = EW4A, acc: str = "v6e-8", mode: str = "spot", want: str = "held"
) -> str:
    w = f", want: {want}" if want else ""
    return f"  - {{name: {name}, zone: {zone}, accelerator: {acc}, mode: {mode}{w}}}\n"


def q(
    chips: int,
    zone: str | None = EW4A,
    region: str | None = None,
    family: str = "v6e",
    mode: str = "spot",
) -> str:
    where = f"zone: {zone}" if region is None else f"region: {region}"
    return f"  - {{family: {family}, mode: {mode}, {where}, chips: {chips}}}\n"


def planned(
    d: Desired, seen: Observation, memory: Memory | None = None
) -> tuple[list[str], list[str]]:
    p = plan(d, seen, memory)
    creates = [a.slot for a in p.actions if a.kind == Kind.CREATE]
    return creates, [f"{h.action.slot}: {h.why}" for h in p.gated if h.gate == quota.GATE]


def occupied(
    name: str,
    zone: str = EW4A,
    state: QRState = QRState.ACTIVE,
    acc: str = "v6e-8",
    mode: str = "spot",
    labelled: bool = True,
) -> CapacityRequest:
    return replace(qr(name, zone, state, accelerator=acc, labelled=labelled), mode=mode)


@dataclass(frozen=True)
class Row:
    id: str
    desired: str
    seen: Observation
    creates: list[str]
    waits: list[str]
    cloud: tuple[QuotaSpec, ...] = ()  # limits the Cloud Quotas API adds (quota_source: cloud)


def cloud(chips: int, place: str, scope: str = "zone") -> QuotaSpec:
    return QuotaSpec("v6e", "spot", scope, place, chips, "cloud", quota_id("v6e", "spot", scope))


WAIT_EW4A = "waiting for quota: 16/16 spot v6e chips in europe-west4-a"

ROWS = [
    Row("no quota: every create goes", text(s("a"), s("b"), s("c")), world(), ["a", "b", "c"], []),
    Row(
        "a zone limit of 16 chips: two v6e-8 go, the third waits",
        text(s("a"), s("b"), s("c"), quotas=q(16)),
        world(),
        ["a", "b"],
        [f"c: {WAIT_EW4A}"],
    ),
    *(
        Row(
            f"a QR {state.value} counts against the quota",
            text(s("a"), s("b"), quotas=q(8)),
            world(occupied("a", state=state)),
            [],
            ["b: waiting for quota: 8/8 spot v6e chips in europe-west4-a"],
        )
        for state in QRState
        if state != QRState.UNKNOWN
    ),
    Row(
        "an unmanaged QR counts too: the cloud counts every QR of the project",
        text(s("b"), quotas=q(8)),
        world(occupied("theirs", labelled=False)),
        [],
        ["b: waiting for quota: 8/8 spot v6e chips in europe-west4-a"],
    ),
    Row(
        "another mode, family or zone does not count",
        text(s("b"), quotas=q(8)),
        world(
            occupied("od", mode="on-demand"),
            occupied("v5", acc="v5litepod-8"),
            occupied("elsewhere", zone=EW4B),
        ),
        ["b"],
        [],
    ),
    Row(
        "a region limit counts every zone of the region",
        text(s("b", zone=EW4B), quotas=q(16, region="europe-west4")),
        world(occupied("a", zone=EW4A)),
        ["b"],
        [],
    ),
    Row(
        "a region limit past the use of both zones waits",
        text(s("c", zone=EW4B), quotas=q(16, region="europe-west4")),
        world(occupied("a", zone=EW4A), occupied("b", zone=EW4B)),
        [],
        ["c: waiting for quota: 16/16 spot v6e chips in europe-west4"],
    ),
    Row(
        "a cloud's region limit of 0 hides behind a roomy zone limit: it never fits",
        text(s("a"), quotas=q(64)),
        world(),
        [],
        ["a: never fits: needs 8, limit 0 spot v6e chips in europe-west4"],
        cloud=(cloud(0, "europe-west4", "region"),),
    ),
    Row(
        "a slot bigger than the cloud's limit never fits, even with nothing used",
        text(s("big", acc="v6e-32")),
        world(),
        [],
        ["big: never fits: needs 32, limit 16 spot v6e chips in europe-west4-a"],
        cloud=(cloud(16, EW4A),),
    ),
    Row(
        "a Compute Engine create is not counted under the TPU API's limit, nor the reverse",
        text(s("a"), s("ce").replace("mode: spot", "mode: spot, api: compute"), quotas=q(8)),
        world(occupied("b")),
        ["ce"],
        ["a: waiting for quota: 8/8 spot v6e chips in europe-west4-a"],
    ),
    Row(
        "a Compute Engine limit counts Compute Engine requests only",
        text(s("ce").replace("mode: spot", "mode: spot, api: compute")),
        world(occupied("b"), replace(occupied("c"), api="compute")),
        [],
        ["ce: waiting for quota: 8/8 spot v6e chips in europe-west4 on Compute Engine"],
        cloud=(replace(cloud(8, "europe-west4", "region"), api="compute"),),
    ),
    Row(
        "v4 types count cores: v4-8 is 4 chips",
        text(
            s("a", USC2B, "v4-8"),
            s("b", USC2B, "v4-8"),
            s("c", USC2B, "v4-8"),
            quotas=q(8, USC2B, family="v4"),
        ),
        world(),
        ["a", "b"],
        ["c: waiting for quota: 8/8 spot v4 chips in us-central2-b"],
    ),
    Row(
        "a race counts each candidate in its own zone",
        text(
            s("r1", EW4A, want=""),
            s("r2", EW4B, want=""),
            s("r3", "us-east1-d", want=""),
            quotas=q(8, EW4A),
            groups="  - {name: g, count: 1, slots: [r1, r2, r3]}\n",
        ),
        world(occupied("x", EW4A)),
        ["r3"],
        [
            "r1: waiting for quota: 8/8 spot v6e chips in europe-west4-a",
            "r2: never fits: needs 8, limit 0 spot v6e chips in europe-west4-b",
        ],
        cloud=(cloud(0, EW4B),),
    ),
    Row(
        "the chips of a create that goes count for the next: file order",
        text(s("big", acc="v6e-16"), s("small"), quotas=q(16)),
        world(),
        ["big"],
        ["small: waiting for quota: 16/16 spot v6e chips in europe-west4-a"],
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_planner_table(row: Row) -> None:
    d = parse_desired(row.desired)
    d = replace(d, quotas=d.quotas + row.cloud)
    assert planned(d, row.seen) == (row.creates, row.waits)


def test_the_plan_says_what_waits_and_why() -> None:
    p = plan(parse_desired(text(s("a"), s("b"), s("c"), quotas=q(16))), world())
    assert f"  waiting  create c: {WAIT_EW4A}\n" in format_plan(p)


def test_limits_show_use_and_who_waits() -> None:
    d = parse_desired(text(s("b"), s("c"), quotas=q(16) + q(100, region="europe-west4")))
    seen = world(occupied("a"))
    (zone, region) = quota.limits(d.quotas, seen, plan(d, seen).gated)
    assert (zone.used, zone.spec.chips, zone.waiting) == (8, 16, ("c",))
    assert (region.used, region.spec.chips, region.waiting) == (8, 100, ())


def test_every_create_carries_the_use_it_was_planned_on() -> None:
    d = parse_desired(text(s("b")))
    (a,) = plan(d, world(occupied("a"), occupied("z", EW4B))).actions
    assert a.chips_counted == ((EW4A, 8), ("europe-west4", 16))


# --- refusals ------------------------------------------------------------------------------


def test_the_refusal_text_is_read() -> None:
    r = parse_refusal(REFUSED)
    assert r is not None
    assert (r.quota_id, r.limit, r.scope, r.place) == (
        "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI",
        16,
        "zone",
        EW4A,
    )
    other = parse_refusal(
        "Quota limit 'TPUV4sPreemptiblePodPerProjectPerRegionForTPUAPI' has been exceeded. "
        "Limit: 0.0 in region us-central2."
    )
    assert other is not None and (other.limit, other.scope, other.place) == (
        0,
        "region",
        "us-central2",
    )
    assert parse_refusal("Rate limit exceeded for tpu.googleapis.com") is None


def test_a_quota_429_on_create_is_quota_exceeded_and_a_rate_limit_stays_transient() -> None:
    verdict = classify(Operation.CREATE, status="RESOURCE_EXHAUSTED", code=429, message=REFUSED)
    assert isinstance(verdict, QuotaExceeded)
    assert (verdict.quota_id, verdict.limit, verdict.place) == (
        "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI",
        16,
        EW4A,
    )
    assert REFUSED in verdict.message
    rate = classify(Operation.CREATE, code=429, message="Rate Limit Exceeded")
    assert isinstance(rate, TransientCloudError)
    listing = classify(Operation.LIST, code=429, message=REFUSED)
    assert isinstance(listing, TransientCloudError), "only a create is refused for quota"


def refused_once(d: Desired, seen: Observation) -> tuple[Plan, Memory]:
    """Plan, send the create of "c", have the cloud refuse it for quota."""
    p = plan(d, seen)
    (create,) = [a for a in p.actions if a.slot == "c"]
    error = classify(Operation.CREATE, status="RESOURCE_EXHAUSTED", code=429, message=REFUSED)
    assert isinstance(error, QuotaExceeded)
    done = outcome(create, error, Memory(), 100.0, None, 0.5)
    return p, done.memory


def test_a_refused_create_waits_until_the_use_under_its_quota_drops() -> None:
    d = parse_desired(text(s("a"), s("b"), s("c")))
    full = world(occupied("a"), occupied("b"))
    _, memory = refused_once(d, full)
    error = memory.error(f"{EW4A}/c:cloud")
    assert error is not None and error.quota is not None
    assert (error.quota.used, error.quota.limit) == (16, 16)
    # same use, much later (past any backoff): still blocked, with the cloud's words
    later = plan(d, full, memory, now=10_000.0)
    assert [a.slot for a in later.actions] == []
    (blocked,) = later.blocked
    assert blocked.gate == quota.GATE and REFUSED in blocked.why
    # another slot of another zone or mode going does not lift it
    noise = world(
        occupied("a"), occupied("b"), occupied("x", EW4B), occupied("y", mode="on-demand")
    )
    assert plan(d, noise, memory, now=10_000.0).actions == ()
    # "b" is deleted (preempted and gone): the use under the quota dropped, the create of "c"
    # goes again at once (with "b"'s own)
    freed = world(occupied("a"))
    assert [a.slot for a in plan(d, freed, memory, now=101.0).actions] == ["b", "c"]


def test_creates_sent_together_each_count_the_others_and_any_refused_one_goes_again() -> None:
    """Three creates of one pass go out at once; the cloud may refuse any of them (the one
    that reaches it third), so each counts the other two: the first in the file's order,
    refused, goes again once one of the two is gone (it waited forever when it counted 0)."""
    d = parse_desired(text(s("a"), s("b"), s("c")))
    p = plan(d, world())
    assert [a.chips_counted for a in p.actions] == [((EW4A, 16), ("europe-west4", 16))] * 3
    first = p.actions[0]
    error = classify(Operation.CREATE, status="RESOURCE_EXHAUSTED", code=429, message=REFUSED)
    assert isinstance(error, QuotaExceeded)
    memory = outcome(first, error, Memory(), 100.0, None, 0.5).memory
    both = world(occupied("b"), occupied("c"))
    assert plan(d, both, memory, now=10_000.0).actions == (), "still 16 counted: it waits"
    assert [a.slot for a in plan(d, world(occupied("c")), memory, now=101.0).actions] == [
        "a",
        "b",
    ]


def test_a_refusal_is_lifted_by_an_intent_change() -> None:
    d = parse_desired(text(s("a"), s("b"), s("c")))
    full = world(occupied("a"), occupied("b"))
    _, memory = refused_once(d, full)
    smaller = parse_desired(text(s("a"), s("b"), s("c", acc="v6e-4")))
    assert [a.slot for a in plan(smaller, full, memory, now=101.0).actions] == ["c"]


def test_the_snapshot_says_waiting_and_refused() -> None:
    d = parse_desired(text(s("a"), s("b"), s("c"), quotas=q(16)))
    p = plan(d, world())
    (waiting,) = quota.slot_states(d.quotas, p.gated, p.blocked, Memory()).values()
    assert (waiting.state, waiting.message, waiting.limit, waiting.place) == (
        "waiting",
        WAIT_EW4A,
        16,
        EW4A,
    )
    d2 = parse_desired(text(s("a"), s("b"), s("c")))
    full = world(occupied("a"), occupied("b"))
    _, memory = refused_once(d2, full)
    p2 = plan(d2, full, memory, now=10_000.0)
    refused = quota.slot_states(d2.quotas, p2.gated, p2.blocked, memory)["c"]
    assert (refused.state, refused.quota_id, refused.limit) == (
        "refused",
        "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI",
        16,
    )
    assert REFUSED in refused.message


def test_a_refusal_survives_a_restart() -> None:
    d = parse_desired(text(s("a"), s("b"), s("c")))
    _, memory = refused_once(d, world(occupied("a"), occupied("b")))
    again = from_dict(to_dict(memory))
    assert again.error(f"{EW4A}/c:cloud") == memory.error(f"{EW4A}/c:cloud")


# --- words and validation --------------------------------------------------------------------


def test_chips_per_type() -> None:
    assert [chips(t) for t in ("v6e-8", "v5litepod-16", "v4-8", "v5p-128", "v6e-1")] == [
        8,
        16,
        4,
        64,
        1,
    ]
    assert quota_id("v6e", "spot", "zone") == "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("{family: v6e, mode: spot, chips: 8}", "3:5: a quota needs a zone or a region"),
        (
            "{family: v6e, mode: spot, zone: europe-west4-a, region: europe-west4, chips: 8}",
            "a quota names either zone or region, not both",
        ),
        ("{family: v6e, mode: spott, zone: europe-west4-a, chips: 8}", "mode must be one of"),
        ("{family: v6e, mode: spot, region: europe-west4-a, chips: 8}", "expected a region"),
        ("{family: v6e, mode: spot, zone: europe-west4-a, chips: -1}", "3:"),
        ("{family: v6e, mode: spot, zone: europe-west4-a, chip: 8}", "3:"),
    ],
)
def test_a_bad_quota_entry_is_refused_at_its_place(entry: str, message: str) -> None:
    with pytest.raises(InvalidDesiredState) as e:
        parse_desired(f"project: my-project-1\nquotas:\n  - {entry}\nslots: []\n")
    assert message in str(e.value) and str(e.value).startswith("desired.yaml:3:")


def test_two_entries_for_one_place_are_refused() -> None:
    with pytest.raises(InvalidDesiredState) as e:
        parse_desired(text(quotas=q(8) + q(16)))
    assert "desired.yaml:4:" in str(e.value) and "already limited by quotas[0]" in str(e.value)


def test_entries_resolve_to_specs() -> None:
    d = parse_desired(text(quotas=q(8) + q(100, region="us-central2", family="v4")))
    assert d.quotas == (
        QuotaSpec("v6e", "spot", "zone", EW4A, 8),
        QuotaSpec("v4", "spot", "region", "us-central2", 100),
    )


def test_the_tui_plan_pane_and_the_info_pane_say_it() -> None:
    from reconciler.core.status import plan_status
    from reconciler.intent.views import format_slot_info
    from reconciler.surfaces.tui._frame import plan_lines

    p = plan(parse_desired(text(s("a"), s("b"), s("c"), quotas=q(16))), world())
    assert f"  waiting: + create c: {WAIT_EW4A}" in plan_lines(plan_status(p))
    doc = {
        "name": "c",
        "observed": {"state": "NOT_QUEUED", "quota": {"state": "waiting", "message": WAIT_EW4A}},
    }
    assert f"quota: waiting: {WAIT_EW4A}" in format_slot_info(doc).splitlines()


def test_validate_resolved_shows_limits_and_members() -> None:
    from reconciler.model.resolved import format_resolved

    d = parse_desired(
        text(quotas=q(16) + q(100, region="us-central2", family="v4"))
        + "members:\n  alice: {chips: {v6e: 8}, priority: 1}\n"
    )
    shown = format_resolved(d)
    assert (
        "quotas:\n  - family: v6e\n    mode: spot\n    api: tpu\n    zone: europe-west4-a\n"
        "    chips: 16\n" in shown
    )
    assert "    region: us-central2\n    chips: 100\n" in shown
    assert "members:\n  alice:\n    chips:\n      v6e: 8\n    priority: 1\n" in shown
    assert "quotas:" not in format_resolved(parse_desired(text(s("a"))))


def test_a_multislice_qr_counts_every_slice_and_a_multislice_create_asks_for_all() -> None:
    # a 2-slice v6e-8 QR holds 16 chips: with a 24-chip quota one more v6e-8 fits, not two
    held = replace(occupied("big"), slices=2)
    d = parse_desired(text(s("a"), s("b"), quotas=q(24)))
    assert planned(d, world(held)) == (
        ["a"],
        ["b: waiting for quota: 24/24 spot v6e chips in europe-west4-a"],
    )
    # and a create of 2 slices asks for 16: it goes with 16 free chips, waits with 8
    two = "  - {name: c, zone: europe-west4-a, accelerator: v6e-8, mode: spot, slices: 2,"
    two += " want: held}\n"
    d = parse_desired(text(two, quotas=q(24)))
    assert planned(d, world(occupied("one"))) == (["c"], [])
    assert planned(d, world(occupied("one"), occupied("two")))[1] == [
        "c: waiting for quota: 16/24 spot v6e chips in europe-west4-a"
    ]


def test_flex_start_counts_against_the_spot_quota() -> None:
    flex = (
        "  - {name: f, zone: europe-west4-a, accelerator: v6e-8, mode: flex-start,"
        " max_run_duration: 1d, want: held}\n"
    )
    d = parse_desired(text(flex, quotas=q(8)))
    assert planned(d, world(occupied("spot1"))) == (
        [],
        ["f: waiting for quota: 8/8 spot v6e chips in europe-west4-a"],
    )
    running = replace(occupied("f2"), mode="flex-start")
    assert quota.tally(world(running))[("tpu", "v6e", "spot", "zone", EW4A)] == 8
