"""Flex-start and node health in the pure planner, status and render: one row per rule.

A flex-start run's end is *expired*, never a preemption: nothing is re-queued unless
``renew: true``; a suspension well before the end is an interruption and re-queued. A node's
health, symptoms and maintenance are shown and notified, and never by themselves a reason to
act: the plan with them is the plan without them."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from reconciler.adapters.tpu_api_parse import QRState, node_from_api, request_from_api
from reconciler.core import flex, node_health
from reconciler.core.memory import Memory, record_notice
from reconciler.core.plan import plan
from reconciler.core.render import format_status, status_rows
from reconciler.core.status import build_status
from reconciler.core.workload import WorkloadAct, launch_request
from reconciler.errors import InvalidDesiredState
from reconciler.model.capacity import CapacityRequest
from reconciler.model.desired import WorkloadSpec
from reconciler.model.load import parse_desired
from reconciler.model.observed import Maintenance, Node, Symptom
from reconciler.model.stamps import epoch
from tests.support.worlds import Z1, desired, node, qr, slot, world

END = "2026-12-01T12:00:00Z"
T_END = epoch(END)
FLEX = replace(slot("f", mode="flex-start", accelerator="v6e-8"), max_run_seconds=6 * 3600)
RENEW = replace(FLEX, renew=True)


def flex_qr(
    state: QRState, *, end: str | None = END, initiator: str | None = None
) -> CapacityRequest:
    return replace(
        qr("f", state=state, accelerator="v6e-8", initiator=initiator),
        mode="flex-start",
        termination_time=end,
    )


def flex_node(**changes: object) -> Node:
    return replace(node("f", accelerator="v6e-8"), **changes)  # type: ignore[arg-type]


def kinds(p: object) -> list[tuple[str, str]]:
    return [(a.kind.value, a.slot) for a in p.actions]  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Row:
    id: str
    spec: object
    seen: CapacityRequest | None
    now: float
    actions: list[tuple[str, str]]
    expired: bool


ROWS = [
    Row("flex, nothing queued: create", FLEX, None, T_END - 9000, [("create", "f")], False),
    Row("flex, ACTIVE: wait", FLEX, flex_qr(QRState.ACTIVE), T_END - 60, [], False),
    Row("flex, SUSPENDED at its end: expired, nothing", FLEX,
        flex_qr(QRState.SUSPENDED, initiator="SERVICE"), T_END + 5, [], True),
    Row("flex, SUSPENDING at its end: expired, nothing", FLEX,
        flex_qr(QRState.SUSPENDING, initiator="SERVICE"), T_END + 1, [], True),
    Row("flex, SUSPENDED, end unknown (v2 read): expired, nothing", FLEX,
        flex_qr(QRState.SUSPENDED, end=None, initiator="SERVICE"), T_END, [], True),
    Row("flex renew, SUSPENDED at its end: replace once", RENEW,
        flex_qr(QRState.SUSPENDED, initiator="SERVICE"), T_END + 5, [("replace", "f")], True),
    Row("flex renew, SUSPENDING: wait for SUSPENDED", RENEW,
        flex_qr(QRState.SUSPENDING, initiator="SERVICE"), T_END + 1, [], True),
    Row("flex, SUSPENDED an hour early: interruption, re-queued", FLEX,
        flex_qr(QRState.SUSPENDED, initiator="SERVICE"), T_END - 3600, [("replace", "f")], False),
    Row("flex, FAILED: re-queued like any slot", FLEX, flex_qr(QRState.FAILED), T_END + 5,
        [("replace", "f")], False),
    Row("spot, SUSPENDED: a preemption, re-queued", slot("f"),
        qr("f", state=QRState.SUSPENDED, initiator="SERVICE"), T_END + 5, [("replace", "f")],
        False),
]  # fmt: skip


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_flex_rules(row: Row) -> None:
    want = desired(row.spec)  # type: ignore[arg-type]
    seen = world(*([row.seen] if row.seen else []))
    assert kinds(plan(want, seen, Memory(), row.now)) == row.actions
    assert flex.expired(row.spec, row.seen, row.now) is row.expired  # type: ignore[arg-type]
    snap = build_status(
        desired=want, desired_file="d", errors=(), observation=seen, observed_at=row.now,
        memory=Memory(), plan=None, now=row.now, backend="rest",
    )  # fmt: skip
    assert snap.slots[0].expired is row.expired
    assert (status_rows(snap, row.now)[0][5] == "expired") is row.expired


def test_the_create_carries_the_run_length() -> None:
    (action,) = plan(desired(FLEX), world(), Memory(), 0.0).actions
    assert action.create is not None
    assert (action.create.mode, action.create.max_run_seconds) == ("flex-start", 21600)


def test_expired_is_told_once_and_never_as_a_preemption() -> None:
    seen = world(flex_qr(QRState.SUSPENDED, initiator="SERVICE"))
    notices = plan(desired(FLEX), seen, Memory(), T_END + 5).notices
    assert [n.event for n in notices] == ["expired"]
    assert "not queued again" in notices[0].message
    told = record_notice(Memory(), notices[0].key)
    assert plan(desired(FLEX), seen, told, T_END + 5).notices == ()


@pytest.mark.parametrize(
    ("left", "told"),
    [(31 * 60, False), (30 * 60, True), (5 * 60, True), (0, False)],
)
def test_a_notice_goes_out_30_minutes_before_the_end(left: float, told: bool) -> None:
    seen = world(flex_qr(QRState.ACTIVE), flex_node())
    events = [n.event for n in plan(desired(FLEX), seen, Memory(), T_END - left).notices]
    assert ("ending" in events) is told


def test_status_says_when_the_run_ends() -> None:
    seen = world(flex_qr(QRState.ACTIVE), flex_node())
    now = T_END - (5 * 3600 + 12 * 60)
    snap = build_status(
        desired=desired(FLEX), desired_file="d", errors=(), observation=seen, observed_at=now,
        memory=Memory(), plan=None, now=now, backend="rest",
    )  # fmt: skip
    assert snap.slots[0].ends_at == END
    assert "ends in 5h12m" in status_rows(snap, now)[0][-1]


def test_a_launch_on_a_flex_run_carries_its_end() -> None:
    act = flex.with_end(WorkloadAct("launch", "r1", 1), flex_qr(QRState.ACTIVE))
    spec = replace(FLEX, workload=WorkloadSpec(command="true"))
    assert launch_request(spec, act, 2).termination_time == END
    assert flex.with_end(WorkloadAct("stop", "r1", 1), flex_qr(QRState.ACTIVE)).ends_at is None


# --- node health -----------------------------------------------------------------------------

SICK = [
    {"health": "UNHEALTHY_TENSORFLOW"},
    {"health": "TIMEOUT"},
    {"symptoms": (Symptom("HBM_OUT_OF_MEMORY", "2"), Symptom("MESH_BUILD_FAIL"))},
    {"maintenance": Maintenance("SCHEDULED", "PENDING", "2026-12-02T08:00:00Z", None, True)},
    {"health": "UNHEALTHY_MAINTENANCE", "maintenance": Maintenance("UNSCHEDULED", "ONGOING")},
]


@pytest.mark.parametrize("changes", SICK, ids=lambda c: "+".join(c))
@pytest.mark.parametrize("spec", [slot("a"), FLEX], ids=["spot", "flex"])
def test_node_signals_are_shown_and_never_acted_on(
    changes: dict[str, object], spec: object
) -> None:
    name = spec.name  # type: ignore[attr-defined]
    healthy = world(replace(qr(name, state=QRState.ACTIVE)), node(name))
    sick_node = replace(node(name), **changes)  # type: ignore[arg-type]
    sick = world(replace(qr(name, state=QRState.ACTIVE)), sick_node)
    want = desired(spec)  # type: ignore[arg-type]
    before, after = plan(want, healthy, Memory(), 0.0), plan(want, sick, Memory(), 0.0)
    assert after.actions == before.actions
    assert after.deferred == before.deferred and after.blocked == before.blocked
    told = [n for n in after.notices if n.event == "health"]
    assert told and all(n.message for n in told)
    snap = build_status(
        desired=want, desired_file="d", errors=(), observation=sick, observed_at=0.0,
        memory=Memory(), plan=after, now=0.0, backend="rest",
    )  # fmt: skip
    row = snap.slots[0]
    assert row.health_note and " — " in row.health_note  # what, then what the user can do
    assert row.health_note in format_status(snap, 0.0)


def test_health_notices_once_per_signal() -> None:
    sick = replace(node("a"), symptoms=(Symptom("OUT_OF_MEMORY", "0"),))
    (notice,) = node_health.notices("a", sick, ())
    assert notice.title == "a node: OUT_OF_MEMORY on worker 0"
    assert node_health.notices("a", sick, {notice.key}) == []
    assert node_health.notices("a", node("a"), ()) == []


# --- the API's JSON ----------------------------------------------------------------------------


def test_v2alpha1_queued_resource_and_node_signals_parse() -> None:
    q = request_from_api(
        {
            "name": f"projects/p/locations/{Z1}/queuedResources/f",
            "provisioningModel": "FLEX_START",
            "runDuration": {"maxRunDuration": "21600s", "terminationTime": END},
            "state": {"state": "ACTIVE"},
        }
    )
    assert (q.mode, q.termination_time) == ("flex-start", END)
    n = node_from_api(
        {
            "name": f"projects/p/locations/{Z1}/nodes/f",
            "state": "READY",
            "health": "TIMEOUT",
            "symptoms": [{"symptomType": "EXECUTE_TIMED_OUT", "workerId": "1", "details": "x"}],
            "upcomingMaintenance": {"type": "SCHEDULED", "canReschedule": True},
        }
    )
    assert n.symptoms == (Symptom("EXECUTE_TIMED_OUT", "1", "x"),)
    assert n.maintenance == Maintenance("SCHEDULED", can_reschedule=True)
    assert node_health.signals(n) == (
        "EXECUTE_TIMED_OUT on worker 1",
        "health TIMEOUT",
        "maintenance SCHEDULED",
    )


# --- the keys ----------------------------------------------------------------------------------

HEAD = "project: my-project\nslots:\n  - name: f\n    zone: us-east5-b\n    accelerator: v6e-8\n"


@pytest.mark.parametrize(
    ("body", "where", "message"),
    [
        ("    mode: flex-start\n    want: held\n", "6:5", "needs 'max_run_duration'"),
        ("    mode: flex-start\n    max_run_duration: 8d\n    want: held\n", "7:5", "at most 7d"),
        ("    max_run_duration: 1h\n    want: held\n", "6:5", "needs mode flex-start"),
        ("    renew: true\n    want: held\n", "6:5", "renew needs mode flex-start"),
    ],
)
def test_flex_keys_are_checked_at_their_line(body: str, where: str, message: str) -> None:
    with pytest.raises(InvalidDesiredState) as caught:
        parse_desired(HEAD + body, "d.yaml")
    assert f"d.yaml:{where}: " in str(caught.value) and message in str(caught.value)


def test_flex_keys_resolve() -> None:
    text = (
        HEAD + "    mode: flex-start\n    max_run_duration: 7d\n    renew: true\n    want: held\n"
    )
    (spec,) = parse_desired(text, "d.yaml").slots
    assert (spec.mode, spec.max_run_seconds, spec.renew) == ("flex-start", 7 * 86400, True)


def test_the_wrapper_spec_exports_the_termination_time() -> None:
    from reconciler.adapters.workload_wire import encode_spec

    spec = replace(FLEX, workload=WorkloadSpec(command="true"))
    act = flex.with_end(WorkloadAct("launch", "r1", 1), flex_qr(QRState.ACTIVE))
    wire = encode_spec(launch_request(spec, act, 1), {})
    assert f"env=TPU_RECONCILER_TERMINATION_TIME={END}\0".encode() in wire
    plain = encode_spec(launch_request(spec, WorkloadAct("launch", "r1", 1), 1), {})
    assert b"TERMINATION_TIME" not in plain


def test_info_and_events_say_the_signals() -> None:
    from reconciler.intent.views import format_slot_info
    from reconciler.surfaces.cli._ops_events import format_event

    observed = {"state": "ACTIVE", "ends_at": END, "health_note": "health TIMEOUT — wait"}
    text = format_slot_info({"name": "f", "observed": observed})
    assert f"flex-start run: ends at {END}" in text
    assert "node signals: health TIMEOUT — wait" in text
    ended = format_slot_info({"name": "f", "observed": {"state": "SUSPENDED", "expired": True}})
    assert "flex-start run: ended (expired)" in ended
    record = {"ts": END, "seq": 1, "kind": "node.health", "slot": "f", "zone": Z1,
              "signals": ["health TIMEOUT"]}  # fmt: skip
    line = format_event(record)
    assert "health TIMEOUT" in line and "signals=" not in line  # said, not dumped


@pytest.mark.parametrize(("mode", "end"), [("flex-start", "expired"), ("spot", "preempted")])
def test_the_capacity_history_counts_a_run_end_as_no_preemption(mode: str, end: str) -> None:
    from reconciler.adapters.tpu_api_parse import request_state
    from reconciler.core.history import Lifetime, Seen, Tracker

    tracker = Tracker()
    out = []
    for now, state in ((0, "ACTIVE"), (3600, "SUSPENDED")):
        look = Seen(
            slot="f",
            zone=Z1,
            state=state,
            accelerator="v6e-8",
            mode=mode,
            request=request_state(state),
        )
        out += tracker.step([look], now, gone_zones=[Z1], complete=True)
    assert [r.end for r in out if isinstance(r, Lifetime)] == [end]
