"""Small helpers shared by the benchmark scripts: timing, and a description of the machine and
command so every printed number says where and how it was measured.

No third-party imports and nothing from ``reconciler``: importing this costs nothing.
"""

from __future__ import annotations

import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parents[2]


def ensure_repo_on_path() -> None:
    """Let a script run as ``python scripts/bench/x.py`` import ``reconciler`` and ``tests``."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))


@dataclass(frozen=True)
class Timings:
    """Seconds per call: wall clock, and CPU of this process (what the call itself cost when
    other processes compete for the cores)."""

    wall: list[float]
    cpu: list[float]


def timings(
    fn: Callable[[], object], *, min_runs: int = 5, min_seconds: float = 1.0, max_runs: int = 200
) -> Timings:
    """Repeated calls: at least ``min_runs`` and ``min_seconds`` in total.

    One untimed warm-up call first; a full garbage collection before each timed call so one
    run does not pay for the previous run's garbage (the collector stays on during the call,
    as it is in the controller).
    """
    fn()
    wall: list[float] = []
    cpu: list[float] = []
    start = time.perf_counter()
    while len(wall) < max_runs and (
        len(wall) < min_runs or time.perf_counter() - start < min_seconds
    ):
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - t0)
    return Timings(wall, cpu)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def command_line() -> str:
    """How this benchmark was started, relative to the repository when possible."""
    script = Path(sys.argv[0]).resolve()
    try:
        shown = str(script.relative_to(REPO))
    except ValueError:
        shown = str(script)
    return " ".join(["python", shown, *sys.argv[1:]])


def _first(path: str, prefix: str) -> str | None:
    try:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.startswith(prefix):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def machine() -> dict[str, str]:
    """nproc, CPU model, memory, kernel, Python, and the load while measuring."""
    mem = _first("/proc/meminfo", "MemTotal")
    return {
        "nproc": str(os.cpu_count()),
        "cpu": _first("/proc/cpuinfo", "model name") or platform.processor() or "unknown",
        "memory": f"{int(mem.split()[0]) / 1024 / 1024:.1f} GiB" if mem else "unknown",
        "kernel": platform.release(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "load average (1 min)": f"{os.getloadavg()[0]:.2f}",
    }


def print_header(title: str) -> None:
    print(title)
    print(f"  command: {command_line()}")
    for key, value in machine().items():
        print(f"  {key}: {value}")
    print()
