"""Durations as users write them: ``30`` (seconds), ``"30s"``, ``"2m"``, ``"6h"``, ``"1d"``."""

from __future__ import annotations

import re
from typing import Final

_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_RE: Final = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([smhd]?)\s*$")
MAX_SECONDS: Final = 366 * 86400


def parse_duration(value: object) -> float:
    """Seconds as a float; raises ValueError with a user-facing message."""
    if isinstance(value, bool):
        raise ValueError("expected a duration like 30, '30s', '2m' or '6h', not a boolean")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (m := _RE.match(value)):
        seconds = float(m.group(1)) * _UNITS[m.group(2) or "s"]
    else:
        raise ValueError(f"expected a duration like 30, '30s', '2m' or '6h', got {value!r}")
    if not 0 < seconds <= MAX_SECONDS:
        raise ValueError(f"duration must be more than 0 and at most 366 days, got {value!r}")
    return seconds


def format_duration(seconds: float) -> str:
    """Compact human form: 45s, 3m, 2h5m, 1d3h."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m" + (f"{s % 60}s" if s % 60 and s < 600 else "")
    if s < 86400:
        return f"{s // 3600}h" + (f"{s % 3600 // 60}m" if s % 3600 // 60 else "")
    return f"{s // 86400}d" + (f"{s % 86400 // 3600}h" if s % 86400 // 3600 else "")


def duration_text(seconds: float) -> str:
    """Exactly ``seconds``, as a user would write it in desired.yaml: the largest unit that
    divides it (``365d``, ``90m``, ``30s``); ``parse_duration`` reads it back unchanged."""
    for unit, size in sorted(_UNITS.items(), key=lambda u: -u[1]):
        if seconds >= size and float(seconds) % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:.6f}".rstrip("0").rstrip(".") + "s"
