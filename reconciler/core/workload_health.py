"""Workload rules for what a crash or a full disk leaves behind, from probes, memory and time.

- **Run ids a restart can find.** A run id is ``g<generation>-<identity>-<stamp>``
  (``make_run_id``): its first two parts say which generation of which command it runs, and the
  wrapper on each worker compares them. A controller that launched a run and could not save
  it (a full state disk, then a kill) makes another id for the same work when restarted; the
  wrapper then starts nothing and names the run it holds (``WorkerProbe.adopt``), and
  ``adopted`` takes that run over instead: one program start, watched.
- **A worker that left no record.** A worker whose attempt was launched (``started_at``) but
  which answers *missing* (no lock held, no exit record, no process: its disk filled before
  the record, the machine rebooted) while its peers are alive or exited is a failure once it
  has been so for ``LOST_GRACE`` seconds (``lost_worker``; so is one that holds its twin
  run instead, when a crash cut a launch off between workers): the job is stopped and relaunched
  by the usual failure rules, never left *running* with a hole in it. A probe that did not
  answer (*unknown*) is no evidence either way: it neither starts nor ends that grace.
- **Nothing sent.** An attempt recorded as sent whose launch failed before any worker started
  it (a missing secret, a refused launch) is shown *pending* with why (``unsent``), not
  *starting*.

Pure: no I/O, no clock (``now`` is an argument), no await.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from reconciler.model.workload import WorkerProbe

#: How long a launched worker may answer "missing" while its peers run before it is a failure.
LOST_GRACE: Final = 60.0

_KEYED: Final = re.compile(r"^(g[0-9]+-[0-9a-f]{8})-[0-9a-z]+$")


def _b36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def make_run_id(generation: int, identity: str, now: float) -> str:
    """``g<generation>-<first 8 of identity>-<ms since the epoch, base 36>``."""
    return f"g{generation}-{identity[:8]}-{_b36(max(0, int(now * 1000)))}"


def run_key(run_id: str) -> str | None:
    """The generation-and-command part of a run id (None for ids made before it had one)."""
    m = _KEYED.fullmatch(run_id)
    return m.group(1) if m else None


def adopted(run_id: str, attempt: int, seen: Sequence[WorkerProbe]) -> tuple[str, int] | None:
    """The run to take over instead of ``run_id``'s first attempt: every worker answered, none
    has this attempt, and those that name a run to adopt name the same one, of the same
    generation and command. None otherwise."""
    if attempt != 1 or not seen or any(p.state != "missing" for p in seen):
        return None
    named = {p.adopt for p in seen if p.adopt is not None}
    if len(named) != 1:
        return None
    other, _, number = named.pop().partition("/")
    key = run_key(run_id)
    if other == run_id or key is None or run_key(other) != key or not number.isdigit():
        return None
    return other, int(number)


def lost_worker(
    seen: Sequence[WorkerProbe], missing_since: float | None, now: float, grace: float = LOST_GRACE
) -> tuple[float | None, str | None]:
    """(when the gap was first seen, failure detail once it outlasted ``grace``). The gap: a
    worker the attempt was launched on answers "missing" while another is alive or exited (or
    one that holds another launch of the same work instead: a launch a crash cut off between
    workers). An unknown worker keeps the clock as it was and decides nothing."""
    lost = [
        p
        for p in seen
        if p.state == "missing" and (p.started_at is not None or p.adopt is not None)
    ]
    peers = any(p.state in ("alive", "exited") for p in seen)
    if not lost or not peers:
        unknown = any(p.state == "unknown" for p in seen)
        return (missing_since if unknown else None), None
    since = now if missing_since is None else missing_since
    if now - since < grace:
        return since, None
    workers = ", ".join(str(p.index) for p in lost)
    plural = "s" if len(lost) > 1 else ""
    if all(p.adopt is not None for p in lost):
        return since, f"worker{plural} {workers} run{'' if plural else 's'} another launch of it"
    return since, (
        f"worker{plural} {workers} left no exit record while the others ran "
        "(disk full or rebooted?)"
    )


def unsent(phase: str, workers_seen: Sequence[str], launch_error: str | None) -> str:
    """Why an attempt recorded as sent never started anywhere ("" when it did, or may have):
    its launch failed and no worker has been seen with it."""
    if phase != "starting" or launch_error is None:
        return ""
    if any(state in ("alive", "exited") for state in workers_seen):
        return ""
    return launch_error
