"""Workload decisions, one test per row of the decision table (core/workload.py): launch after
setup on every worker, succeeded, failed -> stop the rest and relaunch within the budget,
gave-up, preempted -> next attempt of the same run, removed / released / bumped -> stop,
stalled, unknown probes never decide anything, and a restarted controller never skips an
attempt. Each pass is the controller's: fold the probes into memory, then plan."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core import memory as mem
from reconciler.core import workload as wl
from reconciler.core.memory import Memory, record_setup
from reconciler.core.plan import Kind, Plan, plan
from reconciler.core.status import workload_status, workload_summary
from reconciler.model.desired import Desired, WorkloadSpec
from reconciler.model.observed import NodeState, Observation
from reconciler.model.workload import WorkerProbe
from tests.support.worlds import Z2, active, brief, desired, group, node, qr, setup, slot, world

IPS = ("10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5")
JOB = WorkloadSpec(command="python3 train.py", restart="on-failure", max_failures=2)
T0 = 1_000_000.0


def v4_32(uid: str = "1001", name: str = "a", zone: str = "us-central2-b") -> Observation:
    q, _ = active(name, zone, uid=uid, accelerator="v4-32")
    return world(q, node(name, zone, uid=uid, ips=IPS, accelerator="v4-32"))


LIVE = v4_32()


def held(w: WorkloadSpec | None = JOB, **kw: object) -> Desired:
    return desired(replace(slot("a", accelerator="v4-32", **kw), workload=w))  # type: ignore[arg-type]


def probes(
    *states: str, codes: Sequence[int | None] = (), out: float | None = None
) -> list[WorkerProbe]:
    codes = list(codes) or [None] * len(states)
    return [
        WorkerProbe(i, s, exit_code=c if s == "exited" else None, last_output_at=out)  # type: ignore[arg-type]
        for i, (s, c) in enumerate(zip(states, codes, strict=True))
    ]


ALIVE = probes("alive", "alive", "alive", "alive")


class Run:
    """The controller's loop over pure parts: fold, plan, and record what it sends."""

    def __init__(self, want: Desired, seen: Observation = LIVE, memory: Memory | None = None):
        self.want, self.seen, self.memory, self.now = want, seen, memory or Memory(), T0

    def step(self, seen_probes: Sequence[WorkerProbe] | None = None, dt: float = 5.0) -> Plan:
        self.now += dt
        p = {"a": tuple(seen_probes)} if seen_probes is not None else {}
        self.memory = mem.observe(self.memory, self.want, self.seen, self.now)
        self.memory = wl.observe(self.memory, self.want, self.seen, p, self.now)
        decided = plan(self.want, self.seen, self.memory, self.now, probes=p)
        for a in decided.actions:  # the controller records a launch / stop as it sends it
            if a.workload is not None and a.instance is not None:
                self.memory = wl.record_sent(self.memory, a.slot, a.workload, a.instance, self.now)
        for n in decided.notices:
            self.memory = mem.record_notice(self.memory, n.key)
        return decided

    @property
    def w(self) -> wl.WorkloadMemory:
        got = self.memory.workload("a")
        assert got is not None
        return got

    def running(self) -> None:
        """Launch attempt 1 and see it alive everywhere."""
        first = self.step()
        assert brief(first) == [("~", "launch", "a")]
        assert self.step(ALIVE).empty
        assert self.w.phase == "running"


def acts(p: Plan) -> list[tuple[str, str, int]]:
    return [(a.kind.value, a.workload.run_id, a.workload.attempt) for a in p.actions if a.workload]


def backed_off(run: Run) -> Plan:
    """The passes of a relaunch's restart backoff (core/workload_backoff): nothing goes until
    its end, then the plan of the pass at its end."""
    assert run.w.phase == "pending" and run.w.not_before is not None
    wait = run.w.not_before - run.now
    assert wait > 1 and acts(run.step(dt=wait - 1)) == []
    return run.step(dt=1)


