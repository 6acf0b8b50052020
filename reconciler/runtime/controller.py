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

Running the actions (dispatch, the adapters, settling each outcome) is ``runtime.actions``,
mixed in here; the outcome policy itself is the pure ``core.outcome``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from dataclasses import replace as replace_record
from typing import TYPE_CHECKING, Any

from reconciler.adapters.cloud import Cloud, zones_to_observe
from reconciler.adapters.confirm_file import (
    read_confirmation_checked,
    read_confirmed,
    remove_confirmation,
)
from reconciler.adapters.files import write_json
from reconciler.adapters.lab import user_name
from reconciler.adapters.statedir import StateDir
from reconciler.adapters.status_file import write_status
from reconciler.core import across, retry
from reconciler.core import control as control_rules
from reconciler.core import lro as lro_rules
from reconciler.core import memory as mem
from reconciler.core import workload as wl
from reconciler.core.before_end import next_wake
from reconciler.core.chip_use import summary as chip_summary
from reconciler.core.metrics import pass_result
from reconciler.core.outcome import rule_delay
from reconciler.core.plan import (
    Action,
    Plan,
    in_motion,
    plan,
)
from reconciler.core.schedule import hurries, next_interval, watching
from reconciler.core.status import build_status
from reconciler.core.workload_backoff import restart_due
from reconciler.errors import ControllerAlreadyRunning, PermanentError, TemporaryError
from reconciler.model.capacity import RequestState
from reconciler.model.desired import Desired, Settings
from reconciler.model.intent_parts import Part
from reconciler.model.multislice import place_accelerator
from reconciler.model.observed import Observation
from reconciler.model.status import ControllerInfo
from reconciler.model.workload import WorkerProbe
from reconciler.runtime.actions import ActionTasks, SetupRunner
from reconciler.runtime.backends import cloud_key
from reconciler.runtime.desired_loader import DesiredLoader, LoadResult
from reconciler.runtime.ends import read_boot
from reconciler.runtime.events import EventLog
from reconciler.runtime.lab_intake import audit_files, report_layout, take_confirmations
from reconciler.runtime.latency import LatencyProbes
from reconciler.runtime.memory_file import load_memory
from reconciler.runtime.quota_limits import CloudQuotaLimits
from reconciler.runtime.transitions import Transitions
from reconciler.runtime.workloads import (
    Prober,
    WorkloadPort,
    ended_attempts,
    tails,
    transition_events,
)

if TYPE_CHECKING:
    from reconciler.runtime.history import HistoryRecorder
    from reconciler.runtime.lock import ControllerLock
    from reconciler.runtime.metrics import Metrics

log = logging.getLogger(__name__)

CloudFactory = Callable[[Desired], Cloud]


@dataclass
class PassResult:
    desired: Desired | None
    observation: Observation | None
    plan: Plan | None
    dispatched: list[Action] = field(default_factory=list)
    observe_error: str | None = None


