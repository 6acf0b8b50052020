"""``setup.at_boot`` and ``before_end`` in words, for status's NOTE, ``info`` and the TUI.

Pure: status values in, text out.
"""

from __future__ import annotations

import contextlib
from typing import Final

from reconciler.model.durations import format_duration
from reconciler.model.stamps import epoch
from reconciler.model.status import BeforeEndStatus, BootStatus, SetupStatus


def boot_note(setup: SetupStatus) -> str | None:
    """``setup at boot 3/4``, ``setup failed at boot (01-a.sh exit 1 on worker 2)``."""
    boot = setup.at_boot
    if boot is None or setup.bootstrap == "done":
        return None
    if "failed" in boot.workers:
        return f"setup failed at boot ({boot.detail})" if boot.detail else "setup failed at boot"
    done = sum(w == "done" for w in boot.workers)
    return f"setup at boot {done}/{len(boot.workers)}"


def boot_workers(boot: BootStatus) -> str:
    """``w0 done  w1 running  w2 waiting``."""
    return "  ".join(f"w{i} {state}" for i, state in enumerate(boot.workers))


def before_end_note(b: BeforeEndStatus | None, now: float) -> str | None:
    """``before_end in 5m (maintenance 14:00 UTC)``, ``before_end ran (flex-start 14:00 UTC)``,
    ``before_end (flex-start 14:00 UTC): no running workload``, ..."""
    if b is None or not b.end or b.at is None:
        return None
    end = f"{b.end} {b.at[11:16]} UTC"
    if b.state == "scheduled" and b.runs_at:
        with contextlib.suppress(ValueError):
            return f"before_end in {format_duration(epoch(b.runs_at) - now)} ({end})"
    if b.state == "failed":
        return f"before_end failed ({end}): {b.last}"
    if b.state == "waiting":
        return f"before_end ({end}): no running workload"
    return f"before_end {b.state} ({end})"


_INFO: Final = {
    "scheduled": "runs at {runs_at}, before {end} at {at}",
    "due": "due now, before {end} at {at}",
    "ran": "ran before {end} at {at}",
    "failed": "failed, tried again until {end} at {at}",
    "waiting": "runs before {end} at {at} once the workload runs (from {runs_at})",
}


def before_end_line(b: BeforeEndStatus) -> str:
    """The ``info`` line: the next end, when it runs, and the last run."""
    parts = []
    if b.end and b.at:
        form = _INFO.get(b.state, "{state}: {end} at {at}")
        parts.append(form.format(state=b.state, end=b.end, at=b.at, runs_at=b.runs_at))
    if b.last:
        parts.append(f"last: {b.last}")
    return "before_end: " + ("; ".join(parts) or b.state)
