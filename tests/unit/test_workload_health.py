"""The rules for what a crash or a full disk leaves behind (core/workload_health.py), alone and
through the controller's loop over pure parts: run ids a restart can find and adopt, a launched
worker that left no record is a failure after a grace (an unreachable one never is), and an
attempt whose launch started nothing is shown pending with why."""

from __future__ import annotations

from dataclasses import replace

from reconciler.core import workload as wl
from reconciler.core import workload_health as health
from reconciler.core.memory import record_failure
from reconciler.core.status import workload_status
from reconciler.core.workload_memory import from_dict, to_dict
from reconciler.model.workload import WorkerProbe
from tests.unit.test_plan_workload import ALIVE, JOB, Run, acts, backed_off, held, probes

GRACE = health.LOST_GRACE


def lost(*states: str, launched: bool = True) -> list[WorkerProbe]:
    """Probes where each "missing" worker had its attempt launched (``started_at`` set)."""
    return [
        WorkerProbe(i, s, started_at=1.0 if s == "missing" and launched else None)  # type: ignore[arg-type]
        for i, s in enumerate(states)
    ]


# --- run ids ---------------------------------------------------------------------------------


def test_a_run_id_names_its_generation_and_command_and_stays_a_path_part() -> None:
    run_id = health.make_run_id(7, "0123456789ab", 1_700_000_000.5)
    assert run_id.startswith("g7-01234567-")
    assert health.run_key(run_id) == "g7-01234567"
    assert health.run_key(health.make_run_id(7, "0123456789ab", 1_800_000_000.0)) == "g7-01234567"
    assert health.run_key(health.make_run_id(8, "0123456789ab", 1.0)) != "g7-01234567"
    assert health.run_key("g0-abc") is None  # an id from before: never adopted, never adopts
    assert wl.new_run(JOB, 5.0).run_id.startswith(f"g0-{JOB.identity[:8]}-")


def test_adopted_needs_every_worker_missing_and_one_run_of_the_same_work_named() -> None:
    mine = health.make_run_id(1, "aaaaaaaabbbb", 200.0)
    twin = health.make_run_id(1, "aaaaaaaabbbb", 100.0)
    other = health.make_run_id(1, "ccccccccdddd", 100.0)
    named = [WorkerProbe(i, "missing", adopt=f"{twin}/1") for i in range(4)]
    assert health.adopted(mine, 1, named) == (twin, 1)
    assert health.adopted(mine, 2, named) is None  # only a new run's first attempt adopts
    one_alive = [*named[:3], WorkerProbe(3, "alive")]
    assert health.adopted(mine, 1, one_alive) is None
    one_unknown = [*named[:3], WorkerProbe(3, "unknown", error="timeout")]
    assert health.adopted(mine, 1, one_unknown) is None  # no answer: no evidence, wait
    two_names = [*named[:3], WorkerProbe(3, "missing", adopt=f"{other}/1")]
    assert health.adopted(mine, 1, two_names) is None
    wrong_work = [WorkerProbe(i, "missing", adopt=f"{other}/1") for i in range(4)]
    assert health.adopted(mine, 1, wrong_work) is None  # the wrapper's word is checked too
    assert health.adopted(mine, 1, [WorkerProbe(0, "missing", adopt=f"{mine}/1")]) is None
    assert health.adopted(mine, 1, [WorkerProbe(i, "missing") for i in range(4)]) is None


def test_a_restart_that_lost_its_launch_adopts_it_and_starts_nothing_more() -> None:
    """Generation bumped, the new run launched, memory not saved, the controller killed: the
    restart decides another run id for the same work. Its launch starts nothing on a worker
    that holds the twin; the probe names the twin, and the fold takes it over."""
    run = Run(held())
    run.running()
    run.want = held(replace(JOB, generation=1))
    assert acts(run.step(ALIVE))[0][0] == "stop"
    saved = run.memory  # the last memory that reached the disk
    p = run.step(probes("exited", "exited", "exited", "exited", codes=[143] * 4))
    (launched,) = acts(p)
    orphan = launched[1]
    run.memory, run.now = saved, run.now + 30  # killed, restarted: memory as saved
    p = run.step(probes("exited", "exited", "exited", "exited", codes=[143] * 4))
    ((verb, second, attempt),) = acts(p)
    assert (verb, attempt) == ("launch", 1) and second != orphan
    assert health.run_key(second) == health.run_key(orphan)
    # every worker answered the launch with "adopt": its probe names the orphan
    named = [WorkerProbe(i, "missing", adopt=f"{orphan}/1") for i in range(4)]
    p = run.step(named)
    assert not acts(p)  # no resend of the id nobody runs
    assert (run.w.run_id, run.w.attempt, run.w.phase) == (orphan, 1, "starting")
    assert "took over" in run.w.detail
    assert run.step(ALIVE).empty and (run.w.run_id, run.w.phase) == (orphan, "running")


# --- a worker that left no record ---------------------------------------------------------------


