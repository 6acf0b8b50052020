"""The controller: level-triggered reconcile passes, forever.

Each pass reads the world fresh (one observation), loads the desired file (keeping the last
valid intent), plans with the pure planner, dispatches the actions that are not already in
flight, and writes the status snapshot and memory. A pass never waits for an action: actions
run as tasks and wake the loop when they finish. Triggers for a pass: the desired file changed
(watched through its directory), an action completed, the poll interval (fast while anything
moves), or a stop request.

Guarantees kept here:
- at most one observation at a time, and never two actions for one slot's cloud key at once;
- an invalid or missing desired file plans from the last valid intent; with none, nothing acts;
- errors carry retry intent: transient ones back off per action key (forgotten on success),
  429 / 5xx ones by Google's rule (``core.retry``), permanent ones block that action until the
  intent or the world changes;
- a create or delete whose operation has not shown its outcome reads that operation back
  before anything is resent (``runtime.lro``);
- nothing raised by the cloud, a setup step or a notifier ends the loop;
- every new intent is logged (``desired.loaded``) and audited (``adapters/audit.file_change``)
  with the owner of each file that changed when it was read: a hand edit is its saver's, and a
  lab member's file is its owner's alone;
- in a lab, a member's confirmation counts only as a request in the inbox, judged by its
  file's owner (``adapters/confirm_file.take_requests``); who asked is in the event and the
  controller's own audit.

A pass is the look-and-decide step ``runtime.step`` (shared with ``plan`` and ``apply``, which
call it with other ``Effects``), then the dispatch, the notices, the workload tails, the
snapshot and the memory save. Running the actions (dispatch, the adapters, settling each
outcome) is the collaborator ``runtime.actions.Actions``, handed what it needs; the outcome
policy itself is the pure ``core.outcome``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import replace as replace_record
from typing import TYPE_CHECKING

from reconciler.adapters.statedir import StateDir
from reconciler.adapters.status_file import write_status
from reconciler.core import across
from reconciler.core import memory as mem
from reconciler.core.before_end import next_wake
from reconciler.core.metrics import pass_result
from reconciler.core.plan import Action, in_motion
from reconciler.core.schedule import hurries, next_interval, watching
from reconciler.core.status import build_status
from reconciler.core.workload_backoff import restart_due
from reconciler.errors import ControllerAlreadyRunning, PermanentError, TemporaryError
from reconciler.model.desired import Desired, Settings
from reconciler.model.status import ControllerInfo
from reconciler.runtime.actions import Actions, SetupRunner
from reconciler.runtime.backends import Clouds
from reconciler.runtime.backoff import OBSERVE, Backoff
from reconciler.runtime.desired_loader import DesiredLoader
from reconciler.runtime.events import EventLog
from reconciler.runtime.lab_intake import report_layout
from reconciler.runtime.latency import LatencyProbes
from reconciler.runtime.memory_file import InForce, Remembered
from reconciler.runtime.quota_limits import CloudQuotaLimits
from reconciler.runtime.step import APPLY, PLAN, RUN, PassResult, Step, WorkloadRecord
from reconciler.runtime.workloads import Prober, WorkloadPort, tails

if TYPE_CHECKING:
    from reconciler.adapters.cloud import Cloud
    from reconciler.runtime.history import HistoryRecorder
    from reconciler.runtime.lock import ControllerLock
    from reconciler.runtime.metrics import Metrics

log = logging.getLogger(__name__)

CloudFactory = Callable[[Desired], "Cloud"]

__all__ = ["CloudFactory", "Controller", "PassResult"]


class Controller:
    def __init__(
        self,
        *,
        store: DesiredLoader,
        state: StateDir,
        cloud_factory: CloudFactory,
        events: EventLog,
        setup: SetupRunner | None = None,
        clock: Callable[[], float] = time.time,
        allow_destructive: bool = True,
        workloads: WorkloadPort | None = None,
        history: HistoryRecorder | None = None,
        lock: ControllerLock | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.store, self.state, self.events, self.setup = store, state, events, setup
        self._history = history
        self.lock = lock  # held by the caller; followed to each new inode of the desired file
        self.metrics = metrics  # Prometheus counters; serves /metrics while settings.metrics
        #: why memory or the last snapshot could not be saved when ``run`` stopped, if so
        self.unsaved: OSError | None = None
        # The setup runner doubles as the workload port when it has the methods (LiveSetup).
        self.workloads = workloads or (setup if isinstance(setup, WorkloadPort) else None)
        self.clock = clock
        self._allow_destructive = allow_destructive
        self.remembered = Remembered(state, events)
        self.clouds = Clouds(cloud_factory)
        self.backoff = Backoff()  # per key: each action's, and the observation's (OBSERVE)
        self._moved = moved = WorkloadRecord(events, self._now, metrics, history)
        self.actions = Actions(
            memory=self.remembered,
            events=events,
            clouds=self.clouds,
            setup=setup,
            workloads=self.workloads,
            clock=self._now,
            allow_destructive=allow_destructive,
            backoff=self.backoff,
            moved=moved,
            store=store,
        )
        self.prober = Prober()  # the workload probes of each pass, bounded in time
        self.step = Step(
            store=store,
            state=state,
            events=events,
            memory=self.remembered,
            clouds=self.clouds,
            quotas=CloudQuotaLimits(self._now, self.actions.note),  # settings.quota_source: cloud
            setup=setup,
            workloads=self.workloads,
            clock=self._now,
            backoff=self.backoff,
            moved=moved,
            observing=self.actions.observing,
            prober=self.prober,
            history=history,
            metrics=metrics,
        )
        self.latency = LatencyProbes(self._record_latency)  # round trips, beside the pass
        self._last: PassResult | None = None

    def _now(self) -> float:
        """``clock`` as it is now (a test may swap it): what the collaborators read."""
        return self.clock()

    memory = InForce()  # the memory in force (``remembered.value``)

    @property
    def history(self) -> HistoryRecorder | None:
        """The capacity history: fed one look per pass and each ended attempt (writes
        off-thread); handed on to the pass and the workload record."""
        return self._history

    @history.setter
    def history(self, value: HistoryRecorder | None) -> None:
        self._history = self.step.history = self._moved.history = value

    @property
    def allow_destructive(self) -> bool:
        """Whether a delete may go out (``plan`` builds a controller that may not)."""
        return self._allow_destructive

    @allow_destructive.setter
    def allow_destructive(self, value: bool) -> None:
        self._allow_destructive = self.actions.allow_destructive = value

    @property
    def in_flight(self) -> dict[str, asyncio.Task[None]]:
        """The actions running now, by key (``Actions.in_flight``)."""
        return self.actions.in_flight

    @in_flight.setter
    def in_flight(self, value: dict[str, asyncio.Task[None]]) -> None:
        self.actions.in_flight = value

    @property
    def wake(self) -> asyncio.Event:
        """Set when the loop should look again (an action ended, the file changed)."""
        return self.actions.wake

    @property
    def backend(self) -> str:
        """The transport of the last cloud used, "rest" or "gcloud" (kept after ``drain``
        closes it)."""
        return self.clouds.backend

    # -- one pass ----------------------------------------------------------------------------
    async def reconcile(self) -> PassResult:
        """One pass of ``run``: look and decide (``runtime.step``, ``RUN``), act, record."""
        effects = RUN if self.allow_destructive else replace_record(RUN, audit=False)
        result = await self.step(effects)
        desired, observation, decided = result.desired, result.observation, result.plan
        if desired is None or observation is None or decided is None:
            # No valid intent yet (nothing may act), or the observation failed (backed off):
            # say why in the snapshot and wait.
            self._write_snapshot(result, result.errors)
            return result
        assert result.views is not None and result.before is not None
        result.dispatched = self.actions.dispatch(
            desired, observation, decided, result.views(self.memory)
        )
        self.actions.send_notices(desired, decided)
        self.latency.start(desired, observation, self.memory.latency, self.clock())
        if self.workloads is not None:  # after dispatch: a stop or relaunch never waits on it
            wd, wo, _ = result.views(self.memory)  # race groups' programs
            self.memory = await tails(self.workloads, wd, wo, result.before, self.memory)
        self._last = result
        self._write_snapshot(result, result.errors, result.windows, result.orphans)
        self.remembered.save()
        return result

    async def observe_and_plan(self) -> PassResult:
        """Look and decide without acting: the same step as ``run``'s pass, without its record
        (``plan``, ``runtime.step.PLAN``; the first half of ``apply`` when this controller may
        act: then the intent is audited and a lab's requests are taken, ``APPLY``). A failed
        observation raises."""
        return await self.step(APPLY if self.allow_destructive else PLAN)

    def _record_latency(self, zone: str, ms: float | None) -> None:
        self.memory = mem.record_latency(self.memory, zone, ms, self.clock())

    # -- snapshot ----------------------------------------------------------------------------
    def _write_snapshot(
        self,
        result: PassResult,
        errors: tuple[str, ...],
        windows: list[str] | None = None,
        orphans: list[str] | None = None,
        *,
        running: bool = True,
    ) -> None:
        last = self._last
        observation = result.observation or (last.observation if last else None)
        decided = result.plan or (last.plan if last else None)
        snapshot = build_status(
            desired=result.desired,
            desired_file=str(self.store.path),
            errors=errors,
            observation=observation,
            observed_at=self.step.observed_at,
            memory=self.memory,
            plan=decided,
            now=self.clock(),
            backend=self.backend,
            tmux_windows=windows or (),
            tmux_orphans=orphans or (),
            observe_error=result.observe_error,
            wait_hints=self.history.hints if self.history else None,
        )
        snapshot = replace_record(
            snapshot,
            controller=ControllerInfo(running=running, pid=os.getpid() if running else None),
            in_flight=tuple(sorted(k for k in self.in_flight if not k.startswith("notify:"))),
            history_error=self.history.last_error if self.history else None,
        )
        if self.metrics is not None:
            self.metrics.snapshot = snapshot  # the gauges are computed from it when scraped
        write_status(self.state.status, snapshot)

    # -- the loop ----------------------------------------------------------------------------
    def next_interval(self, result: PassResult) -> float:
        settings = result.desired.settings if result.desired else Settings()
        moving = bool(
            result.observation
            and result.plan
            and in_motion(result.desired, result.observation, result.plan.races)
        ) or (
            self.workloads is not None
            and watching(
                self.memory,
                {s.name: s.zone for s in result.desired.slots} | across.group_zones(result.desired)
                if result.desired
                else {},
            )
        )
        failing = self.backoff.run(OBSERVE)  # the observation's run of failures, if any
        delay = next_interval(
            slow=settings.poll_interval,
            fast=settings.fast_poll_interval,
            moving=moving,
            in_flight=sum(map(self._hurries, self.in_flight)),
            dispatched=sum(map(self._hurries, (a.key for a in result.dispatched))),
            observe_failures=failing.failures if failing else 0,
            error_delay=failing.delay if failing else 0.0,
            rand=random.random(),
            retry=failing.retry if failing else None,
        )
        # A timer that runs out wakes the loop then, not at the next steady poll: a hold's
        # release, a relaunch's backoff, a flex-start run's end and notice, a before_end.
        if failing is None:
            now = self.clock()
            release = min(result.plan.releases_at.values(), default=None) if result.plan else None
            restart = restart_due(self.memory, now)
            wake = next_wake(result.desired, result.observation, self.memory, now)
            for at, slack, least in ((release, 0.5, 1.0), (restart, 0.2, 0.5), (wake, 0.5, 1.0)):
                if at is not None:
                    delay = min(delay, max(least, at - now + slack))
        return delay

    def _hurries(self, key: str) -> bool:
        """An in-flight or dispatched action that calls for the fast poll (``hurries``)."""
        return hurries(cloud=key.endswith(":cloud"), retrying=self.memory.error(key) is not None)

    async def run(self, stop: asyncio.Event, *, watch: bool = True) -> None:
        from reconciler.runtime.watch import watch_file, watch_tree

        # Load first and hand the watcher that digest: a save between this load and the
        # watch starting then still wakes the loop.
        first = self.store.load()

        async def watcher() -> None:
            async for _ in watch_file(self.store.path, stop=stop, digest=first.digest):
                self.wake.set()

        async def members() -> None:  # a lab's members' files (the loader reads them each pass)
            async for _ in watch_tree(self.store.members, stop=stop):
                self.wake.set()

        watch_task = None
        if watch:
            tasks = [watcher(), *([members()] if self.store.members.is_dir() else [])]
            watch_task = asyncio.ensure_future(asyncio.gather(*tasks))
        if self.history is not None:
            self.history.start()
        self.events.emit("controller.started", pid=os.getpid(), file=str(self.store.path))
        if self.lock is not None:
            report_layout(self.events, self.lock.layout)
        try:
            failures = 0
            while not stop.is_set():
                self.wake.clear()
                started = time.perf_counter()
                try:
                    if self.lock is not None:
                        # A save put a new inode in place: lock it, or stop if another
                        # controller took it first (ControllerAlreadyRunning leaves this loop).
                        self.lock.follow()
                    result = await self.reconcile()
                    self._passed(result, started)
                    delay = self.next_interval(result)
                    failures = 0
                except ControllerAlreadyRunning:
                    raise
                except OSError as e:  # a full or read-only state disk: foreseen, no traceback
                    failures += 1
                    log.error("reconcile pass failed: the state directory: %s", e)
                    with contextlib.suppress(Exception):
                        self.events.emit("controller.error", error=repr(e))
                    delay = min(300.0, 5.0 * 2.0 ** min(failures - 1, 6))
                    self._passed(None, started)
                except Exception as e:  # a bug, not the world: say so, back off, keep running
                    failures += 1
                    log.exception("reconcile pass failed")
                    with contextlib.suppress(Exception):
                        self.events.emit("controller.error", error=repr(e))
                    delay = min(300.0, 5.0 * 2.0 ** min(failures - 1, 6))
                    self._passed(None, started)
                stopper = asyncio.create_task(stop.wait())
                waker = asyncio.create_task(self.wake.wait())
                try:
                    await asyncio.wait(
                        {stopper, waker}, timeout=delay, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    stopper.cancel()
                    waker.cancel()
        finally:
            if watch_task is not None:
                watch_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch_task
            await self.drain()
            if self.history is not None:
                await asyncio.to_thread(self.history.close)
            if self.metrics is not None:
                await asyncio.to_thread(self.metrics.close)
            with contextlib.suppress(OSError):  # a full or read-only state dir: stop anyway
                self.events.emit("controller.stopped", pid=os.getpid())
            try:
                self.remembered.save()
                if self._last is not None:
                    self._write_snapshot(self._last, self.step.last_errors, running=False)
            except OSError as e:  # stopped all the same; the caller says so and exits 78
                self.unsaved = e

    def _passed(self, result: PassResult | None, started: float) -> None:
        """Count a pass (``None``: it raised) and its duration."""
        if self.metrics is None:
            return
        label = (
            "error"
            if result is None
            else pass_result(
                has_intent=result.desired is not None, observe_error=result.observe_error
            )
        )
        self.metrics.passed(label, time.perf_counter() - started)

    async def drain(self, timeout: float = 10.0) -> None:
        """Let in-flight cloud calls and notices finish (they are short); cancel long setup
        steps, and whatever is still running after ``timeout``."""
        for key, task in list(self.in_flight.items()):
            if not (key.endswith(":cloud") or key.startswith("notify:")):
                task.cancel()
        tasks = list(self.in_flight.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5.0)
        self.prober.cancel()
        await self.latency.cancel()
        await self.clouds.aclose()
        if self.setup is not None:
            await self.setup.aclose()

    async def apply(self, result: PassResult) -> list[Action]:
        """Carry out exactly the actions of a plan already shown, and wait for them."""
        if result.desired is None or result.observation is None or result.plan is None:
            return []
        view = result.views(self.memory) if result.views is not None else None
        started = self.actions.dispatch(result.desired, result.observation, result.plan, view)
        while self.in_flight:
            await asyncio.wait(list(self.in_flight.values()))
        self.remembered.save()
        # Look once more so `status` shows the world the apply left, not the one before it.
        try:
            after = await self.observe_and_plan()
        except (TemporaryError, PermanentError):
            after = result
        self.write_snapshot(after)
        return started

    def write_snapshot(self, result: PassResult) -> None:
        """The status snapshot of a one-off pass (``apply``): no controller is running."""
        self._write_snapshot(result, (), result.windows, result.orphans, running=False)