# --- launch ------------------------------------------------------------------------------------


def test_launch_on_a_ready_node_once_with_a_run_id_then_running() -> None:
    run = Run(held())
    p = run.step()
    (launch,) = p.actions
    assert (launch.symbol, launch.kind, launch.instance) == ("~", Kind.LAUNCH, "a@1001")
    assert launch.workload is not None and launch.workload.attempt == 1
    assert launch.reason.startswith("start run g0-")
    assert p.counts() == (0, 1, 0)
    assert run.w.phase == "starting" and run.w.instance == "a@1001"
    assert run.step(ALIVE).empty
    assert (run.w.phase, run.w.attempt, run.w.failures) == ("running", 1, 0)
    assert run.step(ALIVE).empty  # steady: nothing more


def test_launch_waits_for_the_node_and_for_its_setup() -> None:
    want = held(flags=setup(bootstrap=True, tailscale=True))
    queued = Run(
        want, world(qr("a", state=QRState.PROVISIONING), node("a", state=NodeState.CREATING))
    )
    assert not acts(queued.step())
    run = Run(want)
    assert [a.kind for a in run.step().actions] == [Kind.BOOTSTRAP]
    run.memory = record_setup(run.memory, "a", "bootstrap", "a@1001", 0)
    assert [a.kind for a in run.step().actions] == [Kind.TAILSCALE]
    run.memory = record_setup(run.memory, "a", "tailscale", "a@1001", 0)
    assert [a.kind for a in run.step().actions] == [Kind.LAUNCH]


def test_a_partly_started_attempt_is_sent_again_same_attempt() -> None:
    run = Run(held())
    run.step()
    p = run.step(probes("alive", "missing", "alive", "missing"))
    assert acts(p) == [("launch", run.w.run_id, 1)]
    assert "launch again" in p.actions[0].reason


# --- succeeded ---------------------------------------------------------------------------------


def test_all_exit_0_is_succeeded_nothing_relaunched_and_notified_once() -> None:
    run = Run(held())
    run.running()
    p = run.step(probes("exited", "exited", "exited", "exited", codes=[0, 0, 0, 0]))
    assert p.empty and run.w.phase == "succeeded"
    assert [n.event for n in p.notices] == ["succeeded"]
    again = run.step(probes("exited", "exited", "exited", "exited", codes=[0, 0, 0, 0]))
    assert again.empty and not again.notices


def test_some_workers_done_others_still_running_is_running() -> None:
    run = Run(held())
    run.running()
    assert run.step(probes("exited", "alive", "alive", "alive", codes=[0, 0, 0, 0])).empty
    assert run.w.phase == "running"


def test_when_done_release_releases_the_slot_through_delete_and_never_recreates() -> None:
    run = Run(held(replace(JOB, when_done="release")))
    run.running()
    p = run.step(probes("exited", "exited", "exited", "exited", codes=[0, 0, 0, 0]))
    assert brief(p) == [("-", "delete", "a")]
    assert p.actions[0].destructive and "when_done: release" in p.actions[0].reason
    assert p.decided_want["a"] == "released"
    run.seen = world()  # deleted
    gone = run.step()
    assert gone.empty and gone.decided_want["a"] == "released"


def test_when_done_release_in_a_race_group_releases_every_candidate() -> None:
    job = replace(JOB, when_done="release")
    a = replace(slot("a", accelerator="v4-32"), workload=job)
    b = replace(slot("b", Z2, accelerator="v4-32"), workload=job)
    want = desired(a, b, groups=[group("g", "a", "b")])
    run = Run(want, world(*v4_32().requests, *v4_32().nodes, qr("b", Z2)))
    run.step()  # a won: b's request is deleted, a launches
    run.seen = v4_32()
    assert run.step(ALIVE).empty
    run.seen = world(*v4_32().requests, *v4_32().nodes, qr("b", Z2))  # b queued again
    p = run.step(probes("exited", "exited", "exited", "exited", codes=[0, 0, 0, 0]))
    assert sorted(brief(p)) == [("-", "delete", "a"), ("-", "delete", "b")]
    assert p.decided_want == {"a": "released", "b": "released"}
    assert not p.races[0].open