def test_lost_worker_counts_from_the_first_gap_and_fails_after_the_grace() -> None:
    seen = lost("alive", "alive", "missing", "alive")
    since, why = health.lost_worker(seen, None, 100.0)
    assert (since, why) == (100.0, None)
    assert health.lost_worker(seen, since, 100.0 + GRACE - 1) == (100.0, None)
    since, why = health.lost_worker(seen, since, 100.0 + GRACE)
    assert since == 100.0 and why is not None and "worker 2 left no exit record" in why
    exited_peers = lost("exited", "missing", "exited", "missing")
    why = health.lost_worker(exited_peers, 0.0, GRACE)[1]
    assert why is not None and "workers 1, 3" in why


def test_workers_split_between_two_launches_of_the_same_work_fail_after_the_grace() -> None:
    """A crash cut the first launch off between workers: 0 and 1 hold it, 2 and 3 started the
    restart's own. Nothing is adopted (the workers disagree) and it is not left starting."""
    twin = health.make_run_id(1, "aaaaaaaabbbb", 100.0)
    split = [WorkerProbe(0, "missing", adopt=f"{twin}/1"), WorkerProbe(1, "missing",
             adopt=f"{twin}/1"), WorkerProbe(2, "alive"), WorkerProbe(3, "alive")]  # fmt: skip
    assert health.adopted(health.make_run_id(1, "aaaaaaaabbbb", 200.0), 1, split) is None
    assert health.lost_worker(split, 0.0, GRACE - 1) == (0.0, None)
    assert health.lost_worker(split, 0.0, GRACE)[1] == "workers 0, 1 run another launch of it"


def test_lost_worker_never_fires_on_a_probe_that_failed_or_a_launch_not_arrived() -> None:
    unreachable = [WorkerProbe(0, "alive"), WorkerProbe(1, "unknown", error="ssh: timeout")]
    assert health.lost_worker(unreachable, None, 1e9) == (None, None)
    # a worker unreachable for a pass keeps the clock as it was, and decides nothing
    assert health.lost_worker(unreachable, 50.0, 1e9) == (50.0, None)
    not_arrived = lost("alive", "missing", launched=False)
    assert health.lost_worker(not_arrived, None, 1e9) == (None, None)
    everyone_gone = lost("missing", "missing")  # the node's records vanished: not this rule
    assert health.lost_worker(everyone_gone, 0.0, 1e9) == (None, None)
    back = lost("alive", "alive")
    assert health.lost_worker(back, 0.0, 1e9) == (None, None)  # the gap closed: clock reset


def test_a_worker_whose_exit_record_was_lost_fails_the_attempt_and_it_is_relaunched() -> None:
    run = Run(held())
    run.running()
    hole = lost("alive", "alive", "missing", "alive")
    assert run.step(hole, dt=5).empty
    assert (run.w.phase, run.w.failures) == ("running", 0) and run.w.missing_since is not None
    p = run.step(hole, dt=GRACE)
    assert (run.w.phase, run.w.failures) == ("failed", 1)
    assert "worker 2 left no exit record" in run.w.detail
    assert acts(p) == [("stop", run.w.run_id, 1)]  # the others are stopped ...
    gone = lost("exited", "exited", "missing", "exited")
    gone = [replace(g, exit_code=143) if g.state == "exited" else g for g in gone]
    assert acts(run.step(gone)) == []  # ... and, after the restart backoff, it runs again
    assert acts(backed_off(run)) == [("launch", run.w.run_id, 2)]
    assert run.w.missing_since is None


def test_an_unreachable_worker_for_hours_is_never_a_failure() -> None:
    run = Run(held())
    run.running()
    for _ in range(20):
        run.step([*ALIVE[:2], WorkerProbe(2, "unknown", error="ssh: timeout"), ALIVE[3]], dt=600)
    assert (run.w.phase, run.w.failures) == ("running", 0)


def test_the_gap_clock_survives_a_restart() -> None:
    w = replace(wl.new_run(JOB, 1.0), missing_since=42.5)
    assert from_dict(to_dict(w)).missing_since == 42.5
    assert "missing_since" not in to_dict(wl.new_run(JOB, 1.0))  # earlier files unchanged


# --- nothing sent ------------------------------------------------------------------------------


def test_a_launch_that_started_nothing_is_pending_with_why_until_it_does() -> None:
    run = Run(held())
    p = run.step()
    assert acts(p)[0][0] == "launch" and wl.state_of(run.w) == "starting"
    key = p.actions[0].key
    why = "a: no secret 'hf' stored for HF_TOKEN: run `tpu-reconciler secret set hf`"
    run.memory = record_failure(
        run.memory, key, message=why, now=run.now, permanent=False, fingerprint="f"
    )
    run.step(probes("missing", "missing", "missing", "missing"))
    assert wl.state_of(run.w) == "pending"
    status = workload_status(run.w, JOB, run.now)
    assert status is not None and status.state == "pending"
    assert status.detail == f"not started: {why}"
    run.memory = replace(run.memory, errors={})  # the secret was set, the resend went out
    run.step(ALIVE)
    assert wl.state_of(run.w) == "running" and run.w.unsent == ""


def test_a_refused_launch_on_some_workers_after_others_started_is_still_starting() -> None:
    assert health.unsent("starting", ["alive", "missing"], "refused") == ""
    assert health.unsent("starting", ["missing", "missing"], "refused") == "refused"
    assert health.unsent("starting", [], "refused") == "refused"
    assert health.unsent("running", [], "refused") == ""
    assert health.unsent("starting", [], None) == ""
