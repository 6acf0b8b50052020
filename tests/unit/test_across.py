"""One program across a race group's winners (``workload.across: group``), pure: the loader's
rules, and the planner's table over passes (all set up -> one launch over the union of workers
with the MEGASCALE values; a winner lost -> stop everywhere; re-won -> relaunch, same run id;
``min_count``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core import across
from reconciler.core import workload as wl
from reconciler.core.memory import Memory
from reconciler.core.plan import Kind, Plan, plan
from reconciler.core.status import build_status
from reconciler.errors import InvalidDesiredState
from reconciler.model.capacity import CapacityRequest
from reconciler.model.desired import Desired, WorkloadSpec
from reconciler.model.load import parse_desired
from reconciler.model.observed import Node, NodeState, Observation
from reconciler.model.status import from_json, to_json
from reconciler.model.workload import WorkerProbe
from reconciler.surfaces.cli._logs import no_workload, target_of, unknown_slot
from tests.support.worlds import Z1, desired, group, node, qr, slot, world

JOB = WorkloadSpec(command="python train.py")
IPS = {"a": ("10.0.0.2", "10.0.0.3"), "b": ("10.0.1.2", "10.0.1.3"), "c": ("10.0.2.2", "10.0.2.3")}


def across_desired(count: int = 2, min_count: int | None = None) -> Desired:
    d = desired(
        *(slot(n, accelerator="v4-16") for n in ("b", "a", "c")),
        groups=[group("g", "a", "b", "c", count=count)],
    )
    g = replace(d.race_groups[0], workload=JOB, min_count=min_count)
    return replace(d, race_groups=(g,))


def up(name: str, uid: str = "1") -> tuple[CapacityRequest, Node]:
    return (
        qr(name, state=QRState.ACTIVE, accelerator="v4-16"),
        node(name, uid=uid, ips=IPS[name], accelerator="v4-16"),
    )


def lost(name: str) -> tuple[CapacityRequest, Node]:
    return (
        qr(name, state=QRState.SUSPENDED, accelerator="v4-16", initiator="SERVICE"),
        node(name, state=NodeState.PREEMPTED, ips=(), accelerator="v4-16"),
    )


class Passes:
    """The controller's pure steps, pass after pass: fold (on the group view), plan, and
    record what the plan sends."""

    def __init__(self, d: Desired) -> None:
        self.d, self.memory, self.now = d, Memory(), 1000.0

    def step(self, seen: Observation, probes: wl.Probes | None = None) -> Plan:
        self.now += 10
        wd, wo, _ = across.view(self.d, seen, self.memory)
        self.memory = wl.observe(self.memory, wd, wo, probes or {}, self.now)
        p = plan(self.d, seen, self.memory, self.now, probes=probes)
        for a in p.actions:
            if a.slot == "g" and a.workload is not None and a.instance is not None:
                self.memory = wl.record_sent(self.memory, "g", a.workload, a.instance, self.now)
        return p

    def view(self, seen: Observation) -> tuple[Desired, Observation]:
        wd, wo, _ = across.view(self.d, seen, self.memory)
        return wd, wo


def group_acts(p: Plan) -> list[tuple[str, str, int, str]]:
    return [
        (a.kind.value, a.workload.run_id, a.workload.attempt, a.workload.why)
        for a in p.actions
        if a.slot == "g" and a.workload is not None
    ]


def alive(n: int) -> dict[str, tuple[WorkerProbe, ...]]:
    return {"g": tuple(WorkerProbe(i, "alive") for i in range(n))}


def test_all_winners_set_up_one_launch_over_every_worker_with_the_megascale_values() -> None:
    run = Passes(across_desired())
    assert group_acts(run.step(world(*up("b")))) == []  # one of two: nothing runs yet
    seen = world(*up("b"), *up("a"))
    p = run.step(seen)
    [(verb, run_id, attempt, why)] = group_acts(p)
    assert (verb, attempt, why) == ("launch", 1, "start")
    launch = next(a for a in p.actions if a.kind is Kind.LAUNCH)
    assert [a.slot for a in p.actions if a.kind is Kind.LAUNCH] == ["g"]  # no per-winner copy
    wd, wo = run.view(seen)
    spec, n = wd.slot("g"), wo.node(Z1, "g")
    assert spec is not None and n is not None and n.instance == launch.instance
    assert launch.workload is not None
    req = wl.launch_request(spec, launch.workload, len(n.endpoints), n)
    assert req.slot == "g" and req.workers == 4 and req.slices == 2
    assert [s.name for s in n.slices] == ["a", "b"]  # slice ids: winners sorted by name
    assert n.ips(internal=True) == (*IPS["a"], *IPS["b"])
    assert req.env["MEGASCALE_COORDINATOR_ADDRESS"] == "10.0.0.2:8081"  # a, worker 0
    assert req.env["MEGASCALE_NUM_SLICES"] == "2" and req.env["MEGASCALE_PORT"] == "8081"
    per = req.workers // req.slices  # what the wrapper derives each worker's slice from
    pids = {w % per + (w // per) * per for w in range(req.workers)}  # JAX's process id
    assert pids == {0, 1, 2, 3}
    assert run.memory.workload("g") is not None and run.memory.workload("g").run_id == run_id  # type: ignore[union-attr]


@pytest.mark.parametrize(("api", "told"), [("tpu", False), ("compute", True)])
def test_on_compute_engine_the_launch_tells_each_worker_its_place(api: str, told: bool) -> None:
    """Compute Engine does not tell its TPU VMs their worker id and slice's hosts: a launch
    there carries every worker's address in order (the wrapper sets TPU_WORKER_ID and
    TPU_WORKER_HOSTNAMES per slice); the TPU API's hosts know theirs."""
    d = across_desired()
    d = replace(d, slots=tuple(replace(s, api=api) for s in d.slots))
    run = Passes(d)
    seen = world(*up("b"), *up("a"))
    launch = next(a for a in run.step(seen).actions if a.kind is Kind.LAUNCH)
    wd, wo = run.view(seen)
    spec, n = wd.slot("g"), wo.node(Z1, "g")
    assert spec is not None and n is not None and launch.workload is not None
    assert spec.api == api
    req = wl.launch_request(spec, launch.workload, len(n.endpoints), n)
    assert req.hosts == ((*IPS["a"], *IPS["b"]) if told else ())
    assert req.slices == 2 and req.env["MEGASCALE_NUM_SLICES"] == "2"
    single = replace(d.slots[0], workload=JOB)
    alone = wl.launch_request(single, launch.workload, 2, up("a")[1])
    assert alone.hosts == (IPS["a"] if told else ()) and alone.slices == 1