def test_restart_always_relaunches_after_success_without_counting() -> None:
    run = Run(held(replace(JOB, restart="always")))
    run.running()
    p = run.step(probes("exited", "exited", "exited", "exited", codes=[0, 0, 0, 0]))
    assert acts(p) == [("launch", run.w.run_id, 2)] and run.w.failures == 0


# --- failed ------------------------------------------------------------------------------------


def test_one_worker_exits_1_others_are_stopped_then_attempt_2_with_one_failure() -> None:
    run = Run(held())
    run.running()
    run_id = run.w.run_id
    p = run.step(probes("alive", "alive", "exited", "alive", codes=[0, 0, 1, 0]))
    assert acts(p) == [("stop", run_id, 1)]
    assert "exit 1 on worker 2" in p.actions[0].reason and p.actions[0].workload
    assert (run.w.phase, run.w.failures) == ("failed", 1)
    killed = probes("exited", "exited", "exited", "exited", codes=[143, 143, 1, 143])
    assert acts(run.step(killed)) == []
    p = backed_off(run)
    assert acts(p) == [("launch", run_id, 2)]
    assert p.actions[0].reason == "relaunch after failure: attempt 2 (1/2 failures)"
    assert (run.w.attempt, run.w.failures) == (2, 1)


def test_a_failure_with_every_worker_already_gone_is_the_next_attempt_in_the_same_pass() -> None:
    run = Run(held())
    run.running()
    assert acts(run.step(probes("exited", "exited", "exited", "exited", codes=[0, 1, 0, 0]))) == []
    assert (run.w.phase, run.w.attempt, run.w.not_before) == ("pending", 2, run.now + 10)
    assert acts(backed_off(run)) == [("launch", run.w.run_id, 2)]


def test_a_failure_moved_on_from_at_once_keeps_its_tail_exit_codes_and_detail() -> None:
    run = Run(held())
    run.running()
    before = run.memory
    run.step(probes("exited", "exited", "exited", "exited", codes=[0, 1, 0, 0]))
    # Its telling worker's log is read from the node it ran on, though attempt 2 is in play.
    assert wl.tails_wanted(before, run.memory) == [wl.TailWanted("a", run.w.run_id, 1, "a@1001", 1)]
    run.memory = wl.record_tail(run.memory, "a", run.w.run_id, 1, ["Traceback", "ValueError"])
    assert acts(backed_off(run)) == [("launch", run.w.run_id, 2)]
    assert run.step(ALIVE).empty and run.w.phase == "running"
    shown = workload_status(run.w, JOB, run.now)
    assert shown is not None and shown.attempt == 2
    assert (shown.detail, shown.last_lines) == ("exit 1 on worker 1", ("Traceback", "ValueError"))
    assert run.w.prior is not None and [(s.index, s.exit_code) for s in run.w.prior.workers] == [
        (0, 0), (1, 1), (2, 0), (3, 0)
    ]  # fmt: skip


def test_a_launch_records_when_it_was_sent_and_a_resend_keeps_it() -> None:
    run = Run(held())
    run.step()
    sent = run.now
    assert run.w.started_at == sent
    run.step(probes("alive", "missing", "alive", "alive"))  # sent again: same attempt
    assert run.w.started_at == sent
    run.step(ALIVE)
    assert run.w.phase == "running" and run.w.since > sent and run.w.started_at == sent
    run.step(probes("exited", "exited", "exited", "exited", codes=[1, 1, 1, 1]))
    backed_off(run)
    assert run.w.attempt == 2 and run.w.started_at == run.now  # attempt 2 sent this pass
    assert run.w.prior is not None and run.w.prior.started_at == sent


