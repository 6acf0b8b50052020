"""Moments in time as users write them in desired.yaml, and as the API and state store them.

In the file a moment is ISO 8601 *with* an offset or ``Z`` (``2026-12-24T20:00:00+01:00``,
``2026-12-24T19:00:00Z``): a time without one would mean different instants on the laptop and
on the VM running the controller, so it is refused with a message saying how to fix it.
Internally a moment is epoch seconds (UTC); the API and state files get RFC 3339 in UTC
(``...Z``); ``status`` shows local time. Pure: no clock (``now`` is always an argument).
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Final

_EXAMPLE: Final = "2026-12-24T20:00:00+01:00 or 2026-12-24T19:00:00Z"
_SHAPE: Final = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")
#: ``fromisoformat``'s own words that read well as they are.
_PLAIN: Final = ("month must be", "day is out of range", "hour must be", "minute must be",
                 "second must be", "year ")  # fmt: skip
#: The moments the controller can compute with: every later step (RFC 3339 text for the API
#: and the state files, local time for ``status``, durations added to it) stays inside
#: ``datetime``'s years 1 to 9999 from here.
EARLIEST: Final = _dt.datetime(1970, 1, 2, tzinfo=_dt.UTC).timestamp()
LATEST: Final = _dt.datetime(9998, 12, 31, tzinfo=_dt.UTC).timestamp()


def parse_instant(value: object) -> float:
    """Epoch seconds of an ISO 8601 moment with an offset; ValueError (user-facing) otherwise.

    Accepts the text, or the ``datetime`` YAML makes of an unquoted timestamp."""
    if isinstance(value, int | float):  # bool is an int too
        raise ValueError(f"expected a time like {_EXAMPLE}, got {value!r}")
    if isinstance(value, _dt.datetime):
        moment = value
    elif isinstance(value, _dt.date):
        raise ValueError(f"{value.isoformat()} is a date without a time: write e.g. {_EXAMPLE}")
    elif isinstance(value, str):
        text = value.strip()
        try:
            moment = _dt.datetime.fromisoformat(text.replace("z", "Z"))
        except ValueError as e:
            raise ValueError(_not_a_time(text, str(e))) from None
        if "T" not in text.upper() and " " not in text:
            raise ValueError(f"{text} is a date without a time: write e.g. {_EXAMPLE}")
    else:
        raise ValueError(f"expected a time like {_EXAMPLE}, got {value!r}")
    if moment.tzinfo is None or moment.utcoffset() is None:
        shown = moment.isoformat() if isinstance(value, _dt.datetime) else str(value).strip()
        raise ValueError(
            f"{shown} has no UTC offset, so it would mean a different moment on every "
            f"machine: add one, e.g. {shown}+01:00 or {shown}Z"
        )
    stamp = moment.timestamp()
    if not EARLIEST <= stamp <= LATEST:
        shown = moment.isoformat() if isinstance(value, _dt.datetime) else str(value).strip()
        raise ValueError(
            f"{shown} is outside the years the controller can work with (1970 to 9998)"
        )
    return stamp


def _not_a_time(text: str, why: str) -> str:
    """The message for text ``fromisoformat`` refused: what is impossible about a time that has
    the right shape (month 13, February 30, second 60, offset +99:00), else what is expected."""
    if _SHAPE.match(text):
        if why.startswith("offset must be"):
            why = "a UTC offset must be less than 24 hours"
        elif not any(why.startswith(w) for w in _PLAIN):
            why = "not a real date and time"
        return f"{text} is not a valid time ({why}): write e.g. {_EXAMPLE}"
    return f"expected an ISO 8601 time like {_EXAMPLE}, got {text!r}"


def utc_text(moment: float | _dt.datetime, *, milliseconds: bool = False) -> str:
    """RFC 3339 in UTC, as the API, the state files, the events and the logs write it:
    ``2026-12-24T19:00:00Z`` (``2026-12-24T19:00:00.123Z`` with ``milliseconds``). The one
    place that form is written. ``moment`` is epoch seconds or a ``datetime`` (a naive one is
    taken as local time, as ``datetime.astimezone`` does)."""
    if not isinstance(moment, _dt.datetime):
        moment = _dt.datetime.fromtimestamp(moment, _dt.UTC)
    timespec = "milliseconds" if milliseconds else "seconds"
    return moment.astimezone(_dt.UTC).isoformat(timespec=timespec).replace("+00:00", "Z")


def api_time(ts: float) -> str:
    """RFC 3339 in UTC with milliseconds, as gcloud sends times to the API."""
    return utc_text(ts, milliseconds=True)


def local_text(ts: float) -> str:
    """The moment in this machine's local time with its offset, for people: ``status``."""
    return _dt.datetime.fromtimestamp(ts).astimezone().isoformat(timespec="minutes")
