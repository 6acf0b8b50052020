"""Per-key runs of failures, one limiter for the controller's actions and its observation
(controller-runtime's per-item rate limiter): when each key's current run of failures began,
how many it holds and the wait it asks for; a success forgets the key.

An action's key is its ``Action.key``: its failures and wait are also kept in memory
(``core.memory.record_failure``, saved, shown, planned with), so only the start of its run is
held here, handed to and taken back from the pure ``core.outcome``. The observation's key is
``OBSERVE``: its count and wait live here alone (``core.outcome.observe_wait`` is the rule,
``core.schedule.next_interval`` turns them into the next pass's time).

May: remember runs in this process. May not: decide a delay (``core.outcome`` does), write
state, emit events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from reconciler.core.outcome import observe_wait

#: The observation's key (an action's key always holds a ``:``).
OBSERVE: Final = "observe"


@dataclass(frozen=True, slots=True)
class Run:
    """A key's current run of failures."""

    since: float  # its first failure
    failures: int = 0  # counted here (the observation's); an action's are in memory
    delay: float = 0.0  # the wait it asks for
    retry: float | None = None  # the wait by Google's retry rule, when that governs


class Backoff:
    """The current run of failures of each key that is failing."""

    def __init__(self) -> None:
        self._runs: dict[str, Run] = {}

    def run(self, key: str) -> Run | None:
        return self._runs.get(key)

    def since(self, key: str) -> float | None:
        """When ``key``'s current run of failures began (None: it is not failing)."""
        run = self._runs.get(key)
        return run.since if run is not None else None

    def keep(self, key: str, since: float | None) -> None:
        """An action's outcome: its run goes on from ``since``, or ends (None)."""
        if since is None:
            self._runs.pop(key, None)
        else:
            self._runs[key] = Run(since)

    def failed(self, key: str, error: BaseException, now: float, rand: float) -> Run:
        """One more failure of ``key`` (the observation's), and the wait it asks for."""
        old = self._runs.get(key)
        since = old.since if old is not None else now
        failures = (old.failures if old is not None else 0) + 1
        delay, retry = observe_wait(error, failures, now - since, rand)
        self._runs[key] = run = Run(since, failures, delay, retry)
        return run

    def succeeded(self, key: str) -> None:
        self._runs.pop(key, None)