def test_a_lost_winner_stops_it_everywhere_then_the_rewon_group_relaunches_the_same_run() -> None:
    run = Passes(across_desired())
    both = world(*up("b"), *up("a"))
    [(_, run_id, _, _)] = group_acts(run.step(both))
    run.step(both, alive(4))
    assert run.memory.workload("g").phase == "running"  # type: ignore[union-attr]

    gone = world(*up("a"), *lost("b"))
    p = run.step(gone)
    assert run.memory.workload("g").phase == "interrupted"  # type: ignore[union-attr]
    assert group_acts(p) == [("stop", run_id, 1, "lost")]  # the rest of it, on a
    stop = next(a for a in p.actions if a.kind is Kind.STOP)
    _, wo = run.view(gone)
    assert stop.instance is not None and across.instance_members(stop.instance)
    assert ("+", "create", "c") in [(a.symbol, a.kind.value, a.slot) for a in p.actions]

    p = run.step(gone)  # sent once; one winner is not enough to run
    assert group_acts(p) == []
    p = run.step(world(*up("a"), *lost("b"), *up("c")))
    assert group_acts(p) == [("launch", run_id, 2, "preempted")]
    _, wo = run.view(world(*up("a"), *up("c")))
    n = wo.node(Z1, "g")
    assert n is not None and [s.name for s in n.slices] == ["a", "c"]


