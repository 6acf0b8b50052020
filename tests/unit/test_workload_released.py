"""Workload states around races and releases are exact (issue 32 item 7):

- a race loser's workload reads ``not started: lost the race``, never ``pending`` and then
  ``interrupted``;
- a deliberate release ends an attempt as ``released`` (the stop finished, or the release's
  delete took the node first), never ``interrupted … node preempted or re-created``;
- an attempt no worker was ever seen to run is no run time: its history row says ``not
  started`` and ``RAN -``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType

import pytest

from reconciler.adapters.tpu_api_parse import QRState
from reconciler.core import workload as wl
from reconciler.core.attempt_report import attempt_dict, format_attempts
from reconciler.core.history import WorkloadAttempt
from reconciler.core.memory import Memory, observe
from reconciler.core.plan import plan
from reconciler.core.render import format_workload
from reconciler.core.workload_memory import WorkerSeen, WorkloadMemory, from_dict, to_dict
from reconciler.model.desired import WorkloadSpec
from reconciler.runtime.workloads import ended_attempts
from tests.support.worlds import Z1, Z2, active, desired, group, qr, slot, world

SPEC = WorkloadSpec(command="python3 train.py")
BASE = WorkloadMemory(
    run_id="g0-x", generation=SPEC.generation, identity=SPEC.identity, policy=SPEC.policy
)
RUNNING = replace(
    BASE, phase="running", instance="a@1", started_at=10.0, workers=(WorkerSeen(0, "alive"),)
)
STARTING = replace(BASE, phase="starting", instance="a@1", started_at=10.0)
READY = wl.Where(ready="a@1", workers=1, lost=False)
LOST = wl.Where(ready=None, workers=0, lost=True)


def mem(w: WorkloadMemory) -> Memory:
    return Memory(workloads=MappingProxyType({"a": w}))


# --- what the plan's decision does to memory ---------------------------------------------------


@dataclass(frozen=True)
class Decision:
    id: str
    before: WorkloadMemory
    want: str
    releases: dict[str, str]
    race: bool
    phase: str
    release: str
    detail: str


DECISIONS = [
    Decision("a loser's run never sent", BASE, "released", {}, True,
             "not-started", "lost the race", "lost the race"),
    Decision("want: released, never sent", BASE, "released", {}, False,
             "not-started", "want: released", "want: released"),
    Decision("a hold's end, running: said, still running", RUNNING, "released",
             {"a": "hold_for 2h served"}, False, "running", "hold_for 2h served", ""),
    Decision("held again: forgotten, pending once more",
             replace(BASE, phase="not-started", detail="lost the race", release="lost the race"),
             "held", {}, True, "pending", "", ""),
    Decision("held again while running: the reason goes",
             replace(RUNNING, release="want: released"), "held", {}, False, "running", "", ""),
    Decision("an ended attempt is left as it is", replace(BASE, phase="succeeded"),
             "released", {}, False, "succeeded", "", ""),
]  # fmt: skip


@pytest.mark.parametrize("row", DECISIONS, ids=lambda r: r.id)
def test_record_decisions(row: Decision) -> None:
    spec = replace(slot("a"), workload=SPEC)
    d = desired(spec, slot("b"), groups=[group("g", "a", "b")] if row.race else ())
    after = wl.record_decisions(mem(row.before), d, {"a": row.want}, row.releases).workloads["a"]
    assert (after.phase, after.release, after.detail) == (row.phase, row.release, row.detail)


# --- how an attempt ends ------------------------------------------------------------------------


@dataclass(frozen=True)
class End:
    id: str
    before: WorkloadMemory
    at: wl.Where
    phase: str
    detail: str


ENDS = [
    End("preempted, running: interrupted", RUNNING, LOST, "interrupted",
        "node preempted or re-created"),
    End("released, running, the node deleted before the stop: released",
        replace(RUNNING, release="want: released"), LOST, "released", "want: released"),
    End("released before it was ever seen running: not started",
        replace(STARTING, release="lost the race"), LOST, "not-started", "lost the race"),
    End("the release's stop is over: released",
        replace(RUNNING, phase="stopping", stop_for="released", release="hold_for 2h served"),
        LOST, "released", "hold_for 2h served"),
    End("a stop for a release said by an older controller: released",
        replace(RUNNING, phase="stopping", stop_for="released"), LOST, "released",
        "slot released"),
]  # fmt: skip


@pytest.mark.parametrize("row", ENDS, ids=lambda r: r.id)
def test_how_an_attempt_ends(row: End) -> None:
    after = wl.fold(row.before, SPEC, row.at, None, 100.0)
    assert after is not None
    assert (after.phase, after.detail) == (row.phase, row.detail)
    assert wl.state_of(after) == row.phase


def test_the_words_users_see() -> None:
    loser = replace(BASE, phase="not-started", detail="lost the race")
    assert wl.state_of(loser) == "not-started"
    assert format_workload("not-started", None, 1, 0, 3, "lost the race") == (
        "not started: lost the race"
    )
    assert format_workload("released", None, 2, 0, 3, "want: released") == (
        "released (want: released)"
    )


def test_a_released_slot_held_again_starts_the_next_attempt_not_a_preemption_relaunch() -> None:
    spec = replace(slot("a"), workload=SPEC)
    done = replace(RUNNING, phase="released", detail="want: released", instance="a@1")
    d = wl.decide(spec, done, held=True, at=READY, set_up=True, probes=None, now=200.0)
    ((act, reason),) = d.acts
    assert (act.verb, act.attempt, act.why) == ("launch", 2, "released")
    assert "held again" in reason and "preemption" not in reason
    loser = replace(BASE, phase="not-started", detail="lost the race")
    d = wl.decide(spec, loser, held=True, at=READY, set_up=True, probes=None, now=200.0)
    ((act, _),) = d.acts
    assert (act.verb, act.attempt, act.why) == ("launch", 1, "start")
    assert (
        wl.decide(spec, loser, held=False, at=READY, set_up=True, probes=None, now=1.0).acts == ()
    )


def test_the_release_is_kept_across_a_restart() -> None:
    w = replace(RUNNING, release="lost the race")
    assert from_dict(to_dict(w)) == w
    assert "release" not in to_dict(RUNNING), "files of earlier versions stay byte-identical"


def test_a_race_loser_reads_not_started_lost_the_race() -> None:
    """The planner closes a race won by "a"; "b" (a candidate with a workload) is released:
    its run, never sent, reads not-started."""
    a = replace(slot("a", Z1), workload=SPEC)
    b = replace(slot("b", Z2), workload=SPEC)
    d = desired(a, b, groups=[group("g", "a", "b")])
    seen = world(*active("a", Z1), qr("b", Z2, QRState.WAITING_FOR_RESOURCES))
    memory = wl.observe(observe(Memory(), d, seen, 0.0), d, seen, {}, 0.0)
    assert wl.state_of(memory.workload("b")) == "pending"  # before the race is decided
    p = plan(d, seen, memory, 0.0)
    assert p.decided_want["b"] == "released"
    memory = wl.record_decisions(memory, d, p.decided_want, {})
    b_wl = memory.workload("b")
    assert b_wl is not None and wl.state_of(b_wl) == "not-started"
    assert b_wl.detail == "lost the race"
    # the loser's delete goes through; the next pass keeps it so
    gone = world(*active("a", Z1))
    memory = wl.observe(observe(memory, d, gone, 5.0), d, gone, {}, 5.0)
    assert wl.state_of(memory.workload("b")) == "not-started"


# --- the history's rows ----------------------------------------------------------------------


def test_an_attempt_never_seen_to_run_is_no_run_time() -> None:
    sent = replace(STARTING, unsent="ssh: connect refused", release="want: released")
    after = wl.fold(sent, SPEC, LOST, None, 140.0)
    assert after is not None and after.phase == "not-started"
    (ended,) = ended_attempts(mem(sent), mem(after))
    assert ended.cause == "not started: ssh: connect refused"
    row = WorkloadAttempt("a", Z1, "v4-8", "g0-x", 1, 10.0, 140.0, None, ended.cause)
    assert attempt_dict(row)["ran_seconds"] is None
    table = format_attempts([row])
    assert "2m10s" not in table and " - " in table.splitlines()[-1]
    ran = replace(row, cause="released: want: released")
    assert attempt_dict(ran)["ran_seconds"] == 130.0
    assert "2m10s" in format_attempts([ran])


def test_a_released_running_attempt_is_recorded_as_released() -> None:
    released = wl.fold(replace(RUNNING, release="want: released"), SPEC, LOST, None, 140.0)
    assert released is not None
    (ended,) = ended_attempts(mem(RUNNING), mem(released))
    assert ended.cause == "released: want: released"


def test_the_stop_of_a_release_ends_the_attempt_as_released() -> None:
    """The attempt leaves *running* when the release's stop is sent: its row says released."""
    stopping = replace(
        RUNNING, phase="stopping", stop_for="released", release="want: released", since=50.0
    )
    (ended,) = ended_attempts(mem(RUNNING), mem(stopping))
    assert ended.cause == "released: want: released"
    removed = replace(stopping, stop_for="removed", release="")
    (ended,) = ended_attempts(mem(RUNNING), mem(removed))
    assert ended.cause == "stopping"
