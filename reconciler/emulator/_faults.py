"""Armed faults: which injected failure the next request meets.

Pure bookkeeping (no sleeping, no sockets): the server asks ``take`` once per API request and
serves what it returns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reconciler.emulator._scenario import Fault


@dataclass(slots=True)
class _Armed:
    fault: Fault
    remaining: int | None
    pattern: re.Pattern[str] | None


class FaultBook:
    def __init__(self) -> None:
        self._armed: list[_Armed] = []

    def add(self, fault: Fault) -> None:
        pattern = re.compile(fault.path) if fault.path else None
        self._armed.append(_Armed(fault, fault.count, pattern))

    def clear(self) -> None:
        self._armed.clear()

    def __len__(self) -> int:
        return len(self._armed)

    def take(self, method: str, path: str) -> Fault | None:
        """The oldest armed fault matching this request, counting it down."""
        for armed in self._armed:
            f = armed.fault
            if f.method and f.method.upper() != method.upper():
                continue
            if armed.pattern is not None and not armed.pattern.search(path):
                continue
            if armed.remaining is not None:
                armed.remaining -= 1
                if armed.remaining <= 0:
                    self._armed.remove(armed)
            return f
        return None
