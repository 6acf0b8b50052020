"""Workload attempts in the ``history`` document and table: when, how they ended, their chips.

``attempt_dict`` is one entry of ``tpu-reconciler.history.v1``'s ``attempts[]`` (docs/json.md);
``format_attempts`` the table ``history`` prints under the places, newest first. The chip
figures (``core.chip_use``: time-weighted duty-cycle p50, idle periods) are there for attempts
whose slot had ``setup.telemetry``; ``null`` / ``-`` otherwise. An attempt that never started
(``not started: ...``) has no run time: ``ran_seconds`` null, RAN ``-``.

May: build values and text. May not: do I/O, read a clock, or print.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from reconciler.core.history import WorkloadAttempt
from reconciler.model.durations import format_duration
from reconciler.model.times import utc_text
from reconciler.model.workload import NOT_STARTED

#: Attempts the text table shows (``--json`` has every one).
SHOWN: Final = 20


def ran_seconds(a: WorkloadAttempt) -> float | None:
    """How long the attempt ran; None while it runs, and for one that never started (its
    launch started nothing anywhere: it is no run time)."""
    if a.ended_at is None or a.cause.startswith(NOT_STARTED):
        return None
    return max(0.0, a.ended_at - a.started_at)


def attempt_dict(a: WorkloadAttempt) -> dict[str, Any]:
    chips = a.chips
    ran = ran_seconds(a)
    return {
        "slot": a.slot,
        "zone": a.zone,
        "accelerator": a.accelerator,
        "run_id": a.run_id,
        "attempt": a.attempt,
        "started_at": utc_text(a.started_at),
        "ended_at": None if a.ended_at is None else utc_text(a.ended_at),
        "ran_seconds": None if ran is None else round(ran, 1),
        "exit_code": a.exit_code,
        "cause": a.cause,
        "duty_cycle_p50": None if chips is None or chips.duty_p50 is None else chips.duty_p50,
        "idle_periods": None if chips is None else chips.idle_periods,
        "idle_seconds": None if chips is None else round(chips.idle_seconds, 1),
        "longest_idle_seconds": None if chips is None else round(chips.idle_longest, 1),
    }


def chips_text(a: WorkloadAttempt) -> tuple[str, str]:
    """(``97%``, ``2 x 25m (longest 20m)``) for the table; ``-`` when not known."""
    c = a.chips
    if c is None:
        return "-", "-"
    p50 = "?" if c.duty_p50 is None else f"{c.duty_p50:.0f}%"
    if not c.idle_periods:
        return p50, "none"
    idle = f"{c.idle_periods} x {format_duration(c.idle_seconds)}"
    if c.idle_periods > 1:
        idle += f" (longest {format_duration(c.idle_longest)})"
    return p50, idle


def format_attempts(attempts: Sequence[WorkloadAttempt], *, shown: int = SHOWN) -> str:
    """The attempts table (``attempts`` newest first); "" when there is none."""
    if not attempts:
        return ""
    header = ("STARTED", "SLOT", "RUN", "ATTEMPT", "RAN", "EXIT", "TPU p50", "IDLE", "CAUSE")
    rows = [header]
    for a in attempts[:shown]:
        seconds = ran_seconds(a)
        ran = "-" if seconds is None else format_duration(seconds)
        p50, idle = chips_text(a)
        rows.append(
            (
                utc_text(a.started_at),
                a.slot,
                a.run_id,
                str(a.attempt),
                ran,
                "-" if a.exit_code is None else str(a.exit_code),
                p50,
                idle,
                a.cause or "-",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    more = len(attempts) - shown
    tail = [f"(+{more} older: history --json lists every attempt)"] if more > 0 else []
    return "\nWorkload attempts, newest first:\n" + "\n".join(lines + tail) + "\n"
