"""Workload values shared by the planner, the controller and the worker adapter.

``WorkerProbe`` is what one short probe of one worker tells (alive, exited with a code,
missing, or *unknown* when the probe itself failed); ``LaunchRequest`` is everything the
adapter needs to start one attempt on every worker; ``LogLine`` is one line of a worker's
output. ``WorkloadState`` is the state users see (status, JSON, MCP). The secret-name check
lives here because the desired-file schema and the secret store both need it (environment
names and run ids are checked in ``model.names``). Nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, get_args

from reconciler.errors import UnsafeName

WorkerState = Literal["alive", "exited", "missing", "unknown"]

#: What ``status`` and ``status --json`` say about a slot's workload.
WorkloadState = Literal[
    "pending",
    "starting",
    "running",
    "succeeded",
    "failed",
    "stopping",
    "interrupted",
    "gave-up",
    "unknown",
]
WORKLOAD_STATES: Final[tuple[WorkloadState, ...]] = get_args(WorkloadState)

Restart = Literal["never", "on-preemption", "on-failure", "always"]
WhenDone = Literal["keep", "release"]

SECRET_NAME_RE: Final = re.compile(r"^[a-z][a-z0-9-]{0,62}$")


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


def check_secret_name(name: object) -> str:
    """A name in the secret store (``secrets/<name>``): what ``secret set`` accepts."""
    if not isinstance(name, str) or not SECRET_NAME_RE.fullmatch(name):
        raise UnsafeName(
            f"invalid secret name {name!r}: lowercase letters, digits and hyphens, "
            "starting with a letter"
        )
    return name
