"""Processes of an attempt that outlived its stop: what the wrapper's ``left=`` means to users.

The workload wrapper ends every process of an attempt (SIGTERM, the grace, SIGKILL) and waits
for them until the kill deadline; what is still there then (stuck in the kernel, or owned by a
user the worker's user cannot signal) is named in the attempt's exit record, the stop's answer
(``stopped left=PID,...``) and every later probe while it is still there. Such a worker's
chips may still be held, so no new attempt of the slot starts until the probe finds none:
``core/workload_fold`` counts a worker with processes left as still running, and keeps the
text (``said``) in the workload's memory for status, NOTE and the ``workload.left`` event (the
wrapper refuses another attempt's launch meanwhile too).

No I/O, no clock, no await.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from reconciler.model.workload import WorkerProbe

#: How many process ids one worker's part of the text names.
_SHOWN: Final = 5


def left_of(seen: Sequence[WorkerProbe]) -> dict[int, tuple[int, ...]]:
    """worker -> the processes its probe says are left, for the workers that have some."""
    return {p.index: p.left for p in seen if p.left}


def said(by_worker: Mapping[int, Sequence[int]]) -> str:
    """One line for status and events; "" when nothing is left."""
    parts = []
    for worker in sorted(by_worker):
        pids = list(by_worker[worker])
        if not pids:
            continue
        shown = ", ".join(str(p) for p in pids[:_SHOWN])
        more = f" (+{len(pids) - _SHOWN} more)" if len(pids) > _SHOWN else ""
        parts.append(f"worker {worker}: pid {shown}{more}")
    if not parts:
        return ""
    return (
        f"processes left after the stop on {'; '.join(parts)} (they survived SIGKILL): "
        "no new attempt starts there until they are gone"
    )


def left_said(by_worker: Mapping[int, Sequence[int]]) -> str | None:
    """``said``, or None when nothing is left (a stop's result)."""
    return said(by_worker) or None


def probes_said(seen: Sequence[WorkerProbe]) -> str:
    """``said`` of this pass's probes."""
    return said(left_of(seen))
