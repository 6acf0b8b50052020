"""What changed since the controller's last pass, told once each as an event: each capacity
request's state (``qr.state``: the API's word, with the neutral state beside it), each node's
health signals, suspension and the delete guard.

May: remember the last pass's values and write events. May not: decide or act (the planner
decides; a health signal is shown and never acted on), read the cloud, write other state.
"""

from __future__ import annotations

from reconciler.core import node_health
from reconciler.core.plan import Plan
from reconciler.model.observed import Observation
from reconciler.runtime.events import EventLog


class Transitions:
    """The last pass's values, and the events for what moved since (one controller owns one)."""

    def __init__(self, events: EventLog) -> None:
        self.events = events
        self.states: dict[tuple[str, str], str] = {}  # (zone, request) -> its API's word
        self.health: dict[tuple[str, str], tuple[str, ...]] = {}  # (zone, node) -> signals
        self.suspended = False
        self.guarded: str | None = None  # the fingerprint of the deletes the guard holds

    def observed(self, observation: Observation) -> None:
        """``qr.state`` for each request whose state moved (``after`` None: gone; ``api``
        and ``request``, its neutral state, beside the API's words) and ``node.health`` for
        each node whose signals appeared or changed. A request of a zone that did not answer
        is unseen, not gone: remembered until its zone answers."""
        seen = {r.key: r for r in observation.requests}
        states = {key: r.api_state for key, r in seen.items()}
        for key, state in states.items():
            before = self.states.get(key)
            if before != state:
                r = seen[key]
                self.events.emit(
                    "qr.state",
                    slot=key[1],
                    zone=key[0],
                    before=before,
                    after=state,
                    api=r.api,
                    request=r.state.value,
                )
        for key, before in self.states.items():
            if key in states:
                continue
            if observation.knows(key[0]):
                self.events.emit("qr.state", slot=key[1], zone=key[0], before=before, after=None)
            else:
                states[key] = before
        self.states = states
        health = {n.key: node_health.signals(n) for n in observation.nodes}
        for key, found in health.items():
            if found != self.health.get(key, ()):
                self.events.emit("node.health", slot=key[1], zone=key[0], signals=list(found))
        self.health = health

    def decided(self, decided: Plan) -> None:
        """``controller.suspended`` / ``controller.resumed`` as suspension flips, and
        ``guard.held`` once for each new set of deletes the guard holds."""
        if decided.suspended != self.suspended:
            self.suspended = decided.suspended
            self.events.emit("controller.suspended" if decided.suspended else "controller.resumed")
        if decided.guard is not None and decided.guard.fingerprint != self.guarded:
            self.events.emit(
                "guard.held",
                deletes=list(decided.guard.deletes),
                fingerprint=decided.guard.fingerprint,
            )
        self.guarded = decided.guard.fingerprint if decided.guard else None
