"""The chip limits a pass plans with: the file's ``quotas:``, and with
``settings.quota_source: cloud`` the Cloud Quotas API's too (``adapters/cloud_quotas``: the
Cloud TPU API's, and Compute Engine's when the file uses that API), read
at the first pass and every ``REFRESH`` seconds after (``RETRY`` after a failure, keeping the
limits read before). The file's entry wins where both limit the same API, family, mode and
place.

A failed read is reported once per run of failures (``quota.read_failed``) and never stops
the pass: the file's limits stay in force.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Final

from reconciler.core.quota import key
from reconciler.errors import ReconcilerError
from reconciler.model.accelerators import COMPUTE_API, TPU_API
from reconciler.model.desired import Desired, QuotaSpec

log = logging.getLogger("reconciler.runtime.controller")

REFRESH: Final = 600.0
RETRY: Final = 60.0
TIMEOUT: Final = 20.0

Reader = Callable[[Desired], Awaitable[tuple[QuotaSpec, ...]]]
Note = Callable[..., object]


async def _read(desired: Desired) -> tuple[QuotaSpec, ...]:
    from reconciler.adapters.cloud_quotas import read_limits

    s = desired.settings
    return await read_limits(
        desired.project,
        quota_project=s.quota_project,
        adc=s.credentials == "adc",
        apis=apis_used(desired),
    )


def apis_used(desired: Desired) -> tuple[str, ...]:
    """The APIs whose limits to read: the Cloud TPU API's always (as before), and Compute
    Engine's when a slot or a ``quotas:`` entry uses it (another service, which a project
    using only the TPU API need not have enabled)."""
    used = {s.api for s in desired.slots} | {q.api for q in desired.quotas}
    return (TPU_API,) + ((COMPUTE_API,) if COMPUTE_API in used else ())


def merged(desired: Desired, cloud: tuple[QuotaSpec, ...]) -> Desired:
    """``desired`` with the cloud's limits added where the file sets none."""
    if not cloud:
        return desired
    mine = {key(q) for q in desired.quotas}
    return replace(desired, quotas=desired.quotas + tuple(q for q in cloud if key(q) not in mine))


class CloudQuotaLimits:
    def __init__(self, clock: Callable[[], float], note: Note, reader: Reader = _read) -> None:
        self.clock, self.note, self.reader = clock, note, reader
        self.limits: tuple[QuotaSpec, ...] = ()
        self.project: str | None = None
        self.next_read = 0.0
        self.failing = False

    async def apply(self, desired: Desired) -> Desired:
        """``desired`` with the cloud's limits, when its settings ask for them."""
        if desired.settings.quota_source != "cloud":
            return desired
        now = self.clock()
        if desired.project != self.project:
            self.project, self.limits, self.next_read = desired.project, (), 0.0
        if now >= self.next_read:
            try:
                self.limits = await asyncio.wait_for(self.reader(desired), TIMEOUT)
            except (ReconcilerError, TimeoutError) as e:
                self.next_read = now + RETRY
                if not self.failing:
                    self.note("quota.read_failed", slot=None, error=str(e) or type(e).__name__)
                self.failing = True
            else:
                self.next_read = now + REFRESH
                self.failing = False
                self.note("quota.read", slot=None, limits=len(self.limits))
        return merged(desired, self.limits)
