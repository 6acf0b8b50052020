"""When to look again: the adaptive poll interval, as a pure function.

Slow (``poll_interval``) when steady; fast (``fast_poll_interval``) while anything is queued,
provisioning, suspending or deleting, a race is open, or an action that ``hurries`` is in
flight; right away when an action completes or the desired file changes (the caller wakes the
loop for those). A setup or workload step retrying after a failure does not hurry: it is in
its backoff, its end wakes the loop anyway, and a step that keeps failing (an OS Login lookup
that cannot succeed) must not keep a steady controller polling fast. For the same reason an
attempt whose launch failed before any worker was seen running it is not ``watching``: nothing
of it can end.
After failed observations the interval backs off exponentially from the fast interval up to
the slow one — never a tight crash loop. Jitter spreads many controllers' polls apart (the fast
interval is only ever shortened by it);
the caller supplies the random number, so this stays pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Final

from reconciler.core import workload as wl
from reconciler.core.memory import Memory
from reconciler.core.workload_health import unsent

SETTLE: Final = 0.2  # the shortest interval ever returned
JITTER: Final = 0.1  # +-10 %


def next_interval(
    *,
    slow: float,
    fast: float,
    moving: bool,
    in_flight: int,
    dispatched: int,
    observe_failures: int,
    error_delay: float = 0.0,
    rand: float = 0.5,
    retry: float | None = None,
) -> float:
    """Seconds until the next pass. ``rand`` in [0, 1) drives the jitter. ``retry``: the
    failed observation is governed by Google's retry rule (``core.retry``), already jittered,
    which then decides — but never sooner than the fast interval: a failing cloud is not
    polled faster than a busy healthy one."""
    if observe_failures and retry is not None:
        return max(SETTLE, fast, retry)
    if observe_failures:
        # The failure's own delay (a Retry-After, 60 s for a permanent error) wins even over
        # the slow interval: hammering a refusing API helps nobody.
        base = max(error_delay, min(slow, fast * 2.0 ** min(observe_failures - 1, 16)))
    elif moving or in_flight or dispatched:
        # Races are won on the fast interval: jitter only ever makes it shorter.
        return max(SETTLE, fast * (1.0 - JITTER * rand))
    else:
        base = slow
    return max(SETTLE, base * (1.0 + JITTER * (2.0 * rand - 1.0)))


def hurries(*, cloud: bool, retrying: bool) -> bool:
    """Whether an action in flight (or just dispatched) calls for the fast interval: a cloud
    action always (the next observations show its effect), a setup or workload step only on
    its first try (``retrying``: it failed before and was sent again after its backoff)."""
    return cloud or not retrying


def watching(memory: Memory, zones: Mapping[str, str]) -> bool:
    """``core.workload.watching`` (an attempt under way: poll fast to notice its end), less the
    attempts that never reached a worker: still "starting", no worker seen alive or exited,
    and their launch failed (its error in ``memory``: a permanent one, e.g. an emulated node,
    or one in backoff). ``zones``: slot -> zone, for the launch's action key."""
    idle = {
        slot
        for slot, w in memory.workloads.items()
        if slot in zones
        and unsent(w.phase, [s.state for s in w.workers], _launch_error(memory, zones[slot], slot))
    }
    if idle:
        kept = {slot: w for slot, w in memory.workloads.items() if slot not in idle}
        memory = replace(memory, workloads=MappingProxyType(kept))
    return wl.watching(memory)


def _launch_error(memory: Memory, zone: str, slot: str) -> str | None:
    error = memory.error(f"{zone}/{slot}:launch")
    return error.message if error is not None else None
