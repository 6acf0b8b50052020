"""Control over the controller: holds in time, and the guard on mass deletion, as pure rules.

The planner (``core.plan``) calls these; so may any other decision that releases a slot.

**Release rules** (``RELEASE_RULES``): each is ``rule(desired, observed, memory, now) ->
{slot name: Release}`` over the slots it concerns (so a rule skips, cheaply, the slots it has
nothing to say about: plan() runs over 10,000 slots). A slot with a ``Release`` is decided
``released`` by the planner: its request goes through the ordinary delete path (``- delete``
with the release's reason), a ``released`` notice is sent once, and the controller logs a
``slot.released`` event. A race candidate released by a rule counts against its group's
``count`` (the group does not race again to replace a hold that ran out). Built in:

- ``hold_until``: released once ``now`` reaches the time;
- ``hold_for``: released once the node instance has been ACTIVE that long (memory keeps the
  instance and since when, and that it served its ``hold_for``, so the release survives the
  request going away and controller restarts; a changed ``hold_for`` is a new intent).

- ``when_done``: a workload that succeeded with ``when_done: release`` in its current run
  (``core.workload.when_done_releases``), kept released until the run changes.

Another reason to release is one more function with the same signature appended to
``RELEASE_RULES``. When several rules answer for one slot, the first in the list wins.

**The guard** (``guard``): when one pass would delete more than ``settings.delete_guard``
ACTIVE TPUs, those deletes wait until the user confirms that exact set (``tpu-reconciler
confirm``; identities from ``delete_id``, the set's ``fingerprint``). A release that came due
under an intent already in force (a ``hold_until`` reached at its time) is the user's earlier
decision and does not count; one made due by the edit itself (``hold_until`` set in the past,
``hold_for`` shortened below the time served) counts like any other delete.

No clock (``now`` is an argument), no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Final

from reconciler.core.memory import Memory
from reconciler.core.workload import when_done_releases
from reconciler.model.capacity import RequestState
from reconciler.model.desired import NO_HOLD, Desired, SlotSpec
from reconciler.model.durations import format_duration
from reconciler.model.observed import Observation
from reconciler.model.times import utc_text

CONFIRM_COMMAND: Final = "tpu-reconciler confirm"
SUSPENDED_WHY: Final = "controller suspended (settings.suspend; `tpu-reconciler resume` to act)"
PAUSED_WHY: Final = "slot paused (paused: true); nothing is done for it"


@dataclass(frozen=True, slots=True)
class Release:
    """A slot a rule releases now: which rule, why (shown), and since when it was due."""

    rule: str  # "hold_for" | "hold_until" | "when_done"
    reason: str
    due: float


ReleaseRule = Callable[[Desired, Observation, Memory, float], Mapping[str, "Release"]]


def _active_instance(spec: SlotSpec, observed: Observation) -> str | None:
    request = observed.request(spec.zone, spec.name)
    if request is None or request.state != RequestState.ACTIVE:
        return None
    node = observed.node(spec.zone, request.node_name or spec.name)
    return node.instance if node is not None else None


def hold_until_rule(
    spec: SlotSpec, observed: Observation, memory: Memory, now: float
) -> Release | None:
    until = spec.hold.hold_until
    if until is None or now < until:
        return None
    return Release("hold_until", f"hold_until {utc_text(until)} reached", until)


def _hold_for_due(spec: SlotSpec, observed: Observation, memory: Memory) -> float | None:
    """When the current ACTIVE instance's hold_for runs out (None: not counting)."""
    hold_for = spec.hold.hold_for_seconds
    slot = memory.slot(spec.name)
    if hold_for is None or slot.active_since is None:
        return None
    if slot.served_for == hold_for or _active_instance(spec, observed) == slot.active_instance:
        return slot.active_since + hold_for
    return None


def hold_for_rule(
    spec: SlotSpec, observed: Observation, memory: Memory, now: float
) -> Release | None:
    hold_for = spec.hold.hold_for_seconds
    due = _hold_for_due(spec, observed, memory)
    if hold_for is None or due is None or now < due:
        return None
    return Release("hold_for", f"hold_for {format_duration(hold_for)} served", due)


def time_rules(
    desired: Desired, observed: Observation, memory: Memory, now: float
) -> dict[str, Release]:
    """``hold_until``, then ``hold_for``, for the slots that have either."""
    out: dict[str, Release] = {}
    for spec in desired.slots:
        if spec.hold is NO_HOLD:
            continue
        release = hold_until_rule(spec, observed, memory, now) or hold_for_rule(
            spec, observed, memory, now
        )
        if release is not None:
            out[spec.name] = release
    return out


def when_done_rule(
    desired: Desired, observed: Observation, memory: Memory, now: float
) -> dict[str, Release]:
    """A workload's ``when_done: release``, met (``core.workload`` decides when)."""
    done = when_done_releases(desired, observed, memory, now)
    return {name: Release("when_done", reason, due) for name, (reason, due) in done.items()}


#: Every rule that releases slots, in order; for one slot the first that answers wins.
RELEASE_RULES: Final[list[ReleaseRule]] = [time_rules, when_done_rule]


