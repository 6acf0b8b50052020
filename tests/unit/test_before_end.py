"""``workload.before_end`` in the pure planner: which end, the lead, once per attempt and end,
never on missing data; its notice, the memory that keeps it, the wake-up and what status says.
One row per rule."""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType

import pytest

from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core import before_end
from reconciler.core.ends_status import before_end_status, reschedule_command, with_ends
from reconciler.core.memory import Memory, from_dict, record_failure, to_dict
from reconciler.core.outcome import outcome
from reconciler.core.plan import Kind, plan
from reconciler.core.render import format_status
from reconciler.core.status import build_status
from reconciler.core.workload_memory import WorkloadMemory
from reconciler.model.capacity import CapacityRequest, RequestState
from reconciler.model.desired import HoldSpec, SlotSpec, WorkloadSpec
from reconciler.model.ends import BeforeEndSpec
from reconciler.model.observed import Maintenance, NetworkEndpoint, Node, NodeState, Observation
from reconciler.model.stamps import epoch
from tests.support.worlds import desired, node, qr, slot, world

END = "2026-12-01T12:00:00Z"
T_END = epoch(END)
LEAD = 600.0
IPS = ("10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5")
JOB = WorkloadSpec(command="python3 train.py", before_end=BeforeEndSpec("touch ckpt", LEAD, 300.0))
SPOT = replace(slot("a", accelerator="v4-32"), workload=JOB)
FLEX = replace(SPOT, mode="flex-start", max_run_seconds=6 * 3600)
NODE = node("a", ips=IPS, accelerator="v4-32")
RUN = WorkloadMemory(
    run_id="g0-0123abcd-x1",
    generation=0,
    identity=JOB.identity,
    policy=JOB.policy,
    phase="running",
    instance=NODE.instance,
)


def seen(
    *,
    state: QRState = QRState.ACTIVE,
    ends: str | None = None,
    window: str | None = None,
    status: str = "PENDING",
    node_state: NodeState = NodeState.READY,
) -> Observation:
    request = replace(qr("a", state=state, accelerator="v4-32"), termination_time=ends)
    n = replace(NODE, state=node_state)
    if window is not None:
        n = replace(n, maintenance=Maintenance("SCHEDULED", status, window, None, True))
    return world(request, n)


def memory(wm: WorkloadMemory | None = RUN) -> Memory:
    return Memory(workloads=MappingProxyType({"a": wm} if wm else {}))


RUNNING = memory()


def ends_planned(spec: SlotSpec, observed: Observation, mem: Memory, now: float) -> list[str]:
    p = plan(desired(spec), observed, mem, now)
    return [a.end.key for a in p.actions if a.kind == Kind.BEFORE_END and a.end is not None]


@dataclass(frozen=True)
class Row:
    id: str
    spec: SlotSpec
    observed: Observation
    now: float
    keys: list[str]
    mem: Memory = RUNNING


