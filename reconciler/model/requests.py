"""Requests the planner asks the cloud to carry out, as plain values (no I/O).

Kept in ``model`` so that ``core`` can build them and ``adapters`` can execute them without
either importing the other.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from reconciler.errors import UnsafeName
from reconciler.model.times import api_time


@dataclass(frozen=True, slots=True)
class CreateRequest:
    """Everything needed to create one queued resource with one node of the same name."""

    name: str
    zone: str
    accelerator_type: str
    runtime_version: str
    mode: str  # "spot" | "on-demand" | "reserved" | "flex-start"
    network: str | None = None
    subnetwork: str | None = None
    valid_until_seconds: int | None = None
    internal_ips: bool = False
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    valid_after_seconds: int | None = None  # start_after: relative to the create
    valid_after_time: float | None = None  # start_at: epoch seconds
    max_run_seconds: int | None = None  # mode flex-start: runDuration.maxRunDuration
    node_count: int = 1  # > 1: a multislice QR of this many nodes <name>-0 ... (same prefix)


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise UnsafeName(f"invalid {name} {value!r}: a positive integer")
    return value


def window(request: CreateRequest) -> tuple[int | None, float | None, int | None]:
    """The request's queueing window, checked: (after seconds, after time, until seconds).
    Raises UnsafeName on a value no create may carry (both starts, a non-finite time)."""
    after = request.valid_after_seconds
    at = request.valid_after_time
    until = request.valid_until_seconds
    if after is not None and at is not None:
        raise UnsafeName("a create carries valid_after_seconds or valid_after_time, not both")
    if at is not None and (isinstance(at, bool) or not math.isfinite(at) or at <= 0):
        raise UnsafeName(f"invalid valid_after_time {at!r}")
    return (
        None if after is None else _positive("valid_after_seconds", after),
        at,
        None if until is None else _positive("valid_until_seconds", until),
    )


def max_run(request: CreateRequest) -> int:
    """A flex-start create's run length in seconds, checked (UnsafeName when missing)."""
    return _positive("max_run_seconds", request.max_run_seconds)


def queueing_policy(request: CreateRequest, now: float) -> dict[str, Any] | None:
    """The API's ``QueueingPolicy`` JSON for the request, or None when it has no window.

    One start or one end maps onto its own field (``validAfterDuration``, ``validAfterTime``,
    ``validUntilDuration``). A start *and* an end are one ``validInterval {startTime,
    endTime}``, as ``gcloud ... queued-resources create`` sends them (its SetValidInterval
    hook: the policy's fields are one oneof in the API). The end of a window with a start is
    ``valid_until`` after that start: the file's "a 6h window from 20:00". ``now`` (the time
    the request is sent) turns a relative start into an absolute one; nothing else uses it."""
    after, at, until = window(request)
    if after is None and at is None:
        return None if until is None else {"validUntilDuration": f"{until}s"}
    if until is None:
        return (
            {"validAfterDuration": f"{after}s"}
            if after is not None
            else {"validAfterTime": api_time(at or 0.0)}
        )
    start = at if at is not None else now + (after or 0)
    return {"validInterval": {"startTime": api_time(start), "endTime": api_time(start + until)}}
