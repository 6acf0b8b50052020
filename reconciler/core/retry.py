"""Google's retry rule for rate limits and server errors, as a pure function.

Google's guidance for 429 and 5xx answers is truncated exponential backoff with jitter,
honouring ``Retry-After``. The rule here, after the ``n``-th failure in a row (1-based), with
the failures going on for ``elapsed`` seconds so far:

    window(n, elapsed) = min(CAP, BASE * 2 ** (n - 1), max(BASE, elapsed))
    delay              = max(rand * window, Retry-After)      "full jitter": uniform in [0, w]

Why these numbers: full jitter alone lets a run of small draws pile up attempts, and a 10 s
burst could leave a two-minute window behind it; truncating the window by the outage's age as
well means the wait after a burst of ``B`` seconds is at most ``B`` (at most ~30 s after a
30 s burst, a few seconds after a short one). A storm that does not end reaches the ``CAP``
after two minutes and settles at a mean wait of ``CAP / 2`` = 60 s, about one attempt per
minute; jitter keeps many controllers from retrying in step. A server's ``Retry-After`` is a
floor (capped at ``RETRY_AFTER_CAP``, so a hostile header cannot park the controller for a
day).

A failed observation waits at least ``OBSERVE_FLOOR`` (5 s) whatever the draw (the
controller applies it); a create or delete may be retried sooner. The caller supplies
``rand`` in [0, 1), so this stays pure. What it governs is decided by ``governs``: 429,
RESOURCE_EXHAUSTED and the 5xx family; every other transient failure keeps
the controller's own backoff (``core.memory.backoff_delay``).
"""

from __future__ import annotations

from typing import Final

from reconciler.model.rpc_codes import HTTP_OF_STATUS

BASE: Final = 1.0
CAP: Final = 120.0
RETRY_AFTER_CAP: Final = 3600.0
#: A failed *observation* (two list calls) is not retried sooner than this: the world seldom
#: changes faster, and the controller never polls a failing API in a tight loop.
OBSERVE_FLOOR: Final = 5.0
#: Google status names of 429 and 5xx answers (``model.rpc_codes``), but UNIMPLEMENTED (501:
#: a method the API does not have, permanent).
RATE_OR_SERVER: Final = frozenset(
    name
    for name, http in HTTP_OF_STATUS.items()
    if (http == 429 or http >= 500) and name != "UNIMPLEMENTED"
)


def governs(status: str | None, code: int | None) -> bool:
    """True for the failures Google's retry guidance covers: HTTP 429 / 5xx, or their status."""
    if status is not None and status.upper() in RATE_OR_SERVER:
        return True
    return code is not None and (code == 429 or 500 <= code <= 599)


def window(attempt: int, elapsed: float | None = None) -> float:
    """The jitter window after the ``attempt``-th failure in a row (1-based), the failures
    having gone on for ``elapsed`` seconds (None: not known, no truncation by age)."""
    if attempt <= 0:
        return 0.0
    w = min(CAP, BASE * 2.0 ** min(attempt - 1, 32))
    if elapsed is not None:
        w = min(w, max(BASE, elapsed))
    return w


def retry_delay(
    attempt: int, rand: float, retry_after: float | None = None, elapsed: float | None = None
) -> float:
    """Seconds to wait after the ``attempt``-th failure in a row; ``rand`` in [0, 1)."""
    delay = min(max(rand, 0.0), 1.0) * window(attempt, elapsed)
    if retry_after is not None and retry_after > 0:
        delay = max(delay, min(float(retry_after), RETRY_AFTER_CAP))
    return delay