def release_reasons(
    desired: Desired, observed: Observation, memory: Memory, now: float
) -> dict[str, Release]:
    """Slot name -> the release that applies to it now, for every slot of the intent."""
    out: dict[str, Release] = {}
    for rule in RELEASE_RULES:
        for name, release in rule(desired, observed, memory, now).items():
            out.setdefault(name, release)
    return out


def releases_at(spec: SlotSpec, observed: Observation, memory: Memory) -> float | None:
    """When a held slot will be released by its time rules, if that is known yet."""
    if spec.hold is NO_HOLD:
        return None
    times = [t for t in (spec.hold.hold_until, _hold_for_due(spec, observed, memory)) if t]
    return min(times, default=None)


def start_window(spec: SlotSpec, now: float) -> tuple[int | None, float | None]:
    """(validAfter seconds, validAfter time) for a create sent at ``now``: a ``start_at``
    already past is left out (the request may be granted at once)."""
    start_at = spec.hold.start_at
    return spec.hold.start_after_seconds, start_at if start_at and start_at > now else None


def counts_for_guard(release: Release | None, memory: Memory) -> bool:
    """Whether a delete counts toward the guard: not when a time rule came due while the
    intent that asked for it was already in force (the user's own scheduled release)."""
    if release is None:
        return True
    since = memory.intent_since
    return since is None or release.due <= since


# --- the guard --------------------------------------------------------------------------------


def delete_id(zone: str, slot: str, instance: str | None) -> str:
    """Identity of one delete, ``zone/slot@uid`` (``Node.instance`` is ``node@uid``), for
    confirming it: a re-created node is a new delete."""
    return f"{zone}/{instance or slot + '@-'}"


def fingerprint(ids: Collection[str]) -> str:
    """The token naming exactly this set of deletes."""
    return hashlib.sha256("\n".join(sorted(set(ids))).encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Guard:
    """Deletes the guard withholds: their identities, the set's fingerprint, the limit."""

    limit: int
    deletes: tuple[str, ...]
    fingerprint: str

    @property
    def command(self) -> str:
        return f"{CONFIRM_COMMAND} {self.fingerprint}"

    @property
    def why(self) -> str:
        n = len(self.deletes)
        return (
            f"delete guard: this change deletes {n} ACTIVE TPU{'' if n == 1 else 's'}, more "
            f"than settings.delete_guard ({self.limit}); confirm with `{self.command}`"
        )


def guard(candidates: Collection[str], limit: int, confirmed: Collection[str]) -> Guard | None:
    """The deletes among ``candidates`` (``delete_id``s) that must wait, or None.

    Confirmed deletes go ahead; when the rest number more than ``limit``, all of the rest
    wait, named by one fingerprint (a different set needs its own confirmation)."""
    waiting = sorted(set(candidates) - set(confirmed))
    if len(waiting) <= limit:
        return None
    return Guard(limit, tuple(waiting), fingerprint(waiting))


#: How long a confirmation stays good: long enough for the passes that carry it out, short
#: enough that a forgotten one can never let a later, unrelated mass delete through.
CONFIRM_TTL: Final = 3600.0


def confirmation(deletes: Collection[str], *, digest: str | None, now: float) -> dict[str, object]:
    """The ``confirm.json`` document confirming exactly ``deletes``, bound to the intent it was
    shown under (the desired file's ``digest``) and good for ``CONFIRM_TTL`` seconds."""
    ids = sorted(set(deletes))
    return {
        "fingerprint": fingerprint(ids),
        "deletes": ids,
        "desired_digest": digest,
        "confirmed_at": utc_text(now),
        "expires_at": now + CONFIRM_TTL,
    }


def confirmed_deletes(document: object, *, digest: str | None, now: float) -> frozenset[str]:
    """The deletes a confirmation document (``confirm.json``) names, if it still holds: intact
    (its ``fingerprint`` is the one of its ``deletes``), made under the intent now in force
    (``desired_digest`` is ``digest``: any later edit supersedes it) and not expired. Anything
    else confirms nothing."""
    if not isinstance(document, Mapping):
        return frozenset()
    deletes = document.get("deletes")
    if not isinstance(deletes, list) or not all(isinstance(d, str) for d in deletes):
        return frozenset()
    if document.get("fingerprint") != fingerprint(deletes):
        return frozenset()
    if digest is None or document.get("desired_digest") != digest:
        return frozenset()
    expires = document.get("expires_at")
    if isinstance(expires, bool) or not isinstance(expires, int | float) or not now < expires:
        return frozenset()
    return frozenset(deletes)


def confirmation_spent(
    document: object, *, digest: str | None, now: float, present: Collection[str]
) -> bool:
    """Whether a confirmation document can go: it confirms nothing any more (superseded,
    expired, damaged), or every delete it names is done (none is among ``present``, the
    ``delete_id``s of what is observed now)."""
    confirmed = confirmed_deletes(document, digest=digest, now=now)
    return not confirmed or not (confirmed & set(present))


def present_delete_ids(observed: Observation) -> frozenset[str]:
    """The ``delete_id`` of every queued resource observed now (with its node's instance)."""
    ids = set()
    for request in observed.requests:
        node = observed.node(request.zone, request.name)
        ids.add(delete_id(request.zone, request.name, node.instance if node else None))
    return frozenset(ids)
