"""Stamps read back from the state files and the API, as epoch seconds.

The snapshot, the events and the API carry moments as RFC 3339 text (``2026-12-01T08:41:29Z``:
``model/times.utc_text`` writes them so). ``epoch(stamp)`` reads one back. That exact form is
read with integer arithmetic: ``status`` reads a stamp for every row and need not import
``datetime`` (its pure-Python module costs more than the arithmetic for all 1,000 rows). Any
other form (a fraction, an offset, a space for the ``T``) goes to ``datetime.fromisoformat``,
so the result is always what ``datetime.fromisoformat(stamp).timestamp()`` says, ``Z`` read
as UTC; ``tests/unit/test_stamps.py`` holds the two to the same answer.

Pure: no clock, no I/O.
"""

from __future__ import annotations

_DAYS_IN_MONTH = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_DAYS_BEFORE_MONTH = (0, 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)


def _is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _days_since_epoch(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to the given (proleptic Gregorian) date."""
    y = year - 1
    before_year = y * 365 + y // 4 - y // 100 + y // 400  # days from 0001-01-01
    leap_day = 1 if month > 2 and _is_leap(year) else 0
    return before_year + _DAYS_BEFORE_MONTH[month] + leap_day + day - 1 - 719162


def _plain_utc(stamp: str) -> float | None:
    """``YYYY-MM-DDTHH:MM:SSZ`` as epoch seconds; None for anything else."""
    if (
        len(stamp) != 20
        or stamp[19] != "Z"
        or stamp[4] != "-"
        or stamp[7] != "-"
        or stamp[10] != "T"
        or stamp[13] != ":"
        or stamp[16] != ":"
    ):
        return None
    digits = stamp[0:4] + stamp[5:7] + stamp[8:10] + stamp[11:13] + stamp[14:16] + stamp[17:19]
    if not (digits.isascii() and digits.isdigit()):
        return None
    year, month, day = int(stamp[0:4]), int(stamp[5:7]), int(stamp[8:10])
    hour, minute, second = int(stamp[11:13]), int(stamp[14:16]), int(stamp[17:19])
    if not (year >= 1 and 1 <= month <= 12 and hour < 24 and minute < 60 and second < 60):
        return None
    if not 1 <= day <= _DAYS_IN_MONTH[month] + (month == 2 and _is_leap(year)):
        return None
    days = _days_since_epoch(year, month, day)
    return float(days * 86400 + hour * 3600 + minute * 60 + second)


def epoch(stamp: str) -> float:
    """Epoch seconds of an ISO 8601 ``stamp`` (``Z`` or an offset; a stamp without one is
    read as local time, as ``datetime`` does); ValueError when it is not one."""
    plain = _plain_utc(stamp)
    if plain is not None:
        return plain
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def epoch_or_none(value: object) -> float | None:
    """``epoch(value)`` for a stamp; None for anything else (not a str, empty, not a moment):
    what a reader of a snapshot or an event does with a field it cannot trust."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return epoch(value)
    except ValueError:
        return None
