"""Ends you can see coming: a workload's ``before_end`` and the known ends it runs before.

A slot's capacity has an end the controller can see ahead of time when

- its node announces a maintenance window (``upcomingMaintenance.windowStartTime`` on the TPU
  API; ``Node.maintenance``) that has not started;
- its request carries a ``termination_time``: a flex-start run's end on the TPU API, and on
  Compute Engine any VM whose ``scheduling.terminationTime`` the adapter puts there (a
  ``maxRunDuration`` or a termination time: the hook for an end an API announces);
- the file releases it at a known time: ``hold_until``, or ``hold_for`` once it is counting.

A spot preemption is not among them: the TPU API says nothing before it happens, and Compute
Engine's notice (about 30 s, ACPI soft-off) reaches only the VM itself, never an API poll.

``BeforeEndSpec`` is the resolved ``workload.before_end`` block; ``End`` one known end;
``EndAct`` what a ``~ before_end`` action carries to the workers. Values only; the decision
is ``core/before_end.py``, the run on the workers ``adapters/workload_hook.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

#: The kinds of end, and how a notice says each one.
KINDS: Final = {
    "maintenance": "maintenance window starts",
    "flex-start": "flex-start run ends",
    "termination": "the VM's termination time",
    "hold_until": "hold_until releases the slot",
    "hold_for": "hold_for releases the slot",
}
#: Shortest and longest ``lead`` (``before_end.lead``).
MIN_LEAD: Final = 10.0
MAX_LEAD: Final = 86400.0
#: The default lead and (when none is given) timeout.
DEFAULT_LEAD: Final = 600.0

_KEY_RE: Final = re.compile(r"[a-z_-]+@[0-9]{1,12}")


@dataclass(frozen=True, slots=True)
class BeforeEndSpec:
    """A workload's resolved ``before_end``: what runs, how long before a known end, and how
    long it may take on each worker (``timeout``, default the lead)."""

    command: str | tuple[str, ...]
    lead: float = DEFAULT_LEAD
    timeout: float = DEFAULT_LEAD


@dataclass(frozen=True, slots=True)
class End:
    """One known end: its kind (``KINDS``), the moment (epoch seconds) and that moment as the
    source wrote it (RFC 3339)."""

    kind: str
    at: float
    stamp: str

    @property
    def key(self) -> str:
        """``maintenance@1767254400``: the end's identity (one run of before_end per attempt
        and key; a moved window is a new end)."""
        return f"{self.kind}@{int(self.at)}"

    @property
    def words(self) -> str:
        return KINDS.get(self.kind, self.kind)


@dataclass(frozen=True, slots=True)
class EndAct:
    """What a ``~ before_end`` action carries: the attempt it runs for and the end."""

    run_id: str
    attempt: int
    kind: str
    at: str  # the end, RFC 3339 (TPU_RECONCILER_END_TIME on the workers)
    key: str  # End.key, also the worker's record of it (idempotent there too)
    timeout: float


def check_end_key(key: str) -> str:
    """An end key that may name a file on the worker (``hook-<key>``); ValueError otherwise."""
    if not isinstance(key, str) or not _KEY_RE.fullmatch(key):
        raise ValueError(f"invalid end key {key!r}")
    return key
