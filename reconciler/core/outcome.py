"""What an action's outcome does to memory and which event says so, as pure functions.

The controller runs each action as a task; when it ends, ``outcome`` turns (the action, its
result or error, memory, now, the first failure of the current run) into the new memory, the
event to write and the new first failure of the run. The controller only runs the action,
logs an internal error's traceback, writes the event and stores the memory; the policy is
here:

- a success forgets the action's failures (``core.memory.record_success``), counts a replaced
  dead request, records a finished setup step for its node instance, and a ``before_end`` run
  before its end in its attempt (``core.before_end.record_done``);
- a ``TemporaryError`` backs off: by Google's rule for a 429 / 5xx (``core.retry``, timed from
  the first failure of the run), by the operation's own short wait for ``OperationPending``
  (no failure: the operation is still running), else exponentially from the error's hint;
- a ``PermanentError`` blocks the action until its fingerprint (intent or world) changes;
  a ``QuotaExceeded`` also records the quota it named and the use then (``core.quota``);
- anything else is a bug, not the world: a transient failure with a 30 s hint, "internal
  error: ..." in its message.

``rand`` in [0, 1) is the caller's draw for the jitter of Google's rule, so this stays pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from reconciler.core import before_end, retry
from reconciler.core import memory as mem
from reconciler.core.plan import SETUP_KINDS, Action, Kind
from reconciler.errors import (
    OperationPending,
    PermanentError,
    QuotaExceeded,
    SetupFailed,
    TemporaryError,
    TransientCloudError,
)
from reconciler.model.quotas import Refusal

#: The hint of an internal error (a bug in the controller or an adapter): back off, say so.
INTERNAL_ERROR_HINT = 30.0


@dataclass(frozen=True)
class Event:
    """An event to write: its kind and fields (``slot`` among them)."""

    kind: str
    fields: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class Outcome:
    memory: mem.Memory
    event: Event
    #: the first failure of the action's current run of failures; None after a success
    failing_since: float | None


def outcome(
    action: Action,
    result: str | BaseException,
    memory: mem.Memory,
    now: float,
    failing_since: float | None,
    rand: float,
) -> Outcome:
    """The outcome of ``action``: ``result`` is its success's detail ("sent", "done", the
    cloud's outcome, ...) or the exception it raised."""
    if isinstance(result, TemporaryError | PermanentError):
        return failed(action, result, memory, now, failing_since, rand)
    if isinstance(result, BaseException):
        return crashed(action, result, memory, now, failing_since)
    return succeeded(action, result, memory, now)


def succeeded(action: Action, detail: str, memory: mem.Memory, now: float) -> Outcome:
    memory = mem.record_success(memory, action.key)
    if action.kind == Kind.REPLACE and not action.reshape:
        memory = mem.record_dead_replaced(memory, action.slot, now)
    elif action.kind in SETUP_KINDS and action.instance is not None:
        gen = action.generation if action.kind != Kind.TMUX else 0
        memory = mem.record_setup(memory, action.slot, action.kind.value, action.instance, gen)
    elif action.kind == Kind.BEFORE_END:  # once per attempt and end
        memory = before_end.record_done(memory, action, detail, now)
    event = _event("action.succeeded", slot=action.slot, action=action.kind.value, outcome=detail)
    return Outcome(memory, event, None)


def failed(
    action: Action,
    error: TemporaryError | PermanentError,
    memory: mem.Memory,
    now: float,
    failing_since: float | None,
    rand: float,
) -> Outcome:
    """The world said no: back off (transient) or block until the fingerprint changes."""
    permanent = isinstance(error, PermanentError)
    hint = error.delay if isinstance(error, TemporaryError) else 0.0
    old = memory.error(action.key)
    since = (now if failing_since is None else failing_since) if old else now
    exact = rule_delay(error, (old.failures if old else 0) + 1, now - since, rand)
    memory = mem.record_failure(
        memory,
        action.key,
        message=error.message,
        now=now,
        permanent=permanent,
        fingerprint=action.fingerprint,
        delay_hint=hint,
        detail=error.log_tail if isinstance(error, SetupFailed) else "",
        delay=exact,
        counts=not isinstance(error, OperationPending),  # still running: no failure
        quota=quota_refusal(action, error),
    )
    event = _event(
        "action.failed",
        slot=action.slot,
        action=action.kind.value,
        error=error.message,
        retry="permanent" if permanent else "transient",
        delay=None if permanent else memory.errors[action.key].not_before - now,
    )
    return Outcome(memory, event, since)


def quota_refusal(action: Action, error: BaseException) -> Refusal | None:
    """What a quota refusal said, with the chips the planner counted under that quota when
    the create was sent (``Action.chips_counted``) and the limit it knew for it
    (``Action.limits_known``): it goes again once fewer are counted or a higher limit is
    known."""
    if not isinstance(error, QuotaExceeded):
        return None
    counted, known = dict(action.chips_counted), dict(action.limits_known)
    place = error.place or (action.zone if error.scope in (None, "zone") else None)
    return Refusal(
        quota_id=error.quota_id,
        limit=error.limit,
        scope=error.scope or "zone",
        place=place,
        used=counted.get(place) if place is not None else None,
        known=known.get(place) if place is not None else None,
    )


def crashed(
    action: Action,
    error: BaseException,
    memory: mem.Memory,
    now: float,
    failing_since: float | None,
) -> Outcome:
    """A bug, not the world: keep the loop alive, back off, say so (the run's start stays)."""
    message = f"internal error: {error!r}"
    memory = mem.record_failure(
        memory,
        action.key,
        message=message,
        now=now,
        permanent=False,
        fingerprint=action.fingerprint,
        delay_hint=INTERNAL_ERROR_HINT,
    )
    event = _event(
        "action.failed",
        slot=action.slot,
        action=action.kind.value,
        error=message,
        retry="transient",
    )
    return Outcome(memory, event, failing_since)


def rule_delay(error: BaseException, attempt: int, elapsed: float, rand: float) -> float | None:
    """The wait Google's retry rule gives a 429 / 5xx failure, or an operation still running
    its own short one (None: the controller's exponential backoff applies)."""
    if isinstance(error, OperationPending):
        return error.delay  # looking again is cheap and sends nothing: no escalation
    if isinstance(error, TransientCloudError) and retry.governs(error.status, error.code):
        return retry.retry_delay(attempt, rand, error.retry_after, elapsed)
    return None


def observe_wait(
    error: BaseException, failures: int, elapsed: float, rand: float
) -> tuple[float, float | None]:
    """The wait after the ``failures``-th failed observation in a row, going on for ``elapsed``
    seconds: ``(delay, retry)``. ``retry`` is Google's rule for a 429 / 5xx (at least
    ``retry.OBSERVE_FLOOR``), None otherwise; ``delay`` is that wait, else the error's own
    hint (60 s for a permanent error), which ``core.schedule.next_interval`` escalates."""
    wait = rule_delay(error, failures, elapsed, rand)
    if wait is not None:
        wait = max(retry.OBSERVE_FLOOR, wait)
        return wait, wait
    return (error.delay if isinstance(error, TemporaryError) else 60.0), None


def _event(kind: str, **fields: object) -> Event:
    return Event(kind, MappingProxyType(fields))
