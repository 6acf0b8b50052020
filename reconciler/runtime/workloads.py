"""The controller's side of workloads: probe every pass (bounded, in parallel), say what changed.

``WorkloadPort`` is what the controller needs from the worker adapter (``runtime.setup``'s
``LiveSetup`` implements it over ``adapters.workload.WorkloadRunner``). ``Prober`` asks
every slot whose attempt may be running on a READY node at once and never waits longer than
one probe's timeout: a probe that fails or is not back in time is *unknown* on every worker of
that slot, which the planner never treats as a failure. ``transition_events`` writes one
``workload.state`` event per slot whose user-visible state or attempt changed, and
``ended_attempts`` says which attempts ended between two memories (for the capacity history).

May: await the port, emit events. May not: decide (core.workload does) or touch memory files.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from reconciler.core import workload as wl
from reconciler.core.chip_use import ChipUse
from reconciler.core.memory import Memory
from reconciler.core.plan import Action
from reconciler.model.desired import Desired
from reconciler.model.observed import Node, Observation
from reconciler.model.workload import NOT_STARTED, WorkerProbe
from reconciler.runtime.events import EventLog

#: Longest a pass waits for the probes of all slots together (they run in parallel).
PROBE_TIMEOUT: Final = 5.0


@runtime_checkable
class WorkloadPort(Protocol):
    async def workload_launch(self, desired: Desired, action: Action, node: Node) -> str | None: ...
    async def workload_stop(
        self, desired: Desired, action: Action, node: Node
    ) -> str | None: ...  # what survived the kill deadline, if anything
    async def workload_probe(
        self,
        desired: Desired,
        node: Node,
        slot: str,
        run_id: str,
        attempt: int,
        *,
        telemetry: bool = False,
    ) -> tuple[WorkerProbe, ...]: ...
    async def workload_tail(
        self, desired: Desired, node: Node, slot: str, run_id: str, attempt: int, worker: int
    ) -> tuple[str, ...]: ...


def _unknown(node: Node, why: str) -> tuple[WorkerProbe, ...]:
    return tuple(WorkerProbe(i, "unknown", error=why) for i in range(max(1, len(node.endpoints))))


class Prober:
    """This pass's probes, slot -> one per worker, never waiting longer than ``timeout``.

    A probe still running at the deadline (a worker slow to connect) is "unknown" for this
    pass but keeps going: the next pass takes its answer instead of starting over, so a worker
    that needs longer than one pass to connect is still seen. A probe no longer wanted (the
    attempt moved on, the node is gone) is cancelled."""

    def __init__(self, timeout: float = PROBE_TIMEOUT) -> None:
        self.timeout = timeout
        self._tasks: dict[tuple[str, str, int, str], asyncio.Task[tuple[WorkerProbe, ...]]] = {}

    async def probe_all(
        self, port: WorkloadPort, desired: Desired, observation: Observation, memory: Memory
    ) -> dict[str, tuple[WorkerProbe, ...]]:
        wanted: dict[tuple[str, str, int, str], Node] = {}
        chips: set[str] = set()
        for spec, wm in wl.probe_targets(desired, observation, memory):
            request = observation.request(spec.zone, spec.name)
            node = observation.node(
                spec.zone, (request.node_name if request else None) or spec.name
            )
            if node is not None:
                wanted[(spec.name, wm.run_id, wm.attempt, node.instance)] = node
                if spec.setup.telemetry:
                    chips.add(spec.name)
        for key in [k for k in self._tasks if k not in wanted]:
            self._tasks.pop(key).cancel()
        for key, node in wanted.items():
            if key not in self._tasks:
                slot, run_id, attempt, _ = key
                probe = (
                    port.workload_probe(desired, node, slot, run_id, attempt, telemetry=True)
                    if slot in chips
                    else port.workload_probe(desired, node, slot, run_id, attempt)
                )
                self._tasks[key] = asyncio.create_task(probe)
        if not wanted:
            return {}
        await asyncio.wait([self._tasks[k] for k in wanted], timeout=self.timeout)
        out: dict[str, tuple[WorkerProbe, ...]] = {}
        for key, node in wanted.items():
            task = self._tasks[key]
            if not task.done():
                out[key[0]] = _unknown(node, f"probe took longer than {self.timeout:g}s")
                continue
            del self._tasks[key]
            try:
                out[key[0]] = task.result()
            except Exception as e:  # the adapter promises not to raise; a bug is still unknown
                out[key[0]] = _unknown(node, f"probe failed: {e!r}")
        return out

    def cancel(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        self._tasks.clear()


async def tails(
    port: WorkloadPort,
    desired: Desired,
    observation: Observation,
    before: Memory,
    memory: Memory,
    timeout: float = PROBE_TIMEOUT,
) -> Memory:
    """``memory`` with the last output lines of every attempt that just ended, read in
    parallel within ``timeout`` (what cannot be read in time is left out: it is only shown)."""
    wanted = wl.tails_wanted(before, memory)
    if not wanted:
        return memory

    async def one(t: wl.TailWanted) -> tuple[str, ...]:
        spec = desired.slot(t.slot)
        request = observation.request(spec.zone, t.slot) if spec else None
        node = (
            observation.node(spec.zone, (request.node_name if request else None) or t.slot)
            if spec
            else None
        )
        if node is None or node.instance != t.instance:
            return ()
        try:
            return await asyncio.wait_for(
                port.workload_tail(desired, node, t.slot, t.run_id, t.attempt, t.worker),
                timeout,
            )
        except Exception:  # only for show: an unreadable log shows nothing
            return ()

    results = await asyncio.gather(*(one(t) for t in wanted))
    for t, lines in zip(wanted, results, strict=True):
        memory = wl.record_tail(memory, t.slot, t.run_id, t.attempt, lines)
    return memory


def transition_events(events: EventLog, before: Memory, after: Memory) -> None:
    for slot in sorted(set(before.workloads) | set(after.workloads)):
        old, new = before.workload(slot), after.workload(slot)
        left_before, left_now = (old.left if old else ""), (new.left if new else "")
        if left_now != left_before:  # processes that outlived a stop: seen, changed, or gone
            whose = new if left_now else old  # the attempt they belong (belonged) to
            events.emit(
                "workload.left",
                slot=slot,
                run_id=whose.run_id if whose else None,
                attempt=whose.attempt if whose else None,
                detail=left_now or "gone: no process of the attempt is left",
            )
        was = (wl.state_of(old), old.run_id, old.attempt) if old else None
        now = (wl.state_of(new), new.run_id, new.attempt) if new else None
        if was == now:
            continue
        events.emit(
            "workload.state",
            slot=slot,
            before=was[0] if was else None,
            after=now[0] if now else None,
            run_id=new.run_id if new else old.run_id if old else None,
            attempt=new.attempt if new else None,
            failures=new.failures if new else None,
            detail=new.detail if new else "forgotten: workload removed",
        )


#: Phases in which an attempt is still under way; leaving them (or a new attempt or run taking
#: its place, or the workload being forgotten) ends it.
_UNDER_WAY: Final = frozenset({"starting", "running"})


@dataclass(frozen=True, slots=True)
class EndedAttempt:
    slot: str
    run_id: str
    attempt: int
    started_at: float
    exit_code: int | None  # the first non-zero exit of a worker; 0 when all exited 0; None unknown
    cause: str  # the phase it ended in (succeeded, failed, interrupted, gave-up, stopping,
    #             released, forgotten) and the detail, e.g. "failed: exit 1 on worker 2";
    #             "not started: <why>" for one no worker was ever seen to run
    chip_use: ChipUse | None = None  # its chips' duty cycle and idle time (setup.telemetry)


def ended_attempts(before: Memory, after: Memory) -> Iterator[EndedAttempt]:
    """Attempts under way in ``before`` that are not any more in ``after``."""
    for slot in sorted(before.workloads):
        old = before.workload(slot)
        if old is None or old.phase not in _UNDER_WAY:
            continue
        new = after.workload(slot)
        same = new is not None and (new.run_id, new.attempt) == (old.run_id, old.attempt)
        if same and new is not None and new.phase in _UNDER_WAY:
            continue
        ended = new if same else None
        # The fold went straight on from it to the next attempt: ``prior`` is how it ended.
        prior = new.prior if new is not None and not same and new.run_id == old.run_id else None
        moved_from = prior if prior is not None and prior.attempt == old.attempt else None
        workers = ended.workers if ended else moved_from.workers if moved_from else ()
        codes = [s.exit_code for s in workers if s.exit_code is not None]
        failed = next((c for c in codes if c != 0), None)
        exit_code = (
            failed if failed is not None else (0 if ended and ended.phase == "succeeded" else None)
        )
        phase = ended.phase if ended else ("forgotten" if new is None else "superseded")
        detail = ended.detail if ended else ""
        if ended is not None and ended.phase == "stopping" and ended.stop_for == "released":
            phase, detail = "released", ended.release or "slot released"  # the release's stop
        if new is not None and not same and new.run_id == old.run_id:
            # The fold went straight on to the next attempt of the same run (every worker had
            # exited): its failure count and detail still say how this one ended.
            if new.failures > old.failures:
                phase, detail = "failed", new.detail
            elif new.detail == wl.SUCCEEDED_BEFORE:
                phase, detail, exit_code = "succeeded", "", 0
        started_at = old.started_at if old.started_at is not None else old.since  # old memory
        cause = f"{phase}: {detail}" if detail else phase
        ran = old.phase == "running" or exit_code is not None
        ran = ran or phase in ("succeeded", "failed", "gave-up")
        if not ran and not any(s.state in ("alive", "exited") for s in (*old.workers, *workers)):
            # never seen to run: not a run time (history shows no RAN for it)
            cause = f"{NOT_STARTED}: {old.unsent or detail or phase}"
        yield EndedAttempt(
            slot, old.run_id, old.attempt, started_at, exit_code, cause, old.chip_use
        )  # fmt: skip