KEY = f"maintenance@{int(T_END)}"
ROWS = [
    Row("maintenance window, inside the lead", SPOT, seen(window=END), T_END - 300, [KEY]),
    Row("maintenance window, just at the lead", SPOT, seen(window=END), T_END - LEAD, [KEY]),
    Row("maintenance window, before the lead", SPOT, seen(window=END), T_END - LEAD - 1, []),
    Row("maintenance window already started", SPOT, seen(window=END), T_END + 1, []),
    Row("maintenance ONGOING: no end to prepare for", SPOT,
        seen(window=END, status="ONGOING"), T_END - 300, []),
    Row("flex-start run's end", FLEX, seen(ends=END), T_END - 60, [f"flex-start@{int(T_END)}"]),
    Row("another mode's termination time (a Compute Engine VM's)", SPOT, seen(ends=END),
        T_END - 60, [f"termination@{int(T_END)}"]),
    Row("hold_until", replace(SPOT, hold=HoldSpec(hold_until=T_END)), seen(), T_END - 60,
        [f"hold_until@{int(T_END)}"]),
    Row("the soonest end first", FLEX, seen(ends=END, window="2026-12-01T11:58:00Z"),
        T_END - 300, [f"maintenance@{int(T_END) - 120}"]),
    Row("no before_end", replace(SPOT, workload=replace(JOB, before_end=None)),
        seen(window=END), T_END - 300, []),
    Row("no end known", SPOT, seen(), T_END - 300, []),
    Row("an unreadable time: nothing", SPOT, seen(window="soon"), T_END - 300, []),
    Row("request not ACTIVE", SPOT, seen(state=QRState.SUSPENDING, window=END), T_END - 300, []),
    Row("node not READY", SPOT, seen(window=END, node_state=NodeState.REPAIRING),
        T_END - 300, []),
    Row("no request seen (zone not observed)", SPOT,
        world(replace(NODE, maintenance=Maintenance(None, None, END, None, None)),
              zones=["europe-west4-a"]), T_END - 300, []),
    Row("workload not running", SPOT, seen(window=END), T_END - 300, [],
        memory(replace(RUN, phase="starting"))),
    Row("no workload memory", SPOT, seen(window=END), T_END - 300, [], memory(None)),
    Row("attempt on another node instance", SPOT, seen(window=END), T_END - 300, [],
        memory(replace(RUN, instance="a@999"))),
]  # fmt: skip


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_which_end_and_when(row: Row) -> None:
    assert ends_planned(row.spec, row.observed, row.mem, row.now) == row.keys


def hold_for_memory(active_since: float) -> Memory:
    from reconciler.core.memory import SlotMemory

    slots = {"a": SlotMemory(active_instance=NODE.instance, active_since=active_since)}
    return replace(memory(), slots=MappingProxyType(slots))


def test_hold_for_counts_from_when_the_node_became_active() -> None:
    spec = replace(SPOT, hold=HoldSpec(hold_for_seconds=3600.0))
    mem = hold_for_memory(T_END - 3600)
    assert ends_planned(spec, seen(), mem, T_END - 120) == [f"hold_for@{int(T_END)}"]
    assert ends_planned(spec, seen(), mem, T_END - 700) == []


def run_once(spec: SlotSpec, observed: Observation, mem: Memory, now: float) -> Memory:
    """Plan, then settle the before_end action as the controller would."""
    p = plan(desired(spec), observed, mem, now)
    (action,) = [a for a in p.actions if a.kind == Kind.BEFORE_END]
    return outcome(action, "ran on 4 workers", mem, now, None, 0.5).memory


def test_once_per_attempt_and_end_and_again_for_the_next_attempt() -> None:
    observed = seen(window=END)
    done = run_once(SPOT, observed, memory(), T_END - 500)
    assert ends_planned(SPOT, observed, done, T_END - 400) == []
    # a restarted controller reads it back from its memory file
    assert ends_planned(SPOT, observed, from_dict(to_dict(done)), T_END - 400) == []
    relaunched = replace(done, workloads=MappingProxyType({"a": replace(RUN, attempt=2)}))
    assert ends_planned(SPOT, observed, relaunched, T_END - 400) == [KEY]
    moved = seen(window="2026-12-01T13:00:00Z")  # the window moved: a new end
    assert ends_planned(SPOT, moved, done, epoch("2026-12-01T12:55:00Z")) == [
        f"maintenance@{int(epoch('2026-12-01T13:00:00Z'))}"
    ]


