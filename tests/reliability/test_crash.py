"""Crash safety: kill -9 the controller at random moments while the cloud misbehaves.

The controller runs as the user runs it (``python -m reconciler -f F --state-dir D run``) against
the emulator, which plays a scenario in a thread (preemptions, capacity swings that open and
close races, stock-outs, zones dropping out of lists) while ~10 % of API requests meet an
injected fault (429, 503, slow answers, garbage bodies, HTML error pages). Each cycle starts the
controller and SIGKILLs it — at a random moment, during start-up, or right after the emulator
carried out a create or delete whose answer the controller will never read — then starts it
again.

Checked after every cycle and at the end (rules in ``_harness.Oracle``):

- no create for anything but a slot of the file, and never a second accepted create of a QR
  without an accepted delete in between;
- no DELETE of a held slot unless it was dead (SUSPENDED / FAILED) or a race loser in the world
  when the DELETE arrived or in one of the last observations before it; never a DELETE of the
  planted unmanaged QRs (prune is off); no QR in the world that is neither a slot nor planted;
- status.json is complete JSON at every read (a reader thread re-reads it all along), and the
  event log reads with ``read_events`` with rising ``seq``: at most one torn line per kill;
- after the last fault, no discrepancy the controller can fix outlives 3 of its polls, and the
  world converges (held slots ACTIVE, races won by ``count``, released and losers gone).
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import random
import threading
import time
from pathlib import Path
from typing import Any, Final

import pytest

from reconciler.emulator import Emulator, Fault
from reconciler.model.load import parse_desired
from reconciler.runtime.events import read_events
from tests.reliability._harness import (
    QUEUED,
    WON,
    ControllerProcess,
    Oracle,
    Served,
    StatusWatcher,
    Tap,
    controller_env,
    full,
    record_figures,
    snapshot,
    stale_deletes,
    torn_lines,
    wait_until,
)

pytestmark = pytest.mark.integration

ZONES: Final = ("us-central2-b", "europe-west4-a", "us-east1-d")
DESIRED: Final = """\
# Crash scenario: three held slots, one released, two races (count 1 and count 2).
project: test-project
settings:
  backend: rest
  poll_interval: 0.3s
  fast_poll_interval: 0.2s
defaults:
  setup: {tmux: false}
slots:
  - {name: held-a, zone: us-central2-b, accelerator: v4-8, want: held}
  - {name: held-b, zone: europe-west4-a, accelerator: v6e-8, want: held}
  - {name: held-c, zone: us-east1-d, accelerator: v6e-8, want: held, mode: on-demand}
  - {name: gone-a, zone: us-central2-b, accelerator: v4-8, want: released}
  - {name: race-a, zone: europe-west4-a, accelerator: v5litepod-8}
  - {name: race-b, zone: us-east1-d, accelerator: v5litepod-8}
  - {name: race-c, zone: us-central2-b, accelerator: v5litepod-8}
  - {name: pair-a, zone: europe-west4-a, accelerator: v6e-16}
  - {name: pair-b, zone: us-east1-d, accelerator: v6e-16}
  - {name: pair-c, zone: us-central2-b, accelerator: v6e-16}
race_groups:
  - {name: any-v5e, count: 1, slots: [race-a, race-b, race-c]}
  - {name: two-v6e, count: 2, slots: [pair-a, pair-b, pair-c]}
