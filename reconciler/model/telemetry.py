"""What the chip probe tells about one worker: per-chip figures and the processes holding chips.

``ChipReading`` is one chip as the TPU runtime's metrics service reports it (a figure it did
not give is ``None``: *unknown*, never zero); ``TpuHolder`` is one process with a chip's device
file open; ``WorkerTelemetry`` is one worker's answer (``metrics`` says why the figures are
unknown, "" when they were read). Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ChipReading:
    index: int
    duty: float | None = None  # TensorCore duty cycle, percent
    hbm_used: int | None = None  # bytes
    hbm_total: int | None = None  # bytes
    holders: tuple[int, ...] = ()  # pids with this chip's device file open


@dataclass(frozen=True, slots=True)
class TpuHolder:
    pid: int
    command: str
    user: str
    age: float | None  # seconds since the process started
    device: str
    slot: str | None = None  # TPU_RECONCILER_SLOT in its environment, when readable
    run_id: str | None = None


@dataclass(frozen=True, slots=True)
class WorkerTelemetry:
    chips: tuple[ChipReading, ...] = ()
    holders: tuple[TpuHolder, ...] = ()
    metrics: str = ""  # why the figures are unknown ("" = read)
