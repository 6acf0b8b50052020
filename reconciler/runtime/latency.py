"""Round-trip probes beside the controller's pass: the LATENCY column's measurements.

Each pass hands ``LatencyProbes.start`` what it saw; the pure rule (``core.latency.due_probes``)
says which zones are due, and each due probe runs as its own background task (at most one per
zone at a time) through ``adapters.latency``. The pass never waits for one: a result is handed
to ``record`` when it comes and shows in the next snapshot. A probe that fails, or raises
through a bug, is recorded as unknown.

May: start, and cancel, asyncio tasks that dial through ``adapters.latency``.
May not: decide which zone or node to probe (``core.latency`` does), or touch memory itself
(the controller's ``record`` callback folds a result in).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from reconciler.adapters.latency import connect_time
from reconciler.core.latency import Probe, ZoneLatency, due_probes
from reconciler.model.desired import Desired
from reconciler.model.observed import Observation

log = logging.getLogger(__name__)

Record = Callable[[str, float | None], None]  # (zone, milliseconds or None: unknown)


class LatencyProbes:
    """The probes running now, zone -> task; ``record`` receives each one's result."""

    def __init__(self, record: Record) -> None:
        self._record = record
        self._tasks: dict[str, asyncio.Task[None]] = {}

    @property
    def running(self) -> frozenset[str]:
        return frozenset(self._tasks)

    def start(
        self,
        desired: Desired | None,
        observation: Observation,
        latency: Mapping[str, ZoneLatency],
        now: float,
    ) -> list[Probe]:
        """Start the probes that are due; returns them (they run on without the caller)."""
        probes = list(due_probes(desired, observation, latency, now, busy=self._tasks))
        for probe in probes:
            self._tasks[probe.zone] = asyncio.create_task(
                self._measure(probe), name=f"latency:{probe.zone}"
            )
        return probes

    async def _measure(self, probe: Probe) -> None:
        try:
            seconds = await connect_time(probe.ip, probe.port)
        except asyncio.CancelledError:
            raise
        except Exception:  # the adapter promises not to raise; a bug is still unknown
            log.exception("latency probe of %s failed unexpectedly", probe.zone)
            seconds = None
        finally:
            self._tasks.pop(probe.zone, None)
        self._record(probe.zone, None if seconds is None else seconds * 1000.0)

    async def cancel(self) -> None:
        """Stop the probes still running (the controller is stopping)."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)
        self._tasks.clear()