def test_past_max_failures_gives_up_notifies_and_stays_down_until_bumped() -> None:
    run = Run(held())
    run.running()
    dead = probes("exited", "exited", "exited", "exited", codes=[1, 1, 1, 1])
    for attempt in (2, 3):
        assert acts(run.step(dead)) == []
        assert acts(backed_off(run)) == [("launch", run.w.run_id, attempt)]
        assert run.step(ALIVE).empty
    first_run = run.w.run_id
    p = run.step(probes("alive", "exited", "alive", "alive", codes=[0, 1, 0, 0]))
    assert acts(p) == [("stop", first_run, 3)]  # the others still stop
    assert (run.w.phase, run.w.failures) == ("gave-up", 3)
    assert [n.event for n in p.notices] == ["gave-up"]
    assert workload_summary(run.w, JOB, run.now) == "gave-up (exit 1 on worker 1)"
    for _ in range(3):
        assert run.step(dead).empty
    run.want = held(replace(JOB, generation=1))
    p = run.step()
    assert acts(p) == [("launch", run.w.run_id, 1)] and run.w.run_id != first_run
    assert run.w.failures == 0


def test_changing_the_policy_after_giving_up_relaunches_with_a_fresh_budget() -> None:
    run = Run(held(replace(JOB, max_failures=0)))
    run.running()
    dead = probes("exited", "exited", "exited", "exited", codes=[1, 1, 1, 1])
    assert run.step(dead).empty and run.w.phase == "gave-up"
    run.want = held(replace(JOB, max_failures=5))
    assert acts(run.step()) == [("launch", run.w.run_id, 2)] and run.w.failures == 0


@pytest.mark.parametrize("restart", ["never", "on-preemption"])
def test_without_restart_on_failure_a_failed_attempt_stays_down(restart: str) -> None:
    run = Run(held(replace(JOB, restart=restart)))
    run.running()
    p = run.step(probes("exited", "alive", "alive", "alive", codes=[2, 0, 0, 0]))
    assert acts(p) == [("stop", run.w.run_id, 1)]
    assert (run.w.phase, run.w.failures) == ("failed", 1)
    assert [n.event for n in p.notices] == ["workload-failed"]
    assert run.step(probes("exited", "exited", "exited", "exited", codes=[2, 9, 9, 9])).empty


def test_stalled_without_output_is_a_failure_and_relaunched() -> None:
    run = Run(held(replace(JOB, stall_after=60.0)))
    run.running()
    quiet = probes("alive", "alive", "alive", "alive", out=run.now)
    assert run.step(quiet, dt=30).empty
    p = run.step(quiet, dt=31)
    assert acts(p) == [("stop", run.w.run_id, 1)] and "stalled" in p.actions[0].reason
    assert run.w.failures == 1
    chatty = Run(held(replace(JOB, stall_after=60.0)))
    chatty.running()
    for _ in range(5):
        assert chatty.step(probes("alive", "alive", "alive", "alive", out=chatty.now), dt=40).empty


# --- preemption --------------------------------------------------------------------------------


def test_preempted_then_recreated_is_the_next_attempt_of_the_same_run_failures_unchanged() -> None:
    run = Run(held())
    run.running()
    run.step(probes("exited", "exited", "exited", "exited", codes=[1, 1, 1, 1]))  # 1 failure
    backed_off(run)
    run.step(ALIVE)
    run_id, attempt = run.w.run_id, run.w.attempt
    run.seen = world(qr("a", state=QRState.SUSPENDED, initiator="SERVICE"))
    p = run.step()
    assert run.w.phase == "interrupted" and not acts(p)
    run.seen = world(qr("a", state=QRState.PROVISIONING))
    assert not acts(run.step())
    run.seen = v4_32(uid="2002")
    p = run.step()
    assert acts(p) == [("launch", run_id, attempt + 1)]
    assert p.actions[0].instance == "a@2002" and "preemption" in p.actions[0].reason
    assert [n.event for n in p.notices if n.event != "active"] == ["relaunched"]
    assert run.w.failures == 1


