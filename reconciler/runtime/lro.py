"""Reading back the long-running operation of the last create or delete of a slot.

Purpose: when the planner asks again for a create (no QR seen) or a delete (the QR still
there) whose previous request started an operation, ``previous_outcome`` reads that operation
first, so the request is not resent blindly in a tight loop:

- still running: ``OperationPending`` (a temporary error: the action looks again after
  ``recheck`` seconds — the fast poll interval, at most ``RUNNING_DELAY`` — nothing sent);
- done with an error: that error classified like any other (``cloud_errors``): permanent ->
  the action is blocked with the cloud's message until the intent or the world changes;
  transient -> backoff; ALREADY_EXISTS / NOT_FOUND mean done, as always;
- done without error, or no longer known to the cloud: nothing to say — send again.

A failure to *read* the operation raises as it is: a transient one (the API answering 503)
keeps the operation remembered for the next try; on a permanent one (403, garbage) the
controller forgets it and resends, since it says nothing about the request itself.

May: call ``Cloud.get_operation``. May not: touch memory (the controller owns it) or decide
anything beyond the operation's own verdict.
"""

from __future__ import annotations

from typing import Final

from reconciler.adapters.cloud import Cloud, Outcome
from reconciler.adapters.cloud_errors import CloudFailure, Operation, classify
from reconciler.core.memory import PendingOperation
from reconciler.errors import OperationPending

#: The action kinds whose operations are remembered, and the operation kind each reads back.
KINDS: Final = {"create": "create", "delete": "delete", "replace": "delete"}
RUNNING_DELAY: Final = 5.0


async def previous_outcome(
    cloud: Cloud, pending: PendingOperation, recheck: float = RUNNING_DELAY
) -> CloudFailure | None:
    """The classified failure of ``pending``'s operation, or None when resending is right.
    Raises ``OperationPending`` (to look again in ``recheck`` seconds, never more than
    ``RUNNING_DELAY``) while it runs, and whatever reading it raised."""
    status = await cloud.get_operation(pending.name)
    if status is None or not status.done:
        if status is None:
            return None
        raise OperationPending(
            f"the {pending.kind} operation {pending.name.rsplit('/', 1)[-1]} has not finished",
            operation=pending.name,
            delay=min(recheck, RUNNING_DELAY),
        )
    if not status.failed:
        return None
    verdict = classify(
        Operation.CREATE if pending.kind == "create" else Operation.DELETE,
        code=status.error_code,
        message=status.error_message or "the operation failed",
    )
    return None if isinstance(verdict, Outcome) else verdict