def test_the_remnant_keeps_the_launched_slices_and_marks_the_lost_one() -> None:
    run = Passes(across_desired())
    run.step(world(*up("b"), *up("a")))
    run.step(world(*up("b"), *up("a")), alive(4))
    gone = world(*up("a"), *lost("b"))
    run.step(gone)
    wm = run.memory.workload("g")
    assert wm is not None and wm.stop_for == across.LOST  # the stop was sent: not again
    unsent = replace(wm, stop_for="")
    memory = replace(run.memory, workloads={"g": unsent})
    _, wo, _ = across.view(run.d, gone, memory)  # before it was sent: the remnant
    n = wo.node(Z1, "g")
    assert n is not None and n.state is NodeState.PREEMPTED and n.instance == wm.instance
    assert [(s.name, s.state) for s in n.slices] == [
        ("a", NodeState.READY),
        ("b", NodeState.PREEMPTED),
    ]


def test_every_winner_lost_nothing_to_stop_and_no_launch() -> None:
    run = Passes(across_desired())
    run.step(world(*up("b"), *up("a")))
    run.step(world(*up("b"), *up("a")), alive(4))
    p = run.step(world(*lost("a"), *lost("b")))
    assert group_acts(p) == []
    assert run.memory.workload("g").phase == "interrupted"  # type: ignore[union-attr]


def test_min_count_runs_on_fewer_winners_and_grows_with_the_same_run_id() -> None:
    run = Passes(across_desired(count=2, min_count=1))
    p = run.step(world(*up("b")))
    [(verb, run_id, attempt, _)] = group_acts(p)
    assert (verb, attempt) == ("launch", 1)
    wd, _ = run.view(world(*up("b")))
    assert wd.slot("g").slices == 1  # type: ignore[union-attr]
    run.step(world(*up("b")), {"g": (WorkerProbe(0, "alive"), WorkerProbe(1, "alive"))})
    p = run.step(world(*up("b"), *up("a")))  # the second winner: stop, then relaunch over both
    assert group_acts(p) == [("stop", run_id, 1, "lost")]
    p = run.step(world(*up("b"), *up("a")))
    assert group_acts(p) == [("launch", run_id, 2, "preempted")]


def test_setup_gates_the_launch_on_every_winner() -> None:
    d = across_desired()
    d = replace(d, slots=tuple(replace(s, setup=replace(s.setup, bootstrap=True)) for s in d.slots))
    run = Passes(d)
    p = run.step(world(*up("b"), *up("a")))
    assert group_acts(p) == []
    assert {a.slot for a in p.actions if a.kind is Kind.BOOTSTRAP} == {"a", "b"}


def test_when_done_release_releases_every_candidate_once_the_program_succeeded() -> None:
    d = across_desired()
    g = replace(d.race_groups[0], workload=replace(JOB, when_done="release"))
    run = Passes(replace(d, race_groups=(g,)))
    both = world(*up("b"), *up("a"))
    run.step(both)
    run.step(both, alive(4))
    p = run.step(both, {"g": tuple(WorkerProbe(i, "exited", exit_code=0) for i in range(4))})
    assert run.memory.workload("g").phase == "succeeded"  # type: ignore[union-attr]
    p = run.step(both)
    assert sorted((a.kind.value, a.slot) for a in p.actions) == [("delete", "a"), ("delete", "b")]
    assert set(p.releases) == {"a", "b", "c"}


def test_across_removed_stops_the_program_then_forgets_it() -> None:
    run = Passes(across_desired())
    both = world(*up("b"), *up("a"))
    [(_, run_id, _, _)] = group_acts(run.step(both))
    run.step(both, alive(4))
    run.d = replace(run.d, race_groups=(replace(run.d.race_groups[0], workload=None),))
    p = run.step(both, alive(4))
    assert group_acts(p) == [("stop", run_id, 1, "removed")]
    run.step(both, {"g": tuple(WorkerProbe(i, "exited", exit_code=143) for i in range(4))})
    assert run.memory.workload("g") is None
    assert group_acts(run.step(both)) == []