"""
#: Unmanaged QRs the test puts in place: with prune off nothing may touch them.
PLANTED: Final[tuple[tuple[str, str, dict[str, str]], ...]] = (
    ("us-central2-b", "stray-plain", {}),
    ("europe-west4-a", "stray-managed", {"managed-by": "tpu-reconciler"}),
    ("us-east1-d", "stray-other", {"owner": "someone-else"}),
)
RACE_CAPACITY: Final = tuple((z, a) for z in ZONES for a in ("v5litepod-8", "v6e-16"))
FAULT_RATE: Final = 0.10
POLL_BUDGET: Final = 3


class Chaos:
    """The scenario, played in a thread: preemptions, capacity swings, stock-outs, dark zones."""

    def __init__(self, emu: Emulator, oracle: Oracle, rng: random.Random) -> None:
        self.emu, self.oracle, self.rng = emu, oracle, rng
        self.counts: collections.Counter[str] = collections.Counter()
        self._dark: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="chaos")

    def start(self) -> Chaos:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for zone in list(self._dark):
            self.emu.set_unreachable(zone, False)
        self._dark.clear()

    def _loop(self) -> None:
        while not self._stop.wait(self.rng.uniform(0.3, 1.0)):
            now = time.monotonic()
            for zone, until in list(self._dark.items()):
                if until <= now:
                    self.emu.set_unreachable(zone, False)
                    del self._dark[zone]
            try:
                self._step(now)
            except (LookupError, ValueError):
                self.counts["raced-out"] += 1  # the world moved under the event: skip it

    def _step(self, now: float) -> None:
        snap = snapshot(self.emu)
        ours = [q for k, q in sorted(snap.items()) if self.oracle.spec(k) is not None]
        roll = self.rng.random()
        if roll < 0.40:
            won = [q for q in ours if q.state in WON]
            if won:
                q = self.rng.choice(won)
                self.emu.preempt(q.zone, q.name)
                self.counts["preempt"] += 1
        elif roll < 0.65:
            zone, accelerator = self.rng.choice(RACE_CAPACITY)
            self.emu.set_capacity(zone, accelerator, self.rng.choice([0, 0, 1, 2, None]))
            self.counts["capacity"] += 1
        elif roll < 0.80:
            queued = [q for q in ours if q.state in QUEUED]
            if queued:
                q = self.rng.choice(queued)
                self.emu.fail_queued_resource(q.zone, q.name)
                self.counts["stock-out"] += 1
        elif roll < 0.90:
            zone = self.rng.choice(ZONES)
            if zone not in self._dark:
                self.emu.set_unreachable(zone, True)
                self._dark[zone] = now + self.rng.uniform(0.3, 1.5)
                self.counts["zone-dark"] += 1


#: How each life ends, in turn (the moment within each is random).
KILL_MODES: Final = ("after-mutation", "random", "startup", "random")


def _final_losses(emu: Emulator, oracle: Oracle) -> list[str]:
    """Before the last start, preempt every running slot: the last controller then has work
    (replace held slots, reopen races) whose every step the poll budget measures."""
    done = []
    for (zone, name), qr in sorted(snapshot(emu).items()):
        if oracle.spec((zone, name)) is not None and qr.state in WON:
            emu.preempt(zone, name)
            done.append("final-preempt")
    return done


def _kill_cycle(ctl: ControllerProcess, tap: Tap, rng: random.Random, mode: str) -> str:
    """One life of the controller, ended by SIGKILL; returns how it was ended."""
    ctl.start()
    if mode == "random":  # start-up takes ~1.2 s; most of these land in the loop
        time.sleep(rng.uniform(1.5, 6.0))
    elif mode == "startup":
        time.sleep(rng.uniform(0.0, 1.4))
    else:
        fired = tap.on_next_mutation(lambda _served: ctl.signal_kill())
        if not fired.wait(4.0):
            tap.cancel_hook()
            mode = "after-mutation (none came)"
    ctl.kill9()
    return mode


def _successful_lists(tap: Tap, after: float) -> list[Served]:
    return [
        s
        for s in tap.served("list-qr")
        if s.arrived > after and s.status == 200 and s.fault is None and s.after is not None
    ]


def _longest_need(
    oracle: Oracle, lists: list[Served], since: float, until: dict[str, float]
) -> tuple[int, str]:
    """The most consecutive polls one discrepancy lived through, and which it was. A slot's
    polls count from ``since`` or from the end of a backoff it announced (``until``, on the
    lists' clock), whichever is later."""
    streak: dict[tuple[str, str], int] = {}
    worst, what = 0, ""
    for s in lists:
        assert s.after is not None
        needs = {
            n for n in oracle.needs(s.after).items() if s.arrived > max(since, until.get(n[0], 0))
        }
        streak = {n: streak.get(n, 0) + 1 for n in needs}
        for n, count in streak.items():
            if count > worst:
                worst, what = count, f"{n[0]} needs {n[1]}"
    return worst, what


def run_crash(tmp: Path, cycles: int, seed: int, *, client_timeout: bool) -> dict[str, Any]:
    rng = random.Random(seed)
    (tmp / "intent").mkdir()
    desired_path = tmp / "intent" / "desired.yaml"  # alone: the controller watches its directory
    desired_path.write_text(DESIRED)
    state = tmp / "state"
    planted = frozenset((z, n) for z, n, _ in PLANTED)
    oracle = Oracle(parse_desired(DESIRED, str(desired_path)), planted)
    violations: list[str] = []
    kills: collections.Counter[str] = collections.Counter()
    with Emulator(speed=20.0) as emu:
        for zone, name, labels in PLANTED:
            emu.add_queued_resource(zone, name, "v4-8", labels=labels, state="ACTIVE")
        emu.add_queued_resource(
            "us-central2-b", "gone-a", "v4-8", labels={"managed-by": "tpu-reconciler"}
        )
        for zone, accelerator in RACE_CAPACITY:
            emu.set_capacity(zone, accelerator, rng.choice([0, 1]))
        ctl = ControllerProcess(
            desired_path, state, controller_env(emu, tmp), tmp / "controller.log"
        )
        tap = Tap(emu, random.Random(seed + 1), rate=FAULT_RATE)
        chaos = Chaos(emu, oracle, random.Random(seed + 2)).start()
        watcher = StatusWatcher(state / "status.json").__enter__()
        try:
            for cycle in range(cycles):
                kills[_kill_cycle(ctl, tap, rng, KILL_MODES[cycle % len(KILL_MODES)])] += 1
                violations += _check_cycle(cycle, oracle, emu, tap, state, ctl.kills)
            if client_timeout:
                tap.rate = 0.0
                wait_until("slow answers drained", lambda: tap.in_flight == 0, timeout=40)
                kills[_timeout_cycle(ctl, emu, watcher)] += 1
            # The last act: no more faults or events, all capacity back; one more start.
            chaos.stop()
            tap.rate = 0.0
            for zone, accelerator in RACE_CAPACITY:
                emu.set_capacity(zone, accelerator, None)
            wait_until("slow answers drained", lambda: tap.in_flight == 0, timeout=40)
            chaos.counts.update(_final_losses(emu, oracle))
            restart = time.monotonic()
            ctl.start()
            epoch_offset = time.time() - time.monotonic()
            slack = max(0.0, watcher.latest_until - time.time())
            try:
                wait_until(
                    "the world matches desired.yaml",
                    lambda: not oracle.unconverged(snapshot(emu)),
                    timeout=60 + slack,
                    step=0.1,
                )
            except AssertionError as e:  # reported with everything else found
                violations += [f"{e}: {p}" for p in oracle.unconverged(snapshot(emu))]
            converged_after = time.monotonic() - restart
            time.sleep(1.0)  # a few more polls: it must stay converged and quiet
            still = oracle.unconverged(snapshot(emu))
            violations += [f"after convergence: {p}" for p in still]
            since = max(tap.last_fault_at, restart)
            until = {slot: t - epoch_offset for slot, t in watcher.until.items()}
            polls, need = _longest_need(oracle, _successful_lists(tap, since), since, until)
            if polls > POLL_BUDGET:
                violations.append(f"{need} through {polls} polls after the last fault")
            rc = ctl.terminate()
            if rc != 0:
                violations.append(f"controller exited {rc} on SIGTERM")
        finally:
            watcher.__exit__()
            if ctl.alive():
                ctl.kill9()
            chaos.stop()
            tap.close()
        violations += _check_cycle(cycles, oracle, emu, tap, state, ctl.kills)
        violations += [f"status.json read incomplete: {b}" for b in watcher.bad]
        log = tap.served()
        figures = {
            "cycles": cycles,
            "kills": dict(kills),
            "faults": dict(tap.faults),
            "faults_total": sum(tap.faults.values()),
            "api_requests": len(log),
            "emulator_logged": len(emu.requests()),
            "accepted_creates": sum(s.kind == "create" and s.accepted for s in log),
            "deletes": sum(s.kind == "delete" for s in log),
            "stale_deletes_on_a_newer_incarnation": len(stale_deletes(log)),
            "scenario_events": dict(chaos.counts),
            "status_reads": watcher.reads,
            "observe_errors_shown": watcher.observe_errors,
            "torn_event_lines": torn_lines(state / "events.jsonl"),
            "longest_need_polls": polls,
            "longest_need": need,
            "converged_after_s": round(converged_after, 2),
            "violations": len(set(violations)),
        }
    return {"figures": figures, "violations": sorted(set(violations)), "log": tmp}


def _check_cycle(
    cycle: int, oracle: Oracle, emu: Emulator, tap: Tap, state: Path, kills: int
) -> list[str]:
    out = [f"cycle {cycle}: {p}" for p in oracle.audit(tap.served())]
    out += [f"cycle {cycle}: stray QR {s}" for s in oracle.strays(snapshot(emu))]
    status = state / "status.json"
    if status.exists():
        try:
            json.loads(status.read_bytes())
        except ValueError as e:
            out.append(f"cycle {cycle}: status.json is not complete JSON: {e}")
    events = read_events(state / "events.jsonl")
    seqs = [e.get("seq") for e in events]
    if any(
        not isinstance(b, int) or not isinstance(a, int) or b <= a
        for a, b in itertools.pairwise(seqs)
    ):
        out.append(f"cycle {cycle}: event seq does not rise")
    torn = torn_lines(state / "events.jsonl")
    if torn > kills:
        out.append(f"cycle {cycle}: {torn} torn event lines after {kills} kills")
    return out


def _timeout_cycle(ctl: ControllerProcess, emu: Emulator, watcher: StatusWatcher) -> str:
    """A list that answers after the REST client's 30 s timeout: the controller must give up on
    it, say so in status.json and carry on."""
    emu.inject_fault(
        Fault(status=None, method="GET", path=r"/locations/-/queuedResources$", latency=31.0)
    )
    ctl.start()
    wait_until(
        "status.json shows the timeout",
        lambda: "no answer within" in watcher.last_observe_error,
        timeout=45,
    )
    ctl.kill9()
    return "after a client timeout"


def _report(result: dict[str, Any], name: str) -> None:
    figures = result["figures"]
    record_figures(name, **figures)
    print(f"{name}: {figures}")
    assert not result["violations"], "\n".join(result["violations"][:40])


def test_kill_9_during_faults_and_races_short(tmp_path: Path) -> None:
    """CI: 5 kill cycles under ~10 % faults and a racing, preempting world."""
    _report(run_crash(tmp_path, 5, seed=8, client_timeout=False), "crash-short")


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_kill_9_during_faults_and_races_full(tmp_path: Path) -> None:
    """The full run: 50 kill cycles (more with RELIABILITY_CYCLES), plus one controller life
    that outlasts the REST client's timeout."""
    cycles = int(os.environ.get("RELIABILITY_CYCLES", "50" if full() else "20"))
    _report(run_crash(tmp_path, cycles, seed=88, client_timeout=True), "crash-full")
