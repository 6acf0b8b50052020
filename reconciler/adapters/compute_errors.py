"""Compute Engine's refusals read as retry intent: its error envelope names a *reason*
(``alreadyExists``, ``notFound``, ``quotaExceeded``, ...) rather than a Google status, and a
capacity or quota failure can come back at once as well as in an operation.

``classify_compute`` is the Compute Engine cloud's classifier for an HTTP error answer
(``google_http.GoogleSession``): a quota refusal (reason ``quotaExceeded`` or the words
``QUOTA_EXCEEDED`` / ``Quota '...' exceeded``) is RESOURCE_EXHAUSTED, so a create becomes
``QuotaExceeded`` and the slot waits for quota; a stockout (``ZONE_RESOURCE_POOL_EXHAUSTED``
and kin) is UNAVAILABLE, transient: the create is sent again later and a race goes on
elsewhere; everything else is the shared rule of ``adapters/cloud_errors.py`` on the HTTP
status (409 ``alreadyExists`` on a create and 404 on a delete mean done; 400 and 403 —
"not allowed to use the machine type" — are permanent, shown in the cloud's words).

May: pure computation. May not: do I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from reconciler.adapters.cloud import Outcome
from reconciler.adapters.cloud_errors import (
    CloudFailure,
    Operation,
    classify,
    parse_error_body,
)
from reconciler.adapters.compute_parse import QUOTA_CODE, STOCKOUT_CODES

_QUOTA_WORDS: Final = re.compile(r"\bQUOTA_EXCEEDED\b|[Qq]uota '[^']+' exceeded")


def reasons(body: bytes | str) -> tuple[str, ...]:
    """The ``errors[].reason`` words of Google's envelope (none when it is not one)."""
    try:
        data: Any = json.loads(body)
    except ValueError:
        return ()
    error = data.get("error") if isinstance(data, dict) else None
    errors = error.get("errors") if isinstance(error, dict) else None
    if not isinstance(errors, list):
        return ()
    return tuple(str(e["reason"]) for e in errors if isinstance(e, dict) and e.get("reason"))


def classify_compute(
    operation: Operation, http: int, body: bytes, retry_after: float | None
) -> Outcome | CloudFailure:
    """``Outcome.ALREADY`` or the error an HTTP error answer of Compute Engine means."""
    status, code, message = parse_error_body(body)
    why = reasons(body)
    code = code if code is not None else http
    if "quotaExceeded" in why or QUOTA_CODE in why or _QUOTA_WORDS.search(message):
        status = "RESOURCE_EXHAUSTED"
    elif any(w in STOCKOUT_CODES for w in why) or any(w in message for w in STOCKOUT_CODES):
        status, code = "UNAVAILABLE", 503
    elif "rateLimitExceeded" in why or "userRateLimitExceeded" in why:
        status = "RESOURCE_EXHAUSTED"
    return classify(operation, status=status, code=code, message=message, retry_after=retry_after)


__all__ = ["classify_compute", "reasons"]