def test_a_paused_group_holds_its_program_too() -> None:
    d = across_desired()
    run = Passes(replace(d, race_groups=(replace(d.race_groups[0], paused=True),)))
    p = run.step(world(*up("b"), *up("a")))
    assert group_acts(p) == []
    assert [(h.action.kind, h.gate) for h in p.gated if h.action.slot == "g"] == [
        (Kind.LAUNCH, "paused")
    ]


# --- the loader ---------------------------------------------------------------------------------

FILE = """\
project: my-project-123
slots:
  - {name: a, zone: us-central2-b, accelerator: v4-16}
  - {name: b, zone: us-central2-b, accelerator: v4-16}
race_groups:
  - name: g
    count: 2
    min_count: 1
    slots: [a, b]
    workload: {command: python train.py, across: group}
"""


def test_the_loader_gives_the_group_its_program_and_the_candidates_none() -> None:
    d = parse_desired(FILE, "d.yaml")
    g = d.race_groups[0]
    assert g.workload is not None and g.workload.command == "python train.py"
    assert g.min_count == 1
    assert all(s.workload is None for s in d.slots)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            FILE.replace("a, zone: us-central2-b", "a, zone: us-east1-d"),
            "d.yaml:10:50: across: group needs every candidate of one zone",
        ),
        (
            FILE.replace(
                "a, zone: us-central2-b, accelerator: v4-16",
                "a, zone: us-central2-b, accelerator: v4-8",
            ),
            "across: group needs every candidate of one accelerator",
        ),
        (FILE.replace("min_count: 1", "min_count: 3"), "d.yaml:8:16: min_count 3 is more than"),
        (FILE.replace(", across: group", ""), "d.yaml:8:16: min_count needs workload.across"),
        (
            FILE.replace("v4-16}\n  - {name: b", "v4-16, workload: {command: x}}\n  - {name: b"),
            "d.yaml:3:66: slot 'a' races in group 'g', whose workload runs across its winners",
        ),
        (
            FILE.replace(
                "accelerator: v4-16}\n  - {name: b",
                "accelerator: v4-16, workload: {command: x, across: group}}\n  - {name: b",
            ),
            "across is a race group's workload key",
        ),
        (
            FILE.replace(
                "a, zone: us-central2-b, accelerator: v4-16",
                "a, zone: us-central2-b, accelerator: v4-16, slices: 2",
            ),
            "across: group needs single-slice candidates (a has slices: 2)",
        ),
        (
            FILE.replace("  - name: g\n", "  - name: a\n"),
            "d.yaml:6:11: race group 'a' runs one program under its own name: a slot has that",
        ),
    ],
)
def test_the_loader_refuses_what_cannot_run_across_the_group(text: str, message: str) -> None:
    with pytest.raises(InvalidDesiredState) as e:
        parse_desired(text, "d.yaml")
    assert message in str(e.value)


def test_status_shows_the_groups_program_on_its_race_row() -> None:
    run = Passes(across_desired())
    both = world(*up("b"), *up("a"))
    run.step(both)
    p = run.step(both, alive(4))
    snap = build_status(
        desired=run.d, desired_file="d.yaml", errors=(), observation=both,
        observed_at=run.now, memory=run.memory, plan=p, now=run.now, backend="rest",
    )  # fmt: skip
    [row] = snap.race_groups
    assert row.workload is not None and row.workload.state == "running"
    assert row.workload.run_id == run.memory.workload("g").run_id  # type: ignore[union-attr]
    assert from_json(to_json(snap)).race_groups == snap.race_groups
    _, wo = run.view(both)
    n = wo.node(Z1, "g")
    assert n is not None and (row.instance, row.ips) == (n.instance, n.ips())
    found = target_of(snap, "g")  # `logs g` reads the program's output on its workers
    assert found.node is not None and found.run_id == row.workload.run_id
    assert found.node.instance == n.instance and found.node.ips() == n.ips()
    assert unknown_slot(run.d, snap, "g") is None and no_workload(run.d, snap, "g") is None