def test_the_action_and_its_notice() -> None:
    p = plan(desired(SPOT), seen(window=END), memory(), T_END - 300)
    (action,) = [a for a in p.actions if a.kind == Kind.BEFORE_END]
    assert action.symbol == "~" and action.instance == NODE.instance
    assert action.end is not None
    assert (action.end.run_id, action.end.attempt, action.end.timeout) == (RUN.run_id, 1, 300.0)
    assert action.reason == (
        f"maintenance window starts at {END} (in 5m): run before_end on 4 workers (attempt 1)"
    )
    (notice,) = [n for n in p.notices if n.event == "before-end"]
    assert notice.title == "a: maintenance window starts at 12:00 UTC"
    assert notice.message == (
        f"maintenance window starts at {END}: before_end command sent to 4 workers at "
        "2026-12-01T11:55:00Z"
    )
    assert p.counts() == (0, 1, 0)
    # sent once: not told again on the next pass
    told = replace(memory(), notified=frozenset({notice.key}))
    again = plan(desired(SPOT), seen(window=END), told, T_END - 290)
    assert [n for n in again.notices if n.event == "before-end"] == []


def test_a_paused_slot_holds_it_back() -> None:
    paused = replace(SPOT, hold=HoldSpec(paused=True))
    p = plan(desired(paused), seen(window=END), memory(), T_END - 300)
    assert [h.action.kind for h in p.gated] == [Kind.BEFORE_END]
    assert not p.actions
    assert [n for n in p.notices if n.event == "before-end"] == [], "nothing was sent: no notice"
    resumed = plan(desired(SPOT), seen(window=END), memory(), T_END - 290)
    assert [n.event for n in resumed.notices if n.event == "before-end"] == ["before-end"]


def test_a_failure_backs_off_and_does_not_count_as_done() -> None:
    from reconciler.errors import WorkloadError

    observed = seen(window=END)
    p = plan(desired(SPOT), observed, memory(), T_END - 500)
    (action,) = [a for a in p.actions if a.kind == Kind.BEFORE_END]
    failed = outcome(action, WorkloadError("worker 2 down"), memory(), T_END - 500, None, 0.5)
    later = plan(desired(SPOT), observed, failed.memory, T_END - 495)
    assert [h.action.kind for h in later.deferred] == [Kind.BEFORE_END]
    assert ends_planned(SPOT, observed, failed.memory, T_END - 400) == [KEY]


def test_the_controller_wakes_at_the_lead() -> None:
    want = desired(SPOT)
    assert before_end.next_wake(want, seen(window=END), memory(), T_END - 3600) == T_END - LEAD
    assert before_end.next_wake(want, seen(window=END), memory(), T_END - 60) is None
    assert before_end.next_wake(want, seen(), memory(), T_END - 3600) is None
    flex_notice = before_end.next_wake(desired(FLEX), seen(ends=END), memory(), T_END - 7200)
    assert flex_notice == T_END - 1800  # the flex-start notice comes first (core/flex)


def status_of(mem: Memory, now: float, observed: Observation | None = None) -> object:
    shown = before_end_status(SPOT, observed or seen(window=END), mem, now)
    assert shown is not None
    return shown


def test_status_says_when_it_runs_and_how_it_went() -> None:
    s = status_of(memory(), T_END - 3600)
    assert (s.end, s.at, s.runs_at, s.state) == (  # type: ignore[attr-defined]
        "maintenance",
        END,
        "2026-12-01T11:50:00Z",
        "scheduled",
    )
    assert status_of(memory(), T_END - 60).state == "due"  # type: ignore[attr-defined]
    assert status_of(memory(replace(RUN, phase="failed")), T_END - 60).state == "waiting"  # type: ignore[attr-defined]
    done = run_once(SPOT, seen(window=END), memory(), T_END - 500)
    s = status_of(done, T_END - 400)
    assert s.state == "ran"  # type: ignore[attr-defined]
    assert s.last == f"ran on 4 workers before maintenance at {END} (attempt 1)"  # type: ignore[attr-defined]
    failing = record_failure(
        memory(), "us-central2-b/a:before_end", message="worker 2 down", now=T_END - 500,
        permanent=False, fingerprint="f",
    )  # fmt: skip
    s = status_of(failing, T_END - 400)
    assert (s.state, s.last) == ("failed", "worker 2 down")  # type: ignore[attr-defined]


