"""Chip telemetry rules: the idle (hang) check, the status figure, and stray TPU holders.

- **Idle.** ``idle_check`` starts a clock when every chip of every worker reports a TensorCore
  duty cycle under ``idle_below`` percent and fails the attempt once that has lasted
  ``idle_after``. A figure that is unknown (no metrics service, a worker not answering, a
  metric that vanished) is never idle: it stops the clock, so unknown never fails anything.
- **The figure** ``status`` shows: the least busy worker's mean duty cycle and its HBM in use
  of its total, ``TPU 97% · HBM 28/32 GiB`` (``TPU ? · HBM ?`` while nothing is known).
- **Stray holders.** ``strays`` names the processes holding a chip that are not this slot's
  workload (their environment does not name the slot, or cannot be read); ``holders_text``
  says it on one line, ``TPU held by pid 4242 `python3` (user alice, 2h) on worker 0``.

Pure: no I/O, no clock (``now`` is an argument), no await.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from reconciler.core.workload_memory import WorkerSeen, WorkloadMemory
from reconciler.model.durations import format_duration
from reconciler.model.status import ChipStatus
from reconciler.model.telemetry import ChipReading, TpuHolder, WorkerTelemetry

#: The start of the detail of an attempt failed by the idle check.
IDLE: Final = "idle:"
_GIB: Final = 1024**3


def _all_idle(workers: Sequence[Sequence[ChipReading] | None], below: float) -> int:
    """How many chips are idle when every chip of every worker is known and under ``below``;
    0 when any is busy or unknown."""
    count = 0
    for chips in workers:
        if not chips:
            return 0
        for chip in chips:
            if chip.duty is None or chip.duty >= below:
                return 0
            count += 1
    return count


def idle_check(
    workers: Sequence[Sequence[ChipReading] | None],
    idle_since: float | None,
    now: float,
    idle_after: float | None,
    idle_below: float,
) -> tuple[float | None, str | None]:
    """(since when every chip has been idle, failure detail once that outlasted
    ``idle_after``). ``workers``: each worker's chips this pass (None: not read)."""
    if idle_after is None or not workers:
        return None, None
    chips = _all_idle(workers, idle_below)
    if not chips:
        return None, None
    since = now if idle_since is None else idle_since
    if now - since < idle_after:
        return since, None
    return since, (
        f"{IDLE} TensorCore duty cycle < {idle_below:g}% on all {chips} chips for "
        f"{format_duration(now - since)}"
    )


def _gib(n: float) -> str:
    return f"{n / _GIB:.0f}"


def figure(workers: Sequence[Sequence[ChipReading] | None]) -> str:
    """``TPU 97% · HBM 28/32 GiB`` for the least busy worker; "" when no worker was read."""
    read = [chips for chips in workers if chips is not None]
    if not read:
        return ""
    best: tuple[float, Sequence[ChipReading]] | None = None
    for chips in read:
        duties = [c.duty for c in chips if c.duty is not None]
        if not duties:
            continue
        mean = sum(duties) / len(duties)
        if best is None or mean < best[0]:
            best = (mean, chips)
    if best is None:
        return "TPU ? · HBM ?"
    mean, chips = best
    used = [c.hbm_used for c in chips]
    total = [c.hbm_total for c in chips]
    hbm = "?"
    if chips and all(u is not None for u in used) and all(t is not None for t in total):
        hbm = f"{_gib(sum(u or 0 for u in used))}/{_gib(sum(t or 0 for t in total))} GiB"
    return f"TPU {mean:.0f}% · HBM {hbm}"


def strays(
    slot: str, workers: Sequence[tuple[int, WorkerTelemetry | None]]
) -> list[tuple[int, TpuHolder]]:
    """(worker, holder) of every process holding a chip that is not ``slot``'s workload."""
    return [
        (index, h) for index, t in workers if t is not None for h in t.holders if h.slot != slot
    ]


def holders_text(found: Sequence[tuple[int, TpuHolder]]) -> str:
    """``TPU held by pid 4242 `python3` (user alice, 2h) on worker 0`` (+ how many more)."""
    if not found:
        return ""
    worker, h = found[0]
    age = f", {format_duration(h.age)}" if h.age is not None else ""
    more = len(found) - 1
    tail = f" (+{more} more)" if more else ""
    return f"TPU held by pid {h.pid} `{h.command}` (user {h.user}{age}) on worker {worker}{tail}"


def tpu_figure(wm: WorkloadMemory | None) -> str:
    """``figure`` of the workload's last probe, while its attempt may run ("" otherwise)."""
    if wm is None or wm.phase not in ("starting", "running", "stopping"):
        return ""
    return figure([s.chips for s in wm.workers])


def chips_status(seen: WorkerSeen) -> tuple[ChipStatus, ...]:
    """``slots[].workload.workers[].chips`` of the status snapshot."""
    return tuple(
        ChipStatus(
            index=c.index,
            duty_cycle=c.duty,
            hbm_used=c.hbm_used,
            hbm_total=c.hbm_total,
            holders=c.holders,
        )
        for c in seen.chips or ()
    )
