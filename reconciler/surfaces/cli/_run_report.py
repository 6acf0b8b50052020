"""What the foreground ``run`` says on stderr while it runs: the desired file's problems as they
happen, one line each, and the libraries kept quiet.

The controller tells the event log when the file goes missing or invalid (``desired.invalid``,
once per new set of errors, never once per pass) and when it is valid again
(``desired.loaded`` / ``desired.valid``); ``IntentReport`` listens to those events and turns
each into one line, so a person running ``run`` in a terminal sees at once what the event log
records. ``quiet_libraries`` keeps asyncssh's per-connection and per-channel INFO lines and
httpx's per-request ones out of the terminal (and the journal) unless ``-v``.

May: format lines and set library log levels. May not: print (``run`` prints what ``line``
returns), read files.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

#: Loggers that speak per connection, channel or request: WARNING unless ``-v``.
CHATTY: Final = ("asyncssh", "httpx", "httpcore")


def quiet_libraries(verbose: int) -> None:
    level = logging.NOTSET if verbose else logging.WARNING
    for name in CHATTY:
        logging.getLogger(name).setLevel(level)


def _errors_text(errors: Sequence[str]) -> str:
    first = " ".join(str(errors[0]).split()) if errors else "unknown error"
    more = len(errors) - 1
    return first + (f" (+{more} more: tpu-reconciler validate lists them)" if more > 0 else "")


class IntentReport:
    """An event listener (``EventLog.listeners``) that hands ``say`` one line per change of
    the desired file's health: missing, invalid (with the first ``file:line:col``), valid
    again."""

    def __init__(self, path: str, say: Callable[[str], None]) -> None:
        self.path = path
        self.say = say
        self.broken = False

    def __call__(self, record: Mapping[str, Any]) -> None:
        line = self.line(record)
        if line is not None:
            self.say(line)

    def line(self, record: Mapping[str, Any]) -> str | None:
        kind = record.get("kind")
        if kind == "desired.invalid":
            errors = [str(e) for e in record.get("errors") or ()]
            self.broken = True
            kept = (
                "the last valid intent stays in force"
                if record.get("in_force")
                else "nothing acts until it is valid"
            )
            if any(": file not found" in e for e in errors):
                return f"{self.path} is missing ({kept}); waiting for it (tpu-reconciler init)"
            return f"{self.path} is invalid ({kept}): {_errors_text(errors)}"
        if kind in ("desired.loaded", "desired.valid") and self.broken:
            self.broken = False
            slots = record.get("slots")
            count = f" ({slots} slot{'' if slots == 1 else 's'})" if isinstance(slots, int) else ""
            return f"{self.path} is valid again{count}: acting on it"
        return None