class Controller(ActionTasks):
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
        self.history = history  # capacity history: fed one look per pass, writes off-thread
        self.lock = lock  # held by the caller; followed to each new inode of the desired file
        self.metrics = metrics  # Prometheus counters; serves /metrics while settings.metrics
        #: why memory or the last snapshot could not be saved when ``run`` stopped, if so
        self.unsaved: OSError | None = None
        # The setup runner doubles as the workload port when it has the methods (LiveSetup).
        self.workloads = workloads or (setup if isinstance(setup, WorkloadPort) else None)
        self.prober = Prober()
        self.latency = LatencyProbes(self._record_latency)  # round trips, beside the pass
        self._cloud_factory = cloud_factory
        self._cloud: Cloud | None = None
        self._cloud_key: tuple[object, ...] | None = None
        self.clock = clock
        self.allow_destructive = allow_destructive
        self.memory = load_memory(self.state, self.events)
        self._memory_saved = mem.to_dict(self.memory)
        self.in_flight: dict[str, asyncio.Task[None]] = {}
        # Expectations: an action that finished after an observation began may not show in
        # it yet, so that observation must not decide the same action again.
        self._completions = 0
        self._completed_at: dict[str, int] = {}
        self._observed_from = 0
        self.wake = asyncio.Event()
        self._observe_failures = 0
        self._observe_delay = 0.0
        self._observe_retry: float | None = None
        self._observe_failing_since = 0.0
        self._failing_since: dict[str, float] = {}  # action key -> first failure in a row
        self.transitions = Transitions(events)  # what moved since the last pass, as events
        self._last_digest: str | None = None
        #: each file's part last written to the audit log (source -> part)
        self._audited: dict[str, Part] = {}
        self._last_errors: tuple[str, ...] = ()
        self._last: PassResult | None = None
        self._observed_at: float | None = None
        self._backend = "?"  # the transport of the last cloud used, as users read it
        self.cloud_quotas = CloudQuotaLimits(clock, self._note)  # settings.quota_source: cloud
        #: the owner of every slot seen in an intent while this controller ran (a confirmation
        #: of a removed slot's delete is judged by it: ``model/trust.confirm_refusal``)
        self._owners: dict[str, str | None] = {}

    # -- memory ------------------------------------------------------------------------------
    def _save_memory(self) -> None:
        doc = mem.to_dict(self.memory)
        if doc != self._memory_saved:
            write_json(self.state.memory, doc)
            self._memory_saved = doc

    # -- cloud -------------------------------------------------------------------------------
    @property
    def backend(self) -> str:
        """The transport of the last cloud used, "rest" or "gcloud" (kept after ``drain``
        closes it)."""
        return self._backend

    async def _cloud_for(self, desired: Desired) -> Cloud:
        key = cloud_key(desired)
        if self._cloud is None or key != self._cloud_key:
            if self._cloud is not None:
                await self._cloud.aclose()
            self._cloud = self._cloud_factory(desired)
            self._cloud_key = key
            self._backend = self._cloud.capability.transport
        return self._cloud

    def _audit_load(self, loaded: LoadResult) -> None:
        """Each file of the intent in force whose text is new, in the audit log with that
        file's owner at load (``runtime/lab_intake.audit_files``), by a controller that acts on
        it (``plan``'s does not)."""
        if loaded.desired is None or not self.allow_destructive:
            return
        self._audited = audit_files(
            self.state, self._audited, self.store.parts, loaded.files, self.clock()
        )

    # -- one pass ----------------------------------------------------------------------------
    async def reconcile(self) -> PassResult:
        loaded = self.store.load()
        desired = loaded.desired
        errors = tuple(str(d) for d in loaded.errors)
        if errors != self._last_errors and errors:
            self.events.emit("desired.invalid", errors=list(errors), in_force=bool(desired))
        if desired is not None and desired.digest != self._last_digest:
            owner: dict[str, Any] = (
                {"file_owner": user_name(loaded.file_uid)} if loaded.file_uid is not None else {}
            )
            if len(loaded.files) > 1:  # a lab's members' files: whose each one is
                owner["files"] = {
                    f.source: user_name(f.uid) if f.uid is not None else None for f in loaded.files
                }
            self.events.emit(
                "desired.loaded", digest=desired.digest, slots=len(desired.slots), **owner
            )
            self._last_digest = desired.digest
            self._audit_load(loaded)
        elif self._last_errors and not errors and desired is not None:  # restored as it was
            self.events.emit("desired.valid", digest=desired.digest, slots=len(desired.slots))
        self._last_errors = errors
        if self.metrics is not None and desired is not None:
            self.metrics.intent(desired)
        if desired is None:
            # No valid intent has ever been loaded: nothing may act, and without a project
            # there is nothing to observe either. Say why in the snapshot and wait.
            result = PassResult(None, None, None)
            self._write_snapshot(result, errors)
            return result

        desired = await self.cloud_quotas.apply(desired)
        cloud = await self._cloud_for(desired)
        zones = zones_to_observe(cloud, desired.zones)
        now = self.clock()
        self._observed_from = self._completions
        try:
            with self.metrics.observing(cloud) if self.metrics else contextlib.nullcontext():
                observation = await cloud.observe(zones)
        except Exception as e:  # the cloud's word, or an adapter bug: either way, back off
            if not isinstance(e, TemporaryError | PermanentError):
                log.exception("observation failed unexpectedly")
            message = e.message if isinstance(e, TemporaryError | PermanentError) else repr(e)
            self._observe_failures += 1
            self._observe_delay = e.delay if isinstance(e, TemporaryError) else 60.0
            if self._observe_failures == 1:
                self._observe_failing_since = now
            elapsed = now - self._observe_failing_since
            self._observe_retry = rule_delay(e, self._observe_failures, elapsed, random.random())
            if self._observe_retry is not None:
                self._observe_retry = max(retry.OBSERVE_FLOOR, self._observe_retry)
            if self._observe_retry is not None:
                self._observe_delay = self._observe_retry
            self.events.emit(
                "observe.failed",
                error=message,
                retry="transient" if isinstance(e, TemporaryError) else "permanent",
                delay=self._observe_delay,
            )
            result = PassResult(desired, None, None, observe_error=message)
            self._write_snapshot(result, errors)
            return result
        self._observe_failures = 0
        self._observed_at = now
        self.transitions.observed(observation)
        (windows, orphans), probes = await asyncio.gather(
            self._tmux_inventory(desired, observation), self._probe(desired, observation)
        )
        self.memory = mem.observe(self.memory, desired, observation, now)
        self.memory = await read_boot(cloud, desired, observation, self.memory, now)  # at_boot
        self.memory = lro_rules.settle(self.memory, observation)
        wd, wo, _ = across.view(desired, observation, self.memory)  # race groups' programs
        before, self.memory = self.memory, wl.observe(self.memory, wd, wo, probes, now)
        self._workloads_moved(wd, before)
        self._owners.update({s.name: s.owner for s in desired.slots})
        if self.state.lab:  # members' requests: judged by whose file each is, then removed
            self._take_requests()
        # one read a pass; usually absent. A member's confirmation counts for what they may change
        confirmation, refused = read_confirmation_checked(self.state, owners=self._owners)
        if refused is not None:
            self.events.emit("confirm.refused", error=refused)
        confirmed = control_rules.confirmed_deletes(confirmation, digest=desired.digest, now=now)
        decided = plan(desired, observation, self.memory, now, windows, confirmed, probes=probes)
        spent = confirmation is not None and control_rules.confirmation_spent(
            confirmation,
            digest=desired.digest,
            now=now,
            present=control_rules.present_delete_ids(observation),
        )
        if spent and remove_confirmation(self.state):
            self._note("confirm.cleared", slot=None)
        self.transitions.decided(decided)
        if self.history is not None:
            self.history.observe(desired, observation, self.memory, now)
        result = PassResult(desired, observation, decided)
        result.dispatched = self._dispatch(desired, observation, decided)
        self._send_notices(desired, decided)
        self.latency.start(desired, observation, self.memory.latency, now)
        if self.workloads is not None:  # after dispatch: a stop or relaunch never waits on it
            wd, wo, _ = across.view(desired, observation, self.memory)  # race groups' programs
            self.memory = await tails(self.workloads, wd, wo, before, self.memory)
        self._last = result
        self._write_snapshot(result, errors, list(windows or ()), orphans)
        self._save_memory()
        return result

    def _take_requests(self) -> None:
        """The lab members' confirmation requests (``runtime/lab_intake``)."""
        take_confirmations(self.state, self.events, self._owners, self.clock())

    def _record_latency(self, zone: str, ms: float | None) -> None:
        self.memory = mem.record_latency(self.memory, zone, ms, self.clock())

    def _workloads_moved(self, desired: Desired, before: mem.Memory) -> None:
        """Events for workload transitions; each ended attempt into the capacity history."""
        transition_events(self.events, before, self.memory)
        if self.metrics is not None:
            self.metrics.workloads_moved(before, self.memory)
        if self.history is None:
            return
        for ended in ended_attempts(before, self.memory):
            spec = desired.slot(ended.slot)
            ended_at = self.clock()
            self.history.record_workload_attempt(
                slot=ended.slot,
                zone=spec.zone if spec else "",
                accelerator=place_accelerator(spec.accelerator, spec.slices) if spec else "",
                run_id=ended.run_id,
                attempt=ended.attempt,
                started_at=ended.started_at,
                ended_at=ended_at,
                exit_code=ended.exit_code,
                cause=ended.cause,
                chips=chip_summary(ended.chip_use, ended_at),
            )

    async def _probe(
        self, desired: Desired, observation: Observation
    ) -> dict[str, tuple[WorkerProbe, ...]]:
        if self.workloads is None:
            return {}
        wd, wo, _ = across.view(desired, observation, self.memory)  # race groups' programs
        return await self.prober.probe_all(self.workloads, wd, wo, self.memory)

    # -- snapshot ----------------------------------------------------------------------------
    async def _tmux_inventory(
        self, desired: Desired, observation: Observation
    ) -> tuple[list[str] | None, list[str]]:
        """Windows that exist (None when unknown) and orphans, read before planning."""
        ever_opened = any("tmux" in m.setup for m in self.memory.slots.values())
        wanted = any(s.setup.tmux for s in desired.slots)
        if self.setup is None or not (wanted or ever_opened or desired.settings.tmux_socket):
            return None, []
        active = {r.name for r in observation.requests if r.state == RequestState.ACTIVE}
        try:
            windows, orphans = await self.setup.tmux_inventory(desired.settings, active)
        except Exception as e:  # tmux missing or dead: plan from memory, status says so
            log.debug("tmux inventory failed: %s", e)
            return None, []
        return windows, orphans

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
            observed_at=self._observed_at,
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
        delay = next_interval(
            slow=settings.poll_interval,
            fast=settings.fast_poll_interval,
            moving=moving,
            in_flight=sum(map(self._hurries, self.in_flight)),
            dispatched=sum(map(self._hurries, (a.key for a in result.dispatched))),
            observe_failures=self._observe_failures,
            error_delay=self._observe_delay,
            rand=random.random(),
            retry=self._observe_retry if self._observe_failures else None,
        )
        # A timer that runs out wakes the loop then, not at the next steady poll: a hold's
        # release, a relaunch's backoff, a flex-start run's end and notice, a before_end.
        if not self._observe_failures:
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
                self._save_memory()
                if self._last is not None:
                    self._write_snapshot(self._last, self._last_errors, running=False)
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
        if self._cloud is not None:
            await self._cloud.aclose()
            self._cloud = None
        if self.setup is not None:
            await self.setup.aclose()

    async def observe_and_plan(self) -> PassResult:
        """Look and decide without acting (``plan`` and the first half of ``apply``)."""
        loaded = self.store.load()
        desired = loaded.desired
        if desired is None:
            return PassResult(None, None, None)
        if desired.digest != self._last_digest:  # `apply` audits the files it acts on
            self._last_digest = desired.digest
            self._audit_load(loaded)
        desired = await self.cloud_quotas.apply(desired)
        cloud = await self._cloud_for(desired)
        observation = await cloud.observe(zones_to_observe(cloud, desired.zones))
        now = self.clock()
        self._observed_at = now
        self.memory = mem.observe(self.memory, desired, observation, now)
        probes = await self._probe(desired, observation)
        wd, wo, _ = across.view(desired, observation, self.memory)
        self.memory = wl.observe(self.memory, wd, wo, probes, now)
        owners = {s.name: s.owner for s in desired.slots}
        if self.state.lab and self.allow_destructive:  # `apply` takes members' requests too
            self._owners.update(owners)
            self._take_requests()
        confirmed = read_confirmed(self.state, digest=desired.digest, now=now, owners=owners)
        decided = plan(desired, observation, self.memory, now, confirmed=confirmed, probes=probes)
        return PassResult(desired, observation, decided)

    async def apply(self, result: PassResult) -> list[Action]:
        """Carry out exactly the actions of a plan already shown, and wait for them."""
        if result.desired is None or result.observation is None or result.plan is None:
            return []
        started = self._dispatch(result.desired, result.observation, result.plan)
        while self.in_flight:
            await asyncio.wait(list(self.in_flight.values()))
        self._save_memory()
        # Look once more so `status` shows the world the apply left, not the one before it.
        try:
            after = await self.observe_and_plan()
        except (TemporaryError, PermanentError):
            after = result
        self.write_snapshot(after)
        return started

    def write_snapshot(self, result: PassResult) -> None:
        """The status snapshot of a one-off pass (``apply``): no controller is running."""
        self._write_snapshot(result, (), running=False)
