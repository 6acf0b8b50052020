"""How busy the chips were over one workload attempt: duty-cycle p50 and idle periods.

With ``setup.telemetry`` each pass that probes a running attempt reads every worker's chips.
``step`` folds one such reading into the attempt's ``ChipUse`` (kept in its workload memory,
so a restarted controller goes on with it); ``summary`` closes it when the attempt ends, for
its row in the capacity history.

- **Duty cycle.** A reading's figure is the mean TensorCore duty cycle over every chip whose
  figure is known (None when none is). It holds from its pass until the next one, so the p50
  is *time-weighted*: fast passes while something moves do not outweigh slow steady ones. The
  time is kept per whole percent (at most 101 buckets, whatever the attempt's length).
- **Idle periods.** A reading is idle when every chip of every worker is known and under the
  workload's ``idle_below`` (the rule of the idle check, whether ``idle_after`` is set or not);
  consecutive idle readings are one period. Unknown is never idle.
- A gap between two readings longer than ``MAX_GAP`` (the controller was stopped, probes
  failed for long) counts only ``MAX_GAP``: what happened in it is not known.

Pure: no I/O, no clock (``now`` is an argument), no await.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from reconciler.model.telemetry import ChipReading

#: Longest time one reading stands for (seconds).
MAX_GAP: Final = 300.0


@dataclass(frozen=True, slots=True)
class ChipUse:
    """One attempt's chip use so far."""

    at: float  # when the last reading was taken
    duty: float | None = None  # its mean duty cycle (percent); None = unknown
    idle: bool = False  # every chip of every worker idle at that reading
    #: seconds per whole percent of duty cycle, (percent, seconds) sorted by percent
    seconds: tuple[tuple[int, float], ...] = ()
    idle_periods: int = 0
    idle_seconds: float = 0.0
    idle_run: float = 0.0  # length of the idle period in progress
    idle_longest: float = 0.0


@dataclass(frozen=True, slots=True)
class ChipSummary:
    """What the capacity history keeps of an attempt's chip use."""

    duty_p50: float | None  # time-weighted median of the mean duty cycle; None = never known
    idle_periods: int
    idle_seconds: float
    idle_longest: float


def reading(
    workers: Sequence[Sequence[ChipReading] | None], below: float
) -> tuple[float | None, bool]:
    """(mean duty cycle over every known chip, whether every chip of every worker is idle)."""
    duties = [c.duty for chips in workers if chips for c in chips if c.duty is not None]
    mean = sum(duties) / len(duties) if duties else None
    idle = bool(workers) and all(
        chips and all(c.duty is not None and c.duty < below for c in chips) for chips in workers
    )
    return mean, idle


def _advance(use: ChipUse, now: float) -> ChipUse:
    """``use`` with its last reading credited up to ``now``."""
    span = min(max(0.0, now - use.at), MAX_GAP)
    if span <= 0.0:
        return replace(use, at=max(use.at, now))
    seconds = use.seconds
    if use.duty is not None:
        bucket = min(100, max(0, round(use.duty)))
        table = dict(seconds)
        table[bucket] = table.get(bucket, 0.0) + span
        seconds = tuple(sorted(table.items()))
    if not use.idle:
        return replace(use, at=now, seconds=seconds)
    run = use.idle_run + span
    return replace(
        use,
        at=now,
        seconds=seconds,
        idle_seconds=use.idle_seconds + span,
        idle_run=run,
        idle_longest=max(use.idle_longest, run),
    )


def step(
    use: ChipUse | None,
    workers: Sequence[Sequence[ChipReading] | None],
    now: float,
    below: float,
) -> ChipUse | None:
    """``use`` after this pass's reading of the chips (``workers``: each worker's chips, None
    when not read). None while no reading was ever taken (telemetry off)."""
    if use is None and all(chips is None for chips in workers):
        return None
    duty, idle = reading(workers, below)
    if use is None:
        return ChipUse(at=now, duty=duty, idle=idle, idle_periods=int(idle))
    moved = _advance(use, now)
    if idle and not use.idle:
        return replace(
            moved, duty=duty, idle=True, idle_periods=moved.idle_periods + 1, idle_run=0.0
        )
    return replace(moved, duty=duty, idle=idle, idle_run=moved.idle_run if idle else 0.0)


def weighted_median(seconds: Sequence[tuple[int, float]]) -> float | None:
    """The value at which half of the time has passed (None when no time was counted)."""
    total = sum(s for _, s in seconds)
    if total <= 0.0:
        return None
    passed = 0.0
    for value, s in seconds:
        passed += s
        if passed >= total / 2:
            return float(value)
    return float(seconds[-1][0])


def summary(use: ChipUse | None, until: float) -> ChipSummary | None:
    """The attempt's figures, its last reading counted up to ``until`` (when it ended)."""
    if use is None:
        return None
    done = _advance(use, until)
    return ChipSummary(
        duty_p50=weighted_median(done.seconds),
        idle_periods=done.idle_periods,
        idle_seconds=done.idle_seconds,
        idle_longest=done.idle_longest,
    )


def to_dict(use: ChipUse) -> dict[str, Any]:
    return {
        "at": use.at,
        "duty": use.duty,
        "idle": use.idle,
        "seconds": [[p, s] for p, s in use.seconds],
        "idle_periods": use.idle_periods,
        "idle_seconds": use.idle_seconds,
        "idle_run": use.idle_run,
        "idle_longest": use.idle_longest,
    }


def from_dict(d: Any) -> ChipUse | None:
    """Raises ValueError (or TypeError/KeyError) on a malformed value."""
    if d is None:
        return None
    if not isinstance(d, dict):
        raise ValueError("chip use must be an object")
    duty = d.get("duty")
    return ChipUse(
        at=float(d["at"]),
        duty=None if duty is None else float(duty),
        idle=bool(d.get("idle", False)),
        seconds=tuple((int(p), float(s)) for p, s in d.get("seconds", [])),
        idle_periods=int(d.get("idle_periods", 0)),
        idle_seconds=float(d.get("idle_seconds", 0.0)),
        idle_run=float(d.get("idle_run", 0.0)),
        idle_longest=float(d.get("idle_longest", 0.0)),
    )
