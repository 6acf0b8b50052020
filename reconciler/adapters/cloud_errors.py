"""Failure classification shared by both cloud backends (gcloud and REST).

Purpose: turn what the cloud said — a Google status name (``PERMISSION_DENIED``), an HTTP code
(403) or a gRPC code (7), plus the cloud's own message — into retry intent:

- *done* (``Outcome.ALREADY``): the operation's goal already holds — ALREADY_EXISTS on create,
  NOT_FOUND on delete, NOT_FOUND on get (the caller reports "absent");
- *transient* (``TransientCloudError`` with a suggested delay): RESOURCE_EXHAUSTED / 429 (quota
  or rate: the longest delay), UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL, ABORTED, and anything
  unknown; also FAILED_PRECONDITION (a QR that cannot be deleted *yet*, e.g. while it
  provisions, heals as its state moves) and UNAUTHENTICATED (heals once the user logs in again,
  without restarting the controller);
- *quota* (``QuotaExceeded``, permanent): RESOURCE_EXHAUSTED on a create whose text names a
  quota ("Quota '...' exhausted. Limit: 64 in zone ..."): the planner sends it again only
  when the use under that quota drops or the intent changes (``core.quota``);
- *permanent* (``PermanentCloudError``): PERMISSION_DENIED, INVALID_ARGUMENT, OUT_OF_RANGE,
  UNIMPLEMENTED, NOT_FOUND / ALREADY_EXISTS outside the *done* cases, and a queue closed to the
  project ("no permission to submit into this queue" never heals), whatever status it came with.

The cloud's own message is kept in the error for the user. May: pure computation. May not: do
I/O, log, or know which backend produced the failure.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, Final

from reconciler.adapters.cloud import Outcome
from reconciler.core.capacity import CLOSED_QUEUE_FRAGMENTS
from reconciler.errors import PermanentCloudError, QuotaExceeded, TransientCloudError
from reconciler.model.quotas import parse_refusal
from reconciler.model.rpc_codes import RPC_NAMES, status_of_http

CloudFailure = TransientCloudError | PermanentCloudError


class Operation(StrEnum):
    """What the caller was doing; decides which failures mean *done*."""

    CREATE = "create"
    DELETE = "delete"
    GET = "get"
    LIST = "list"
    OTHER = "other"


#: Suggested delays (seconds) before retrying.
QUOTA_DELAY: Final = 60.0
DEFAULT_DELAY: Final = 10.0
PRECONDITION_DELAY: Final = 30.0
AUTH_DELAY: Final = 60.0

#: A gRPC code's status name (a bare HTTP status's is ``model.rpc_codes.status_of_http``, the
#: table the emulator renders by too).
GRPC_STATUS: Final = RPC_NAMES

_PERMANENT: Final = frozenset(
    {"PERMISSION_DENIED", "INVALID_ARGUMENT", "OUT_OF_RANGE", "UNIMPLEMENTED"}
)
_QUOTA: Final = frozenset({"RESOURCE_EXHAUSTED"})
#: Message fragments that never heal by retrying, whatever status they arrive with (the
#: capacity history marks such a zone "queue closed" from the same list).
_CLOSED_QUEUE: Final = CLOSED_QUEUE_FRAGMENTS


def status_for(status: str | None, code: int | None, message: str = "") -> str | None:
    """The canonical status name from whatever was given (status wins over code)."""
    if status:
        return status.strip().upper().replace(" ", "_")
    if code is None:
        return None
    if code >= 100:
        return status_of_http(code, message)
    return GRPC_STATUS.get(code)


def classify(
    operation: Operation,
    *,
    status: str | None = None,
    code: int | None = None,
    message: str = "",
    retry_after: float | None = None,
) -> Outcome | CloudFailure:
    """``Outcome.ALREADY`` when the failure means the goal already holds, else the error to
    raise. ``retry_after`` (a server's Retry-After) lengthens the suggested delay."""
    name = status_for(status, code, message)
    text = message.strip()
    if operation is Operation.CREATE and name == "ALREADY_EXISTS":
        return Outcome.ALREADY
    if operation in (Operation.DELETE, Operation.GET) and name == "NOT_FOUND":
        return Outcome.ALREADY
    shown = _shown(name, code, text)
    lowered = text.lower()
    if any(fragment in lowered for fragment in _CLOSED_QUEUE):
        return PermanentCloudError(shown, status=name, code=code)
    if name in _PERMANENT or name in ("NOT_FOUND", "ALREADY_EXISTS"):
        return PermanentCloudError(shown, status=name, code=code)
    refusal = parse_refusal(text) if name in _QUOTA and operation is Operation.CREATE else None
    if refusal is not None:  # a named quota, not a rate limit: no retry until use drops
        return QuotaExceeded(
            shown,
            quota_id=refusal.quota_id,
            limit=refusal.limit,
            scope=refusal.scope,
            place=refusal.place,
            status=name,
            code=code,
        )
    if name in _QUOTA:
        delay = QUOTA_DELAY
    elif name == "FAILED_PRECONDITION":
        delay = PRECONDITION_DELAY
    elif name == "UNAUTHENTICATED":
        delay = AUTH_DELAY
    else:
        delay = DEFAULT_DELAY
    if retry_after is not None and retry_after > delay:
        delay = float(retry_after)
    return TransientCloudError(shown, delay=delay, status=name, code=code, retry_after=retry_after)


def check(
    operation: Operation,
    *,
    status: str | None = None,
    code: int | None = None,
    message: str = "",
    retry_after: float | None = None,
) -> Outcome:
    """Like ``classify`` but raises the error; returns ``Outcome.ALREADY`` for *done*."""
    verdict = classify(
        operation, status=status, code=code, message=message, retry_after=retry_after
    )
    if isinstance(verdict, Outcome):
        return verdict
    raise verdict


def parse_error_body(body: str | bytes) -> tuple[str | None, int | None, str]:
    """``(status, code, message)`` from Google's ``{"error": {...}}`` JSON; for anything else
    ``(None, None, <the text, trimmed>)``. Never raises."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        data: Any = json.loads(text)
    except ValueError:
        return None, None, _trim(text)
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, list) and error and isinstance(error[0], dict):
        error = error[0]  # some proxies wrap it in a list
    if not isinstance(error, dict):
        return None, None, _trim(text)
    status = error.get("status")
    code = error.get("code")
    message = error.get("message")
    return (
        status if isinstance(status, str) and status else None,
        code if isinstance(code, int) and not isinstance(code, bool) else None,
        message if isinstance(message, str) else _trim(text),
    )


def classify_body(
    operation: Operation,
    http_code: int,
    body: str | bytes,
    *,
    retry_after: float | None = None,
) -> Outcome | CloudFailure:
    """Classify an HTTP error response (REST backend, or a body gcloud echoed)."""
    status, code, message = parse_error_body(body)
    return classify(
        operation,
        status=status,
        code=code if code is not None else http_code,
        message=message,
        retry_after=retry_after,
    )


def _shown(name: str | None, code: int | None, text: str) -> str:
    if not text:
        return name or (f"HTTP {code}" if code is not None else "unknown cloud error")
    if name and not text.upper().startswith(name):
        return f"{name}: {text}"
    return text


def _trim(text: str, limit: int = 500) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
