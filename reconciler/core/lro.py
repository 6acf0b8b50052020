"""Which remembered long-running operations the world has settled, as a pure rule.

A create's or delete's operation is remembered (``core.memory.PendingOperation``) so that the
next create or delete of the same slot reads it back instead of resending blindly
(``runtime.lro``). Once the outcome shows in the world there is nothing left to read:

- a create is settled when its request is listed (in whatever state: a FAILED one speaks for
  itself);
- a delete is settled when its request is gone from a zone that was fully observed.

An operation in a zone that was not observed stays remembered (unknown is not gone). Pure: no
I/O, no clock.
"""

from __future__ import annotations

from reconciler.core import memory as mem
from reconciler.model.observed import Observation


def settle(memory: mem.Memory, observation: Observation) -> mem.Memory:
    """``memory`` without the operations whose outcome ``observation`` shows."""
    for key, op in memory.operations.items():
        if not observation.knows(op.zone):
            continue
        present = observation.request(op.zone, op.slot) is not None
        if (op.kind == "create" and present) or (op.kind == "delete" and not present):
            memory = mem.forget_operation(memory, key)
    return memory
