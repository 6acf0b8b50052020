"""Workload values shared by the decision side (core/workload.py) and the worker side
(adapters/workload.py): what to launch, what a probe saw on one worker, one line of output.

No I/O, no clock: the adapter fills these from the wrapper's records on the workers, the
planner reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

WorkerState = Literal["alive", "exited", "missing", "unknown"]


@dataclass(frozen=True, slots=True)
class WorkerProbe:
    index: int  # worker index (networkEndpoints order)
    state: WorkerState  # "unknown" = the probe itself failed (SSH down, timeout)
    exit_code: int | None = None
    pid: int | None = None
    started_at: float | None = None  # epoch seconds, from the wrapper's record
    last_output_at: float | None = None  # mtime of the attempt's output log
    error: str | None = None  # why the probe failed (state "unknown")


@dataclass(frozen=True, slots=True)
class LaunchRequest:
    slot: str
    run_id: str  # stable across relaunches within one generation
    attempt: int  # 1, 2, ...
    command: str | tuple[str, ...]  # str: run by `bash -lc`; tuple: argv
    workdir: str | None  # None = login directory; "~/x" expanded on the worker
    env: Mapping[str, str]  # plain values
    secret_env: Mapping[str, str]  # ENV_NAME -> secret name in the secret store
    workers: int  # count (TPU_RECONCILER_WORKERS)


@dataclass(frozen=True, slots=True)
class LogLine:
    worker: int
    attempt: int
    text: str
