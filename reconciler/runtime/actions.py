"""The controller's actions: each one dispatched as its own task, run through an adapter, and
its outcome settled into memory and the event log.

``Actions`` is the controller's collaborator that acts, handed what it needs (the memory in
force, the clouds, the setup and workload ports, the event log, the per-key back-off, how a
change of workload memory is told); the pass decides (``runtime.step``, ``core.plan``) and the
controller hands the plan to ``dispatch``. Guarantees kept here:

- never two actions for one slot's cloud key at once (``in_flight``), and an action that
  finished during the observation a plan was made from is not sent again by that plan;
- a cloud delete or replace cancels the slot's setup steps still running;
- what the plan decided for each slot's workload (a released slot's attempt ends as
  *released*, a run it never started reads *not-started*) is recorded before anything goes
  out (``core.workload.record_decisions``);
- a create or delete whose operation has not shown its outcome reads that operation back
  before anything is resent (``runtime.lro``);
- what an outcome does to memory, and which event says so, is the pure ``core.outcome``; an
  event that cannot be written is logged, never raised (``note``), so ``in_flight`` is
  always cleared and the outcome always reaches memory;
- a notice is sent at least once: one cancelled before it went out is forgotten, so the next
  controller sends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Protocol

from reconciler.adapters.cloud import Cloud
from reconciler.core import across
from reconciler.core import memory as mem
from reconciler.core import workload as wl
from reconciler.core.across import GroupView
from reconciler.core.outcome import outcome
from reconciler.core.plan import (
    CLOUD_KINDS,
    SETUP_KINDS,
    WORKLOAD_KINDS,
    Action,
    Kind,
    Notice,
    Plan,
)
from reconciler.errors import PermanentError, TemporaryError
from reconciler.model.desired import Desired, Settings
from reconciler.model.observed import Node, Observation
from reconciler.runtime import ends, lro
from reconciler.runtime.backoff import Backoff
from reconciler.runtime.desired_loader import DesiredLoader
from reconciler.runtime.events import EventLog
from reconciler.runtime.memory_file import InForce, Remembered
from reconciler.runtime.workloads import WorkloadPort

log = logging.getLogger("reconciler.runtime.controller")  # one logger for the whole controller

#: a race group's one program seen as a slot: ``core.across.view``'s answer
View = tuple[Desired, Observation, tuple[GroupView, ...]]
#: how a change of workload memory is told (``runtime.step.WorkloadRecord``)
Moved = Callable[[Desired, mem.Memory, mem.Memory], None]


class SetupRunner(Protocol):
    """Setup steps on an ACTIVE node; implemented in ``runtime.setup``."""

    async def bootstrap(self, desired: Desired, action: Action, node: Node) -> None: ...
    async def tailscale(self, desired: Desired, action: Action, node: Node) -> None: ...
    async def tmux(self, desired: Desired, action: Action, node: Node) -> None: ...
    async def tmux_inventory(
        self, settings: Settings, active: set[str]
    ) -> tuple[list[str], list[str]]: ...
    async def notify(self, settings: Settings, notice: Notice) -> None: ...
    async def aclose(self) -> None: ...


class Actions:
    """Dispatch, run and settle actions (one per controller)."""

    def __init__(
        self,
        *,
        memory: Remembered,
        events: EventLog,
        clouds: Callable[[Desired], Awaitable[Cloud]],
        setup: SetupRunner | None,
        workloads: WorkloadPort | None,
        clock: Callable[[], float],
        allow_destructive: bool,
        backoff: Backoff,
        moved: Moved,
        store: DesiredLoader,
    ) -> None:
        self.remembered, self.events, self.clouds = memory, events, clouds
        self.setup, self.workloads, self.clock = setup, workloads, clock
        self.allow_destructive, self.backoff, self.moved = allow_destructive, backoff, moved
        self.store = store  # where a create's setup.at_boot scripts are read from
        self.in_flight: dict[str, asyncio.Task[None]] = {}
        self.wake = asyncio.Event()  # set when an action ends: the loop looks again
        # Expectations: an action that finished after an observation began may not show in
        # it yet, so that observation must not decide the same action again.
        self._completions = 0
        self._completed_at: dict[str, int] = {}
        self._observed_from = 0

    memory = InForce()  # the memory in force (``remembered.value``)

    def observing(self) -> None:
        """An observation begins: what finishes from now on may not show in it."""
        self._observed_from = self._completions

    def dispatch(
        self, desired: Desired, observation: Observation, decided: Plan, view: View | None = None
    ) -> list[Action]:
        """Start the plan's actions not already running; ``view`` is the pass's race-group
        view of ``desired`` and ``observation`` (computed here when not given)."""
        started = []
        # a race group's one program runs on its virtual slot and node (``core/across``)
        desired, observation, _ = view or across.view(desired, observation, self.memory)
        before, self.memory = (  # released slots: their attempts end as released, not lost
            self.memory,
            wl.record_decisions(
                self.memory,
                desired,
                decided.decided_want,
                {slot: rel.reason for slot, rel in decided.releases.items()},
            ),
        )
        if self.memory is not before:
            self.moved(desired, before, self.memory)
        for action in decided.actions:
            if action.key in self.in_flight:
                continue
            if self._completed_at.get(action.key, -1) > self._observed_from:
                continue  # finished during this observation; the next pass sees its effect
            if action.destructive and not self.allow_destructive:
                continue
            if action.kind in CLOUD_KINDS and action.kind != Kind.CREATE:
                self._cancel_setup(action)
            elif (action.kind in SETUP_KINDS and self.setup is None) or (
                action.kind == Kind.BEFORE_END and self.workloads is None
            ):
                continue
            elif action.kind in WORKLOAD_KINDS:
                if self.workloads is None or action.workload is None or action.instance is None:
                    continue
                if f"{action.zone}/{action.slot}:stop" in self.in_flight:
                    continue  # the next attempt starts once the last one is stopped everywhere
                before, self.memory = (
                    self.memory,
                    wl.record_sent(
                        self.memory, action.slot, action.workload, action.instance, self.clock()
                    ),
                )
                self.moved(desired, before, self.memory)
            node = observation.node(action.zone, action.slot)
            task = asyncio.create_task(self._run(desired, action, node), name=action.key)
            self.in_flight[action.key] = task
            started.append(action)
            if action.kind == Kind.DELETE and (rel := decided.releases.get(action.slot)):
                self.events.emit(
                    "slot.released", slot=action.slot, rule=rel.rule, reason=rel.reason
                )
        return started

    def _cancel_setup(self, action: Action) -> None:
        prefix = f"{action.zone}/{action.slot}:"
        for key, task in list(self.in_flight.items()):
            if key.startswith(prefix) and not key.endswith(":cloud"):
                task.cancel()

    def note(self, kind: str, *, slot: str | None, **fields: Any) -> None:
        """An event from an action's task. A write that fails (a full or read-only state disk)
        is logged, never raised: the event log records what was done, and a record that cannot
        be written must not leave the action in ``in_flight`` or its outcome out of memory."""
        try:
            self.events.emit(kind, slot=slot, **fields)
        except OSError as e:
            log.warning("event %s for %s not written: %s", kind, slot, e)

    async def _run(self, desired: Desired, action: Action, node: Node | None) -> None:
        # Everything from the first event to the last is inside one try: its finally always
        # clears in_flight, whatever fails on the way.
        try:
            self.note(
                "action.started",
                slot=action.slot,
                action=action.kind.value,
                zone=action.zone,
                reason=action.reason,
                destructive=action.destructive,
            )
            detail = await self._execute(desired, action, node)
        except asyncio.CancelledError:
            self.note("action.cancelled", slot=action.slot, action=action.kind.value)
            raise
        except Exception as e:
            if not isinstance(e, TemporaryError | PermanentError):  # a bug, not the world
                log.exception("action %s failed unexpectedly", action.key)
            self._settle(action, e)
        else:
            self._settle(action, detail)
        finally:
            self.in_flight.pop(action.key, None)
            self._completions += 1
            self._completed_at[action.key] = self._completions
            with contextlib.suppress(OSError):
                self.remembered.save()
            self.wake.set()

    def _settle(self, action: Action, result: str | Exception) -> None:
        """Memory and the event after an action ended, by the pure ``core.outcome`` policy."""
        done = outcome(
            action,
            result,
            self.memory,
            self.clock(),
            self.backoff.since(action.key),
            random.random(),
        )
        self.memory = done.memory
        self.backoff.keep(action.key, done.failing_since)
        fields = dict(done.event.fields)
        slot = fields.pop("slot")
        self.note(done.event.kind, slot=slot if isinstance(slot, str) else None, **fields)

    async def _execute(self, desired: Desired, action: Action, node: Node | None) -> str:
        if action.kind in CLOUD_KINDS:
            cloud = await self.clouds(desired)
            if action.create is not None:  # setup.at_boot: its scripts are read now
                base = self.store.path.expanduser().resolve().parent
                create = ends.with_boot_script(desired, base, action.create)
                action = replace(action, create=create)
            return await self._submit(cloud, action, desired.settings.fast_poll_interval)
        if node is None:
            raise TemporaryError(f"{action.slot}: node not observed yet", delay=5.0)
        if action.kind == Kind.BEFORE_END:
            return await ends.run_before_end(self.workloads, desired, action, node)
        if action.kind in WORKLOAD_KINDS:
            assert self.workloads is not None
            if action.kind == Kind.LAUNCH:
                said = await self.workloads.workload_launch(desired, action, node)
                return f"sent; {said}" if said else "sent"
            left = await self.workloads.workload_stop(desired, action, node)
            return f"stopped; {left}" if left else "stopped"
        assert self.setup is not None
        step: Callable[[Desired, Action, Node], Awaitable[None]] = {
            Kind.BOOTSTRAP: self.setup.bootstrap,
            Kind.TAILSCALE: self.setup.tailscale,
            Kind.TMUX: self.setup.tmux,
        }[action.kind]
        await step(desired, action, node)
        return "done"

    async def _submit(self, cloud: Cloud, action: Action, recheck: float) -> str:
        """A create or delete, unless the operation of the last one says not to resend (one
        still running is looked at again after ``recheck`` s: the fast poll, at most 5 s)."""
        kind = lro.KINDS[action.kind.value]
        pending = self.memory.operation(action.key)
        if pending is not None and pending.kind == kind:
            try:
                failure = await lro.previous_outcome(cloud, pending, recheck)  # raises: running
            except PermanentError:  # the operation cannot be read (403, gone, garbage): it
                failure = None  # says nothing, so it must not block the action; resend
            self.memory = mem.forget_operation(self.memory, action.key)
            if failure is not None:
                self.events.emit(
                    "operation.failed",
                    slot=action.slot,
                    operation=pending.name,
                    error=failure.message,
                )
                raise failure
        if action.kind == Kind.CREATE:
            assert action.create is not None
            submitted = await cloud.create_request(action.create)
        else:
            submitted = await cloud.delete_request(
                action.api, action.zone, action.slot, force=action.force
            )
        if submitted.operation:
            self.memory = mem.record_operation(
                self.memory,
                action.key,
                mem.PendingOperation(
                    submitted.operation, kind, action.zone, action.slot, self.clock()
                ),
            )
        return submitted.outcome.value

    def send_notices(self, desired: Desired, decided: Plan) -> None:
        if not desired.settings.ntfy_topic or self.setup is None or decided.suspended:
            return  # suspended: the notices wait (they announce what is being done)
        for notice in decided.notices:
            self.memory = mem.record_notice(self.memory, notice.key)
            task = asyncio.create_task(self._notify(desired.settings, notice))
            self.in_flight[f"notify:{notice.key}"] = task

    async def _notify(self, settings: Settings, notice: Notice) -> None:
        assert self.setup is not None
        try:
            await self.setup.notify(settings, notice)
            self.note("notify.sent", slot=notice.slot, event=notice.event)
        except asyncio.CancelledError:
            # Stopped before it went out: the next controller sends it (at least once).
            self.memory = mem.forget_notice(self.memory, notice.key)
            raise
        except Exception as e:  # notices never stop the loop
            self.note("notify.failed", slot=notice.slot, event=notice.event, error=str(e))
        finally:
            self.in_flight.pop(f"notify:{notice.key}", None)