def test_preempted_with_restart_never_is_not_relaunched() -> None:
    run = Run(held(replace(JOB, restart="never")))
    run.running()
    run.seen = v4_32(uid="2002")  # re-created under us
    assert not acts(run.step()) and run.w.phase == "interrupted"


# --- deliberate stops ---------------------------------------------------------------------------


def test_workload_removed_from_the_file_is_stopped_then_forgotten() -> None:
    run = Run(held())
    run.running()
    run.want = held(None)
    p = run.step(ALIVE)
    assert acts(p) == [("stop", run.w.run_id, 1)]
    assert p.actions[0].reason == "workload removed from the file"
    assert p.actions[0].workload and p.actions[0].workload.grace == JOB.stop_grace
    assert run.w.phase == "stopping"
    assert run.step(probes("exited", "exited", "exited", "exited", codes=[143] * 4)).empty
    assert run.memory.workload("a") is None


def test_slot_released_stops_the_workload_and_deletes() -> None:
    run = Run(held())
    run.running()
    run.want = held(want="released")
    p = run.step(ALIVE)
    assert sorted(brief(p)) == [("-", "delete", "a"), ("~", "stop", "a")]


def test_generation_bump_stops_the_run_then_starts_a_new_run_id() -> None:
    run = Run(held())
    run.running()
    old = run.w.run_id
    run.want = held(replace(JOB, generation=1))
    p = run.step(ALIVE)
    assert acts(p) == [("stop", old, 1)] and "generation bumped 0 → 1" in p.actions[0].reason
    assert run.step(ALIVE).actions  # still running: the stop is decided again (deduped)
    p = run.step(probes("exited", "exited", "exited", "exited", codes=[143] * 4))
    assert acts(p) == [("launch", run.w.run_id, 1)] and run.w.run_id != old
    assert run.w.failures == 0


def test_a_changed_command_is_a_new_run_but_a_changed_grace_is_not() -> None:
    run = Run(held())
    run.running()
    run.want = held(replace(JOB, stop_grace=5.0))
    assert run.step(ALIVE).empty
    run.want = held(replace(JOB, command="python3 train2.py"))
    assert acts(run.step(ALIVE)) == [("stop", run.w.run_id, 1)]


# --- unknown -----------------------------------------------------------------------------------


def test_an_unknown_probe_is_never_a_failure_nor_a_relaunch() -> None:
    run = Run(held())
    run.running()
    down = probes("alive", "unknown", "alive", "alive")
    for _ in range(3):
        p = run.step(down, dt=3600)
        assert not acts(p) and any("probe failed on worker 1" in w for w in p.warnings)
    assert (run.w.phase, run.w.failures, run.w.attempt) == ("running", 0, 1)
    assert wl.state_of(run.w) == "unknown"
    assert run.step(ALIVE).empty and wl.state_of(run.w) == "running"


def test_a_real_exit_counts_while_another_worker_is_unknown_but_nothing_relaunches() -> None:
    run = Run(held())
    run.running()
    p = run.step(probes("exited", "unknown", "exited", "exited", codes=[1, 0, 1, 1]))
    assert run.w.failures == 1 and not [a for a in acts(p) if a[0] == "launch"]
    p = run.step(probes("exited", "unknown", "exited", "exited", codes=[1, 0, 1, 1]))
    assert not acts(p) and run.w.failures == 1
    p = run.step(probes("exited", "exited", "exited", "exited", codes=[1, 143, 1, 1]))
    assert acts(p) == [("launch", run.w.run_id, 2)] and run.w.failures == 1


def test_unknown_stall_is_not_a_stall() -> None:
    run = Run(held(replace(JOB, stall_after=10.0)))
    run.running()
    assert not acts(run.step(probes("alive", "unknown", "alive", "alive"), dt=600))
    assert run.w.failures == 0


# --- restarts of the controller --------------------------------------------------------------


