"""One pass's look and decision: the step ``run``, ``plan`` and ``apply`` share, so that ``plan``
shows exactly what ``run`` would do in the same state.

``Step.__call__(effects)`` goes through these stages, in order:

1. **load** the intent (``runtime.desired_loader``: an invalid file keeps the last valid intent
   in force); with none ever valid, stop here: nothing may act, nothing is observed;
2. **limits**: the Cloud Quotas API's limits joined in (``settings.quota_source: cloud``);
3. **observe** every zone in use, once; a failure is counted by the per-key limiter
   (``runtime.backoff``, key ``observe``) and returned in the result, or raised;
4. **follow**: memory follows the world (``core.memory.observe``) and forgets the operations
   whose outcome the world shows (``core.lro.settle``); what moved is told (``Transitions``);
5. **view**: the race groups' programs as slots (``core.across.view``), computed again only
   when what it reads of memory changed (``Views``: the probes and the fold share one; the
   decision, the dispatch and the tails the next, unless an attempt was just sent);
6. **probe**: the tmux windows that exist and the workload probes, together;
7. **fold** the probes into workload memory (``core.workload.observe``);
8. **intake**: the owner of every slot seen; in a lab, the members' requests; the confirmation
   read and judged against those owners (``adapters.confirm_file``);
9. **decide**: the pure planner (``core.plan``) with all of the above;
10. **spent**: a confirmation whose deletes are done is removed; the decision's suspension and
    delete guard told; the capacity history fed.

The callers differ in side effects only, and each is a field of ``Effects`` (``RUN``,
``APPLY``, ``PLAN``), never a second copy of a stage. Memory changes in this process either
way (``plan`` saves nothing: the controller's ``run`` saves it after acting).

May: read the intent, the cloud, tmux and the workers through the ports it is handed; write
events, the controller's audit and take a lab's requests when ``Effects`` says so. May not:
act (``runtime.actions`` does), save memory or write the status snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reconciler.adapters.cloud import zones_to_observe
from reconciler.adapters.confirm_file import read_confirmation_checked, remove_confirmation
from reconciler.adapters.lab import user_name
from reconciler.adapters.statedir import StateDir
from reconciler.core import across
from reconciler.core import control as control_rules
from reconciler.core import lro as lro_rules
from reconciler.core import memory as mem
from reconciler.core import workload as wl
from reconciler.core.chip_use import summary as chip_summary
from reconciler.core.plan import Action, Plan, plan
from reconciler.errors import PermanentError, TemporaryError
from reconciler.model.capacity import RequestState
from reconciler.model.desired import Desired
from reconciler.model.intent_parts import Part
from reconciler.model.multislice import place_accelerator
from reconciler.model.observed import Observation
from reconciler.model.workload import WorkerProbe
from reconciler.runtime.actions import Moved, SetupRunner, View
from reconciler.runtime.backends import Clouds
from reconciler.runtime.backoff import OBSERVE, Backoff
from reconciler.runtime.desired_loader import DesiredLoader, LoadResult
from reconciler.runtime.ends import read_boot
from reconciler.runtime.events import EventLog
from reconciler.runtime.lab_intake import audit_files, take_confirmations
from reconciler.runtime.memory_file import InForce, Remembered
from reconciler.runtime.quota_limits import CloudQuotaLimits
from reconciler.runtime.transitions import Transitions
from reconciler.runtime.workloads import (
    Prober,
    WorkloadPort,
    ended_attempts,
    transition_events,
)

if TYPE_CHECKING:
    from reconciler.runtime.history import HistoryRecorder
    from reconciler.runtime.metrics import Metrics

log = logging.getLogger("reconciler.runtime.controller")  # one logger for the whole controller


@dataclass(frozen=True, slots=True)
class Effects:
    """What a pass does beyond looking and deciding."""

    #: events of what was seen: desired.*, qr.state, node.health, workload.*, confirm.refused,
    #: controller.suspended / resumed, guard.held (the capacity history and the metrics are
    #: fed whenever the controller was given them: only ``run``'s is)
    record: bool
    audit: bool  # each file of the intent whose text is new, into the controller's audit
    intake: bool  # a lab's members' confirmation requests, taken from the inbox
    clear: bool  # a spent confirmation removed
    #: a failed observation is counted and returned (``observe_error``); else it is raised
    survive: bool


RUN = Effects(record=True, audit=True, intake=True, clear=True, survive=True)
#: ``apply`` acts on the intent (audited) and a lab's requests, but it is not the running
#: controller: no record of what it saw, and the confirmation is the controller's to clear.
APPLY = Effects(record=False, audit=True, intake=True, clear=False, survive=False)
PLAN = Effects(record=False, audit=False, intake=False, clear=False, survive=False)


class Views:
    """``core.across.view`` of one pass's intent and observation, computed again only when
    what it reads of memory changed: the workloads and the slots' setup records (memory is a
    frozen value, and a change leaves the parts it did not touch the same objects)."""

    def __init__(self, desired: Desired, observation: Observation) -> None:
        self.desired, self.observation = desired, observation
        self._read: tuple[object, object] | None = None
        self._view: View | None = None

    def __call__(self, memory: mem.Memory) -> View:
        read = self._read
        if (
            self._view is None
            or read is None
            or not (read[0] is memory.workloads and read[1] is memory.slots)
        ):
            self._view = across.view(self.desired, self.observation, memory)
            self._read = (memory.workloads, memory.slots)
        return self._view


@dataclass
class PassResult:
    """What one pass saw and decided (and, for ``run`` and ``apply``, started)."""

    desired: Desired | None
    observation: Observation | None
    plan: Plan | None
    dispatched: list[Action] = field(default_factory=list)
    observe_error: str | None = None
    errors: tuple[str, ...] = ()  # the desired file's problems now, as text
    windows: list[str] | None = None  # the tmux windows that exist (None: unknown)
    orphans: list[str] = field(default_factory=list)  # windows no slot wants
    views: Views | None = None  # the race groups' view of this pass
    before: mem.Memory | None = None  # memory before this pass's probes were folded in


class WorkloadRecord:
    """A change of workload memory, told: ``workload.*`` events, the metrics' counters, and
    each ended attempt into the capacity history (the pass's fold and the actions alike)."""

    def __init__(
        self,
        events: EventLog,
        clock: Callable[[], float],
        metrics: Metrics | None = None,
        history: HistoryRecorder | None = None,
    ) -> None:
        self.events, self.clock, self.metrics, self.history = events, clock, metrics, history

    def __call__(self, desired: Desired, before: mem.Memory, after: mem.Memory) -> None:
        transition_events(self.events, before, after)
        if self.metrics is not None:
            self.metrics.workloads_moved(before, after)
        if self.history is None:
            return
        for ended in ended_attempts(before, after):
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


class Step:
    """The look and the decision of a pass (one per controller: it remembers what the last
    pass saw, to tell what changed)."""

    def __init__(
        self,
        *,
        store: DesiredLoader,
        state: StateDir,
        events: EventLog,
        memory: Remembered,
        clouds: Clouds,
        quotas: CloudQuotaLimits,
        setup: SetupRunner | None,
        workloads: WorkloadPort | None,
        clock: Callable[[], float],
        backoff: Backoff,
        moved: Moved,
        observing: Callable[[], None],
        prober: Prober,
        history: HistoryRecorder | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.store, self.state, self.events, self.remembered = store, state, events, memory
        self.clouds, self.quotas, self.setup, self.workloads = clouds, quotas, setup, workloads
        self.clock, self.backoff, self.moved, self.observing = clock, backoff, moved, observing
        self.history, self.metrics = history, metrics
        self.prober = prober
        self.transitions = Transitions(events)  # what moved since the last pass, as events
        #: the owner of every slot seen in an intent while this controller ran (a confirmation
        #: of a removed slot's delete is judged by it: ``model/trust.confirm_refusal``)
        self.owners: dict[str, str | None] = {}
        self.last_digest: str | None = None
        self.last_errors: tuple[str, ...] = ()
        self.observed_at: float | None = None
        #: each file's part last written to the audit log (source -> part)
        self._audited: dict[str, Part] = {}

    memory = InForce()  # the memory in force (``remembered.value``)

    async def __call__(self, effects: Effects) -> PassResult:
        loaded = self.store.load()
        desired = loaded.desired
        errors = tuple(str(d) for d in loaded.errors)
        self._intent(loaded, errors, effects)
        if self.metrics is not None and desired is not None:
            self.metrics.intent(desired)
        if desired is None:  # no valid intent was ever loaded: nothing may act
            return PassResult(None, None, None, errors=errors)
        desired = await self.quotas.apply(desired)
        cloud = await self.clouds(desired)
        now = self.clock()
        self.observing()
        try:
            with self.metrics.observing(cloud) if self.metrics else contextlib.nullcontext():
                observation = await cloud.observe(zones_to_observe(cloud, desired.zones))
        except Exception as e:  # the cloud's word, or an adapter bug: either way, back off
            if not effects.survive:
                raise
            return self._observe_failed(desired, errors, e, now)
        self.backoff.succeeded(OBSERVE)
        self.observed_at = now
        if effects.record:
            self.transitions.observed(observation)
        self.memory = mem.observe(self.memory, desired, observation, now)
        self.memory = await read_boot(cloud, desired, observation, self.memory, now)  # at_boot
        self.memory = lro_rules.settle(self.memory, observation)
        views = Views(desired, observation)
        wd, wo, _ = views(self.memory)  # race groups' programs
        (windows, orphans), probes = await asyncio.gather(
            self._tmux_inventory(desired, observation),
            self._probe(wd, wo),
        )
        before, self.memory = self.memory, wl.observe(self.memory, wd, wo, probes, now)
        if effects.record:
            self.moved(wd, before, self.memory)
        confirmation = self._confirmation(desired, effects)
        confirmed = control_rules.confirmed_deletes(confirmation, digest=desired.digest, now=now)
        decided = plan(
            desired,
            observation,
            self.memory,
            now,
            windows,
            confirmed,
            probes=probes,
            view=views(self.memory),
        )
        if effects.clear:
            self._clear_spent(confirmation, desired, observation, now)
        if effects.record:
            self.transitions.decided(decided)
        if self.history is not None:
            self.history.observe(desired, observation, self.memory, now)
        return PassResult(
            desired,
            observation,
            decided,
            errors=errors,
            windows=windows,
            orphans=orphans,
            views=views,
            before=before,
        )

    # -- stages ------------------------------------------------------------------------------
    def _intent(self, loaded: LoadResult, errors: tuple[str, ...], effects: Effects) -> None:
        """Tell a new, invalid or restored intent (``record``), and audit each file of a new
        one whose text is new, with that file's owner at load (``audit``)."""
        desired = loaded.desired
        new = desired is not None and desired.digest != self.last_digest
        if effects.record:
            if errors != self.last_errors and errors:
                self.events.emit("desired.invalid", errors=list(errors), in_force=bool(desired))
            if desired is not None and new:
                owner: dict[str, Any] = (
                    {"file_owner": user_name(loaded.file_uid)}
                    if loaded.file_uid is not None
                    else {}
                )
                if len(loaded.files) > 1:  # a lab's members' files: whose each one is
                    owner["files"] = {
                        f.source: user_name(f.uid) if f.uid is not None else None
                        for f in loaded.files
                    }
                self.events.emit(
                    "desired.loaded", digest=desired.digest, slots=len(desired.slots), **owner
                )
            elif self.last_errors and not errors and desired is not None:  # restored as it was
                self.events.emit("desired.valid", digest=desired.digest, slots=len(desired.slots))
            self.last_errors = errors
        if desired is not None and new:
            self.last_digest = desired.digest
            if effects.audit:
                self._audited = audit_files(
                    self.state, self._audited, self.store.parts, loaded.files, self.clock()
                )

    def _observe_failed(
        self, desired: Desired, errors: tuple[str, ...], e: Exception, now: float
    ) -> PassResult:
        if not isinstance(e, TemporaryError | PermanentError):
            log.exception("observation failed unexpectedly")
        message = e.message if isinstance(e, TemporaryError | PermanentError) else repr(e)
        run = self.backoff.failed(OBSERVE, e, now, random.random())
        self.events.emit(
            "observe.failed",
            error=message,
            retry="transient" if isinstance(e, TemporaryError) else "permanent",
            delay=run.delay,
        )
        return PassResult(desired, None, None, observe_error=message, errors=errors)

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

    async def _probe(
        self, desired: Desired, observation: Observation
    ) -> dict[str, tuple[WorkerProbe, ...]]:
        if self.workloads is None:
            return {}
        return await self.prober.probe_all(self.workloads, desired, observation, self.memory)

    def _confirmation(self, desired: Desired, effects: Effects) -> Any:
        """The confirmation document (None: none), judged against the owner of every slot
        seen; a lab's members' requests are taken first (``intake``)."""
        self.owners.update({s.name: s.owner for s in desired.slots})
        if self.state.lab and effects.intake:  # judged by whose file each is, then removed
            take_confirmations(self.state, self.events, self.owners, self.clock())
        # one read a pass; usually absent. A member's confirmation counts for what they may change
        confirmation, refused = read_confirmation_checked(self.state, owners=self.owners)
        if refused is not None and effects.record:
            self.events.emit("confirm.refused", error=refused)
        return confirmation

    def _clear_spent(
        self, confirmation: Any, desired: Desired, observation: Observation, now: float
    ) -> None:
        """Remove a confirmation that confirms nothing any more or whose deletes are done."""
        spent = confirmation is not None and control_rules.confirmation_spent(
            confirmation,
            digest=desired.digest,
            now=now,
            present=control_rules.present_delete_ids(observation),
        )
        if spent and remove_confirmation(self.state):
            try:
                self.events.emit("confirm.cleared", slot=None)
            except OSError as e:
                log.warning("event confirm.cleared not written: %s", e)
