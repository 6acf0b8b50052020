"""Requests the planner asks the cloud to carry out, as plain values (no I/O).

Kept in ``model`` so that ``core`` can build them and ``adapters`` can execute them without
either importing the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class CreateRequest:
    """Everything needed to create one queued resource with one node of the same name."""

    name: str
    zone: str
    accelerator_type: str
    runtime_version: str
    mode: str  # "spot" | "on-demand" | "reserved"
    network: str | None = None
    subnetwork: str | None = None
    valid_until_seconds: int | None = None
    internal_ips: bool = False
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
