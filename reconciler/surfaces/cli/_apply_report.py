"""What an interrupted ``apply`` did: for each action it started, whether the request reached
the cloud, so Ctrl-C never leaves a person guessing whether a create went out.

``ActionReport`` listens to the controller's events (``EventLog.listeners``): an action's
``action.started``, then ``action.succeeded`` / ``action.failed`` (the cloud answered) or
``action.cancelled`` (stopped on the way: it may or may not have arrived). ``lines`` says it
one line per action, or that nothing was sent.

May: remember events and format lines. May not: print (``apply`` does), act.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

_KINDS: Final = ("action.started", "action.succeeded", "action.failed", "action.cancelled")


class ActionReport:
    def __init__(self) -> None:
        self.last: dict[tuple[str, str], Mapping[str, Any]] = {}

    def __call__(self, record: Mapping[str, Any]) -> None:
        if record.get("kind") in _KINDS:
            self.last[(str(record.get("action")), str(record.get("slot")))] = record

    def lines(self) -> list[str]:
        if not self.last:
            return ["interrupted before anything was sent: nothing changed in the cloud"]
        out = []
        for (action, slot), record in self.last.items():
            kind = record.get("kind")
            if kind == "action.succeeded":
                out.append(
                    f"{action} {slot}: sent, and the cloud accepted it "
                    f"({record.get('outcome') or 'done'}): it goes ahead without apply "
                    "(`tpu-reconciler status` shows it)"
                )
            elif kind == "action.failed":
                out.append(f"{action} {slot}: sent, and refused: {record.get('error')}")
            else:
                out.append(
                    f"{action} {slot}: interrupted while it was being sent: it may or may not "
                    "have reached the cloud (`tpu-reconciler plan` shows which; sending it "
                    "again is safe)"
                )
        return out
