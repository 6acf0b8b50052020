"""Restart backoff: how long the relaunch after a failed attempt waits, from memory and time.

``restart: on-failure`` and ``always`` relaunch a failed attempt, but never in a tight loop: the
first relaunch of a streak waits ``FIRST_DELAY`` (10 s) from the failure, each further failure
in a row doubles it, up to ``MAX_DELAY`` (5 min). An attempt that had been running healthily
for ``HEALTHY_AFTER`` (10 min) when it failed starts a new streak (its relaunch waits 10 s
again). A preemption, a deliberate stop or an attempt that succeeded (``always``) waits for
nothing. ``core/workload_fold`` records the streak and the time the relaunch may go
(``WorkloadMemory.streak``, ``not_before``) when it counts a failure; ``core/workload``
holds the launch back until then; status shows ``restarting in 40s`` (``core.render.
restart_note``); the controller wakes at ``restart_due``.

Pure: no I/O, no clock (``now`` is an argument), no await.
"""

from __future__ import annotations

from typing import Final

from reconciler.core.memory import Memory
from reconciler.core.workload_memory import WorkloadMemory

FIRST_DELAY: Final = 10.0
MAX_DELAY: Final = 300.0
HEALTHY_AFTER: Final = 600.0


def restart_delay(streak: int) -> float:
    """Seconds the relaunch after the ``streak``-th failure in a row waits (0 for none)."""
    if streak <= 0:
        return 0.0
    return min(MAX_DELAY, FIRST_DELAY * 2.0 ** min(streak - 1, 32))


def after_failure(streak: int, ran_for: float, failed_at: float) -> tuple[int, float]:
    """(the new streak, when the relaunch may go) for a failure at ``failed_at`` of an attempt
    that had been running healthily for ``ran_for`` seconds (0: it never ran)."""
    streak = 1 if ran_for >= HEALTHY_AFTER else streak + 1
    return streak, failed_at + restart_delay(streak)


def healthy_for(wm: WorkloadMemory, now: float) -> float:
    """How long the attempt in play has been running (every worker seen alive), 0 if it is
    not running."""
    return max(0.0, now - wm.since) if wm.phase == "running" else 0.0


def restart_wait(wm: WorkloadMemory | None, now: float) -> float | None:
    """Seconds until the pending relaunch may go; None when nothing waits."""
    if wm is None or wm.phase != "pending" or wm.not_before is None or wm.not_before <= now:
        return None
    return wm.not_before - now


def restart_due(memory: Memory, now: float) -> float | None:
    """The earliest time a held-back relaunch may go (the controller wakes then)."""
    due = [w.not_before for w in memory.workloads.values() if restart_wait(w, now) is not None]
    return min((d for d in due if d is not None), default=None)
