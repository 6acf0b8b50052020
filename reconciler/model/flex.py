"""Flex-start (Dynamic Workload Scheduler) as values: the keys' rules and the run's timing.

A flex-start slot asks for capacity that runs at most ``max_run_duration`` (up to 7 days) once
provisioned; then the cloud deletes the VMs and suspends the request. That end is *expired*,
not a preemption. On the TPU API only v2alpha1 (and ``gcloud alpha``) speaks it: the TPU API
adapter says how (``adapters/tpu_api_body.py``). Pure: no I/O.
"""

from __future__ import annotations

from typing import Final

from reconciler.model.durations import parse_duration
from reconciler.model.vocabulary import FLEX_START

MODE: Final = FLEX_START
#: The longest run the API grants a flex-start request.
MAX_RUN_SECONDS: Final = 7 * 86400
#: The run is over when the cloud suspended the request no earlier than this before its
#: termination time (an earlier suspension is an interruption, re-queued as usual).
END_SLACK: Final = 120.0
#: A notice goes out this long before a run's end.
ENDING_NOTICE: Final = 30 * 60.0


def problems(mode: str, max_run: float | None, renew: bool | None) -> list[tuple[str, str]]:
    """``(key, message)`` for each rule a slot's flex-start keys break."""
    out: list[tuple[str, str]] = []
    if mode == MODE:
        if max_run is None:
            out.append(("mode", "mode flex-start needs 'max_run_duration' (at most 7d)"))
        elif max_run > MAX_RUN_SECONDS:
            out.append(("max_run_duration", "max_run_duration is at most 7d for flex-start"))
        elif max_run < 60:
            out.append(("max_run_duration", "max_run_duration is at least 60s"))
    else:
        if max_run is not None:
            out.append(("max_run_duration", f"max_run_duration needs mode flex-start, not {mode}"))
        if renew is not None:
            out.append(("renew", f"renew needs mode flex-start, not {mode}"))
    return out


def first_problem(mode: str, max_run: str | float | None, renew: bool | None) -> str | None:
    """The first rule a new slot's flex-start keys break, as a user gave them (``max_run``: a
    duration such as ``"6h"``, or seconds), in one line; None when they are fine."""
    seconds = None
    if max_run is not None:
        try:
            seconds = parse_duration(max_run)
        except ValueError as e:
            return f"max_run_duration: {e}"
    found = problems(mode, seconds, renew)
    return found[0][1] if found else None
