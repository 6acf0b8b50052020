"""Google's retry rule for rate limits and server errors, as a pure function.

Google's guidance for 429 and 5xx answers is truncated exponential backoff with jitter,
honouring ``Retry-After``. The rule here, per attempt ``n`` (1 for the first failure):

    window(n) = min(CAP, BASE * 2 ** (n - 1))     1, 2, 4, 8, 16, 32, 64, 120, 120, ... s
    delay(n)  = max(rand * window(n), Retry-After)   "full jitter": uniform in [0, window]

Why these numbers: a short burst of 429s leaves at most one window between its end and the
next attempt — after a 10 s burst about five attempts were made, so recovery waits at most
16 to 32 s; a storm that does not end settles at a mean wait of ``CAP / 2`` = 60 s, about one
attempt per minute, and full jitter keeps many controllers from retrying in step. A server's
``Retry-After`` is a floor (capped at ``RETRY_AFTER_CAP``, so a hostile header cannot park the
controller for a day).

The caller supplies ``rand`` in [0, 1), so this stays pure. What it governs is decided by
``governs``: 429, RESOURCE_EXHAUSTED and the 5xx family; every other transient failure keeps
the controller's own backoff (``core.memory.backoff_delay``).
"""

from __future__ import annotations

from typing import Final

BASE: Final = 1.0
CAP: Final = 120.0
RETRY_AFTER_CAP: Final = 3600.0
#: Google status names of 429 and 5xx answers (google.rpc.Code mapping of HTTP statuses).
RATE_OR_SERVER: Final = frozenset(
    {"RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED", "UNKNOWN", "DATA_LOSS"}
)


def governs(status: str | None, code: int | None) -> bool:
    """True for the failures Google's retry guidance covers: HTTP 429 / 5xx, or their status."""
    if status is not None and status.upper() in RATE_OR_SERVER:
        return True
    return code is not None and (code == 429 or 500 <= code <= 599)


def window(attempt: int) -> float:
    """The jitter window after the ``attempt``-th failure in a row (1-based)."""
    if attempt <= 0:
        return 0.0
    return min(CAP, BASE * 2.0 ** min(attempt - 1, 32))


def retry_delay(attempt: int, rand: float, retry_after: float | None = None) -> float:
    """Seconds to wait after the ``attempt``-th failure in a row; ``rand`` in [0, 1)."""
    delay = min(max(rand, 0.0), 1.0) * window(attempt)
    if retry_after is not None and retry_after > 0:
        delay = max(delay, min(float(retry_after), RETRY_AFTER_CAP))
    return delay