def test_status_note_and_the_command_that_moves_the_window() -> None:
    want = desired(SPOT)
    observed = seen(window=END)
    snap = build_status(
        desired=want, desired_file="d.yaml", errors=(), observation=observed,
        observed_at=T_END - 3600, memory=memory(), plan=plan(want, observed, memory(), T_END),
        now=T_END - 3600, backend="rest",
    )  # fmt: skip
    row = snap.slot("a")
    assert row is not None and row.maintenance is not None
    command = (
        "gcloud alpha compute tpus tpu-vm perform-maintenance a --zone=us-central2-b "
        "--project=my-project-123"
    )
    assert row.maintenance.command == command
    assert row.health_note is not None and row.health_note.endswith(command)
    text = format_status(snap, T_END - 3600)
    assert "before_end in 50m (maintenance 12:00 UTC)" in text
    assert with_ends(snap.slots, None, observed, memory(), T_END) == snap.slots


@pytest.mark.parametrize(
    ("state", "last", "note", "line"),
    [
        ("scheduled", "", "before_end in 50m (maintenance 12:00 UTC)",
         f"before_end: runs at 2026-12-01T11:50:00Z, before maintenance at {END}"),
        ("due", "", "before_end due (maintenance 12:00 UTC)",
         f"before_end: due now, before maintenance at {END}"),
        ("ran", "ran on 4 workers", "before_end ran (maintenance 12:00 UTC)",
         f"before_end: ran before maintenance at {END}; last: ran on 4 workers"),
        ("failed", "worker 2 down", "before_end failed (maintenance 12:00 UTC): worker 2 down",
         f"before_end: failed, tried again until maintenance at {END}; last: worker 2 down"),
        ("waiting", "", "before_end (maintenance 12:00 UTC): no running workload",
         f"before_end: runs before maintenance at {END} once the workload runs "
         "(from 2026-12-01T11:50:00Z)"),
    ],
)  # fmt: skip
def test_it_in_words(state: str, last: str, note: str, line: str) -> None:
    from reconciler.core.ends_text import before_end_line, before_end_note
    from reconciler.model.status import BeforeEndStatus

    shown = BeforeEndStatus("maintenance", END, "2026-12-01T11:50:00Z", state, last)
    assert before_end_note(shown, T_END - 3600) == note
    assert before_end_line(shown) == line


def test_the_command_that_moves_a_compute_engine_window_names_every_host() -> None:
    request = CapacityRequest(name="big", zone="us-central1-c", state=RequestState.ACTIVE,
                              api="compute")  # fmt: skip
    where = "--zone=us-central1-c --project=p"
    one = Node("big", "us-central1-c", NodeState.READY, endpoints=(NetworkEndpoint("10.0.0.1"),))
    assert reschedule_command("p", request, one) == (
        f"gcloud compute instances perform-maintenance big {where}"
    )
    slice_ = Node(
        "big",
        "us-central1-c",
        NodeState.READY,
        endpoints=tuple(NetworkEndpoint(f"10.0.0.{i}") for i in range(3)),
    )
    assert reschedule_command("p", request, slice_) == (
        f"gcloud compute instances perform-maintenance big-0 big-1 big-2 {where}"
    )
    two = tuple(
        Node(f"big-{n}", "us-central1-c", NodeState.READY,
             endpoints=(NetworkEndpoint("10.0.1.1"), NetworkEndpoint("10.0.1.2")))
        for n in range(2)
    )  # fmt: skip
    multislice = Node("big", "us-central1-c", NodeState.READY, slices=two,
                      endpoints=two[0].endpoints + two[1].endpoints)  # fmt: skip
    assert reschedule_command("p", request, multislice) == (
        f"gcloud compute instances perform-maintenance big-0-0 big-0-1 big-1-0 big-1-1 {where}"
    ), "each slice's hosts, as the workers are reached (compute_names)"
