"""google.rpc.Code: the canonical status names, the numbers Google's error bodies carry, and
the HTTP status each travels with (Google's API error model, cloud.google.com/apis/design/errors).

One table for the controller (``adapters.cloud_errors`` reads a status name from a failure and
turns it into retry intent; ``core.capacity`` reads codes from history messages) and the
emulator (which renders them), so both sides read an HTTP status the same way. Values only.
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

#: Status name -> the HTTP status Google serves it with (several names share one status).
HTTP_OF_STATUS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "INVALID_ARGUMENT": 400,
        "FAILED_PRECONDITION": 400,
        "OUT_OF_RANGE": 400,
        "UNAUTHENTICATED": 401,
        "PERMISSION_DENIED": 403,
        "NOT_FOUND": 404,
        "ALREADY_EXISTS": 409,
        "ABORTED": 409,
        "RESOURCE_EXHAUSTED": 429,
        "CANCELLED": 499,
        "INTERNAL": 500,
        "UNKNOWN": 500,
        "DATA_LOSS": 500,
        "UNIMPLEMENTED": 501,
        "UNAVAILABLE": 503,
        "DEADLINE_EXCEEDED": 504,
    }
)
#: A bare HTTP status (an answer whose body names no status) -> the status name it stands for.
#: 409 is ABORTED (a concurrent change: retried) unless its message says the resource already
#: exists (``status_of_http``); 412 is Compute Engine's ``conditionNotMet`` (a stale
#: fingerprint), FAILED_PRECONDITION; 502 is a proxy's UNAVAILABLE.
STATUS_OF_HTTP: Final[Mapping[int, str]] = MappingProxyType(
    {
        400: "INVALID_ARGUMENT",
        401: "UNAUTHENTICATED",
        403: "PERMISSION_DENIED",
        404: "NOT_FOUND",
        409: "ABORTED",
        412: "FAILED_PRECONDITION",
        429: "RESOURCE_EXHAUSTED",
        499: "CANCELLED",
        500: "INTERNAL",
        501: "UNIMPLEMENTED",
        502: "UNAVAILABLE",
        503: "UNAVAILABLE",
        504: "DEADLINE_EXCEEDED",
    }
)


def status_of_http(code: int, message: str = "") -> str | None:
    """The status name a bare HTTP status stands for: ``STATUS_OF_HTTP``, with a 409 whose
    message says "already exists" read as ALREADY_EXISTS and any other 5xx as INTERNAL; None
    for a status Google's model does not name."""
    if code == 409 and "already exist" in message.lower():
        return "ALREADY_EXISTS"
    return STATUS_OF_HTTP.get(code, "INTERNAL" if 500 <= code <= 599 else None)
