"""Requests the planner asks the cloud to carry out, as plain values (no I/O).

Kept in ``model`` so that ``core`` can build them and ``adapters`` can execute them without
either importing the other. A ``CreateRequest`` says what capacity to ask for, in neutral
terms; each API's adapter encodes it in its own wire format (the TPU API's queued resource:
``adapters/tpu_api_body.py``) and checks every name on the way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from reconciler.errors import UnsafeName
from reconciler.model.capacity import DEFAULT_API


@dataclass(frozen=True, slots=True)
class CreateRequest:
    """Everything needed to ask ``api`` for one slot's capacity: ``slices`` nodes of shape
    ``accelerator`` in ``zone`` (one node named like the request, or ``<name>-0 ...``)."""

    name: str
    zone: str
    accelerator: str  # one slice's shape, e.g. "v6e-8"
    image: str  # the software image its nodes boot (TPU API: runtime version; else a boot image)
    mode: str  # "spot" | "on-demand" | "reserved" | "flex-start"
    network: str | None = None
    subnetwork: str | None = None
    valid_until_seconds: int | None = None  # how long it may wait for capacity
    internal_ips: bool = False
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    valid_after_seconds: int | None = None  # start_after: relative to the create
    valid_after_time: float | None = None  # start_at: epoch seconds
    max_run_seconds: int | None = None  # how long it may run once held (flex-start)
    slices: int = 1  # > 1: a multislice of this many nodes <name>-0 ... (same shape)
    api: str = DEFAULT_API  # which API holds it ("tpu": the Cloud TPU API; "compute")
    #: one slice's shape as the file resolved it: its hosts' machine type (None: the API
    #: picks it from the accelerator, as the TPU API does), chips per side, hosts (VMs)
    machine_type: str | None = None
    topology: str = ""
    hosts: int = 0
    #: ``setup.at_boot``: the text its nodes run on every boot (``model/boot_script.py``);
    #: filled when the create is sent (the scripts are read then), never a secret
    startup_script: str | None = None


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
