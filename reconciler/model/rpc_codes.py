"""google.rpc.Code: the canonical status names and the numbers Google's error bodies carry.

One table for the controller (``adapters.cloud_errors`` classifies by it, ``core.capacity``
reads codes from history messages) and the emulator (which renders them). Values only.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

#: Status name -> code.
RPC_CODES: Final[Mapping[str, int]] = MappingProxyType(
    {
        "CANCELLED": 1,
        "UNKNOWN": 2,
        "INVALID_ARGUMENT": 3,
        "DEADLINE_EXCEEDED": 4,
        "NOT_FOUND": 5,
        "ALREADY_EXISTS": 6,
        "PERMISSION_DENIED": 7,
        "RESOURCE_EXHAUSTED": 8,
        "FAILED_PRECONDITION": 9,
        "ABORTED": 10,
        "OUT_OF_RANGE": 11,
        "UNIMPLEMENTED": 12,
        "INTERNAL": 13,
        "UNAVAILABLE": 14,
        "DATA_LOSS": 15,
        "UNAUTHENTICATED": 16,
    }
)
#: Code -> status name.
RPC_NAMES: Final[Mapping[int, str]] = MappingProxyType({v: k for k, v in RPC_CODES.items()})