def test_a_restarted_controller_continues_the_same_attempt_never_a_second_one() -> None:
    run = Run(held())
    run.step()  # launch sent, then kill -9
    reloaded = mem.from_dict(mem.to_dict(run.memory))
    assert reloaded.workload("a") == run.w
    again = Run(held(), memory=reloaded)
    again.now = run.now
    p = again.step(probes("missing", "missing", "missing", "missing"))
    assert acts(p) == [("launch", run.w.run_id, 1)]  # same attempt: the worker lock dedupes
    assert again.step(ALIVE).empty and again.w.attempt == 1
    survivor = Run(held(), memory=reloaded)
    survivor.now = run.now
    assert survivor.step(ALIVE).empty and survivor.w.attempt == 1


def test_plan_without_probes_shows_the_first_launch_and_nothing_else() -> None:
    p = plan(held(), LIVE, Memory(), T0)
    assert brief(p) == [("~", "launch", "a")]


def test_race_group_workload_runs_on_the_winner_only() -> None:
    a = slot("a", accelerator="v4-32")
    b = slot("b", Z2, accelerator="v4-32")
    want = desired(
        replace(a, workload=JOB), replace(b, workload=JOB), groups=[group("g", "a", "b")]
    )
    seen = world(*v4_32().requests, *v4_32().nodes, qr("b", Z2))
    p = plan(want, seen, Memory(), T0)
    assert sorted(brief(p)) == [("-", "delete", "b"), ("~", "launch", "a")]


def test_describe_running_line() -> None:
    run = Run(held())
    run.running()
    run.step(probes("exited", "exited", "exited", "exited", codes=[1, 1, 1, 1]))
    backed_off(run)
    run.step(ALIVE)
    shown = workload_summary(run.w, JOB, run.now + 7980)
    assert shown == "running 2h13m · attempt 2 · 1/2 failures"


# --- what users read ---------------------------------------------------------------------------


def test_plan_text_shows_launch_and_stop_with_their_reasons() -> None:
    from reconciler.core.render import format_plan

    run = Run(held())
    text = format_plan(run.step())
    assert "~ launch    a" in text and "start run g0-" in text
    assert "Plan: 0 to add, 1 to change, 0 to destroy." in text
    run.step(ALIVE)
    text = format_plan(run.step(probes("alive", "exited", "alive", "alive", codes=[0, 7, 0, 0])))
    assert "~ stop      a" in text and "exit 7 on worker 1: stop the other workers" in text


def test_status_snapshot_and_table_show_the_workload() -> None:
    from reconciler.core.render import format_status
    from reconciler.core.status import build_status
    from reconciler.model.status import encode, from_json, to_json

    run = Run(held())
    run.running()
    decided = run.step(probes("exited", "exited", "alive", "alive", codes=[1, 1, 0, 0]))
    snap = build_status(
        desired=run.want, desired_file="desired.yaml", errors=(), observation=run.seen,
        observed_at=run.now, memory=run.memory, plan=decided, now=run.now, backend="rest",
    )  # fmt: skip
    doc = encode(snap)
    w = doc["slots"][0]["workload"]
    assert {k: w[k] for k in ("state", "attempt", "failures", "max_failures")} == {
        "state": "failed",
        "attempt": 1,
        "failures": 1,
        "max_failures": 2,
    }
    assert w["run_id"] == run.w.run_id and w["since"].endswith("Z")
    assert w["workers"][0] == {"index": 0, "state": "exited", "exit_code": 1}
    assert from_json(to_json(snap)) == snap  # the JSON round-trips
    table = format_status(snap, run.now)
    assert "WORKLOAD" in table and "failed (exit 1 on worker 0 (+1 more))" in table
    plain = build_status(
        desired=desired(slot("b")), desired_file="d", errors=(), observation=world(),
        observed_at=None, memory=Memory(), plan=None, now=0.0, backend="rest",
    )  # fmt: skip
    assert "workload" not in encode(plain)["slots"][0]  # no workload: not even a null
    assert "WORKLOAD" not in format_status(plain, 0.0)
