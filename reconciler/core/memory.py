"""What the controller remembers between passes, and the pure rules that update it.

The world is read fresh every pass; memory holds only what the world cannot tell us:

- per action key, failures and backoff (exponential, forgotten on success), and the
  fingerprint under which a *permanent* error happened (no retry until intent or world change);
- per slot, the request state last seen and since when ("time in state"), and how many dead
  requests (SUSPENDED / FAILED / ENDED) in a row it has replaced, which delays the next create;
- per slot, which setup steps finished for which node instance and generation;
- which notices were sent (once per node instance and event);
- per slot, the node instance last seen ACTIVE and since when, and the ``hold_for`` it has
  served (so a slot released by ``hold_for`` stays released after its request is gone); the
  digest of the intent in force and since when (``core.control`` tells an edit's deletes from
  deletes that came due under an intent already in force);
- per slot, its workload's run, attempt, failures and phase (``core.workload_memory``);
- per cloud action key, the long-running operation of the last create or delete, until its
  outcome shows in the world (``core.lro``) or it is read back (``runtime.lro``);
- per zone, the round trip to a held node there and when it was measured (``core.latency``);
- per slot, what its workers reported of a boot script (``setup.at_boot``) and which ends its
  workload's ``before_end`` ran before (``core.ends_memory``).

Every update is a function ``Memory -> Memory``; serialisation is to and from plain dicts. A
memory document that cannot be read is the runtime's problem (it degrades to a fresh memory
and says so); nothing here touches files or the clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final, TypeVar

from reconciler.core import ends_memory as em
from reconciler.core import workload_memory as wlm
from reconciler.core.latency import ZoneLatency, smooth
from reconciler.core.workload_memory import WorkloadMemory
from reconciler.model.capacity import WON_STATES, RequestState
from reconciler.model.desired import Desired
from reconciler.model.observed import Observation
from reconciler.model.quotas import Refusal

T = TypeVar("T")
MEMORY_SCHEMA: Final = "tpu-reconciler.memory.v1"
BACKOFF_BASE: Final = 10.0
BACKOFF_CAP: Final = 600.0


def backoff_delay(failures: int, hint: float = 0.0) -> float:
    """10 s, 20 s, 40 s, ... capped at 10 min; never less than the error's own hint."""
    if failures <= 0:
        return max(0.0, hint)
    return max(hint, min(BACKOFF_CAP, BACKOFF_BASE * 2.0 ** min(failures - 1, 32)))


def dead_request_delay(dead_in_a_row: int) -> float:
    """Delay before re-creating after the n-th dead request in a row: the first is immediate."""
    return 0.0 if dead_in_a_row <= 1 else backoff_delay(dead_in_a_row - 1)


@dataclass(frozen=True, slots=True)
class ActionError:
    failures: int
    not_before: float
    message: str
    permanent_fingerprint: str | None = None  # set for permanent errors
    detail: str = ""  # e.g. the last lines of a failing worker's setup log
    quota: Refusal | None = None  # a create refused for quota: which, and the use then


@dataclass(frozen=True, slots=True)
class SlotMemory:
    state: str | None = None  # the request's state last seen, its API's word ("NOT_QUEUED": none)
    state_since: float | None = None
    dead_in_a_row: int = 0
    create_not_before: float = 0.0
    setup: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # setup kind ("bootstrap", "tailscale", "tmux") -> "<instance>#<generation>" done
    active_instance: str | None = None  # node instance last seen with its request ACTIVE
    active_since: float | None = None  # ... first seen so (hold_for counts from here)
    served_for: float | None = None  # the hold_for (seconds) that instance served


_EMPTY_SLOT: Final = SlotMemory()


@dataclass(frozen=True, slots=True)
class PendingOperation:
    """A create's or delete's long-running operation, remembered until it is settled."""

    name: str  # its full name, one the cloud can read back (``Capability.reads``)
    kind: str  # "create" | "delete"
    zone: str
    slot: str
    since: float


@dataclass(frozen=True, slots=True)
class Memory:
    slots: Mapping[str, SlotMemory] = field(default_factory=lambda: MappingProxyType({}))
    errors: Mapping[str, ActionError] = field(default_factory=lambda: MappingProxyType({}))
    notified: frozenset[str] = frozenset()
    intent_digest: str | None = None
    intent_since: float | None = None
    workloads: Mapping[str, WorkloadMemory] = field(default_factory=lambda: MappingProxyType({}))
    operations: Mapping[str, PendingOperation] = field(default_factory=lambda: MappingProxyType({}))
    latency: Mapping[str, ZoneLatency] = field(default_factory=lambda: MappingProxyType({}))
    boot: Mapping[str, em.BootSeen] = field(default_factory=lambda: MappingProxyType({}))
    ends: Mapping[str, em.EndsSeen] = field(default_factory=lambda: MappingProxyType({}))

    def slot(self, name: str) -> SlotMemory:
        return self.slots.get(name) or _EMPTY_SLOT

    def error(self, key: str) -> ActionError | None:
        return self.errors.get(key)

    def workload(self, slot: str) -> WorkloadMemory | None:
        return self.workloads.get(slot)

    def operation(self, key: str) -> PendingOperation | None:
        return self.operations.get(key)

    def setup_done(self, slot: str, kind: str, instance: str, generation: int) -> bool:
        return self.slot(slot).setup.get(kind) == setup_token(instance, generation)


def setup_token(instance: str, generation: int) -> str:
    return f"{instance}#{generation}"


def _with_slot(memory: Memory, name: str, slot: SlotMemory) -> Memory:
    return replace(memory, slots=MappingProxyType({**memory.slots, name: slot}))


def _with_error(memory: Memory, key: str, error: ActionError | None) -> Memory:
    errors = dict(memory.errors)
    if error is None:
        errors.pop(key, None)
    else:
        errors[key] = error
    return replace(memory, errors=MappingProxyType(errors))


def observe(
    memory: Memory, desired: Desired | None, observation: Observation, now: float
) -> Memory:
    """Fold one observation in: state-since clocks, and a won slot forgets its dead streak."""
    if desired is None:
        return memory
    slots = dict(memory.slots)
    for spec in desired.slots:
        if not observation.knows(spec.zone):
            continue
        request = observation.request(spec.zone, spec.name)
        state = request.api_state if request else "NOT_QUEUED"
        old = slots.get(spec.name) or SlotMemory()
        new = old
        if old.state != state:
            new = replace(new, state=state, state_since=now)
        if request is not None and request.state in WON_STATES and old.dead_in_a_row:
            new = replace(new, dead_in_a_row=0, create_not_before=0.0)
        node = observation.node(spec.zone, request.node_name or spec.name) if request else None
        if request is not None and request.state == RequestState.ACTIVE and node is not None:
            new = _fold_active(new, node.instance, spec.hold.hold_for_seconds, now)
        if new is not old:
            slots[spec.name] = new
    since = memory.intent_since if memory.intent_digest == desired.digest else now
    return replace(
        memory, slots=MappingProxyType(slots), intent_digest=desired.digest, intent_since=since
    )


def _fold_active(slot: SlotMemory, instance: str, hold_for: float | None, now: float) -> SlotMemory:
    """A new ACTIVE instance starts its own hold_for clock; one that has been ACTIVE for its
    whole hold_for is recorded as having served it."""
    if slot.active_instance != instance:
        slot = replace(slot, active_instance=instance, active_since=now, served_for=None)
    since = slot.active_since if slot.active_since is not None else now
    if hold_for is not None and now - since >= hold_for and slot.served_for != hold_for:
        slot = replace(slot, served_for=hold_for)
    return slot


def record_success(memory: Memory, key: str) -> Memory:
    """An action succeeded: its failures and backoff are forgotten."""
    return _with_error(memory, key, None) if key in memory.errors else memory


def record_failure(
    memory: Memory,
    key: str,
    *,
    message: str,
    now: float,
    permanent: bool,
    fingerprint: str,
    delay_hint: float = 0.0,
    detail: str = "",
    delay: float | None = None,
    counts: bool = True,
    quota: Refusal | None = None,
) -> Memory:
    """``delay`` (e.g. from ``core.retry``) replaces the exponential backoff when given.
    ``counts=False`` is a look that found the action's operation still running: it waits
    ``delay`` and is no failure, so a real failure after it backs off from where it was."""
    old = memory.error(key)
    failures = (old.failures if old else 0) + (1 if counts else 0)
    wait = backoff_delay(failures, delay_hint) if delay is None else max(0.0, delay)
    return _with_error(
        memory,
        key,
        ActionError(
            failures=failures,
            not_before=now + wait,
            message=message,
            permanent_fingerprint=fingerprint if permanent else None,
            detail=detail[-2000:],
            quota=quota,
        ),
    )


def record_operation(memory: Memory, key: str, operation: PendingOperation) -> Memory:
    return replace(memory, operations=MappingProxyType({**memory.operations, key: operation}))


def forget_operation(memory: Memory, key: str) -> Memory:
    if key not in memory.operations:
        return memory
    return replace(
        memory,
        operations=MappingProxyType({k: v for k, v in memory.operations.items() if k != key}),
    )


def forget_notice(memory: Memory, key: str) -> Memory:
    return replace(memory, notified=memory.notified - {key})


def record_dead_replaced(memory: Memory, slot: str, now: float) -> Memory:
    """A dead request (SUSPENDED / FAILED / ENDED) of ``slot`` was deleted to be re-created."""
    old = memory.slot(slot)
    dead = old.dead_in_a_row + 1
    later = now + dead_request_delay(dead)
    return _with_slot(memory, slot, replace(old, dead_in_a_row=dead, create_not_before=later))


def record_setup(memory: Memory, slot: str, kind: str, instance: str, generation: int) -> Memory:
    old = memory.slot(slot)
    setup = MappingProxyType({**old.setup, kind: setup_token(instance, generation)})
    return _with_slot(memory, slot, replace(old, setup=setup))


def record_notice(memory: Memory, key: str) -> Memory:
    return replace(memory, notified=memory.notified | {key})


def record_latency(memory: Memory, zone: str, sample_ms: float | None, now: float) -> Memory:
    """A round-trip probe of ``zone`` measured ``sample_ms`` (None: it failed, unknown)."""
    value = smooth(memory.latency.get(zone), sample_ms, now)
    return replace(memory, latency=MappingProxyType({**memory.latency, zone: value}))


# --- serialisation ------------------------------------------------------------------------


def to_dict(memory: Memory) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema_version": MEMORY_SCHEMA,
        "slots": {
            name: {
                "state": s.state,
                "state_since": s.state_since,
                "dead_in_a_row": s.dead_in_a_row,
                "create_not_before": s.create_not_before,
                "setup": dict(s.setup),
                "active_instance": s.active_instance,
                "active_since": s.active_since,
                "served_for": s.served_for,
            }
            for name, s in sorted(memory.slots.items())
        },
        "errors": {
            key: {
                "failures": e.failures,
                "not_before": e.not_before,
                "message": e.message,
                "permanent_fingerprint": e.permanent_fingerprint,
                "detail": e.detail,
                **({"quota": _refusal_dict(e.quota)} if e.quota is not None else {}),
            }
            for key, e in sorted(memory.errors.items())
        },
        "notified": sorted(memory.notified),
        "intent_digest": memory.intent_digest,
        "intent_since": memory.intent_since,
    }
    if memory.workloads:  # written only when there are any, like operations
        doc["workloads"] = {name: wlm.to_dict(w) for name, w in sorted(memory.workloads.items())}
    if memory.operations:  # written only when there are any: older documents stay as they were
        doc["operations"] = {
            key: {"name": o.name, "kind": o.kind, "zone": o.zone, "slot": o.slot, "since": o.since}
            for key, o in sorted(memory.operations.items())
        }
    if memory.latency:  # likewise
        doc["latency"] = {
            zone: {"ms": v.ms, "measured_at": v.measured_at}
            for zone, v in sorted(memory.latency.items())
        }
    if memory.boot:  # likewise
        doc["boot"] = {name: em.boot_to_dict(b) for name, b in sorted(memory.boot.items())}
    if memory.ends:  # likewise
        doc["ends"] = {name: em.ends_to_dict(e) for name, e in sorted(memory.ends.items())}
    return doc


def from_dict(data: Any) -> Memory:
    """Raises ValueError for a document that is not a memory of this schema."""
    if not isinstance(data, dict) or data.get("schema_version") != MEMORY_SCHEMA:
        raise ValueError("not a tpu-reconciler memory document")
    try:
        slots = {
            str(name): SlotMemory(
                state=s.get("state"),
                state_since=s.get("state_since"),
                dead_in_a_row=int(s.get("dead_in_a_row", 0)),
                create_not_before=float(s.get("create_not_before", 0.0)),
                setup=MappingProxyType({str(k): str(v) for k, v in s.get("setup", {}).items()}),
                active_instance=_opt(s.get("active_instance"), str),
                active_since=_opt(s.get("active_since"), float),
                served_for=_opt(s.get("served_for"), float),
            )
            for name, s in data.get("slots", {}).items()
        }
        errors = {
            str(key): ActionError(
                failures=int(e["failures"]),
                not_before=float(e["not_before"]),
                message=str(e["message"]),
                permanent_fingerprint=e.get("permanent_fingerprint"),
                detail=str(e.get("detail", "")),
                quota=_refusal(e["quota"]) if e.get("quota") is not None else None,
            )
            for key, e in data.get("errors", {}).items()
        }
        notified = frozenset(str(n) for n in data.get("notified", []))
        intent_digest = _opt(data.get("intent_digest"), str)
        intent_since = _opt(data.get("intent_since"), float)
        workloads = {str(k): wlm.from_dict(w) for k, w in data.get("workloads", {}).items()}
        operations = {
            str(key): PendingOperation(
                name=str(o["name"]),
                kind=str(o["kind"]),
                zone=str(o["zone"]),
                slot=str(o["slot"]),
                since=float(o["since"]),
            )
            for key, o in data.get("operations", {}).items()
        }
        latency = {
            str(zone): ZoneLatency(ms=_opt(v.get("ms"), float), measured_at=float(v["measured_at"]))
            for zone, v in data.get("latency", {}).items()
        }
        boot = {str(k): em.boot_from_dict(b) for k, b in data.get("boot", {}).items()}
        ends = {str(k): em.ends_from_dict(e) for k, e in data.get("ends", {}).items()}
    except (AttributeError, KeyError, TypeError, ValueError, OverflowError) as e:
        raise ValueError(f"corrupt memory document: {e}") from None
    numbers = [e.not_before for e in errors.values()]
    numbers += [s.create_not_before for s in slots.values()]
    numbers += [s.state_since for s in slots.values() if s.state_since is not None]
    numbers += [t for s in slots.values() for t in (s.active_since, s.served_for) if t is not None]
    numbers += [intent_since] if intent_since is not None else []
    numbers += [o.since for o in operations.values()]
    numbers += [t for v in latency.values() for t in (v.ms, v.measured_at) if t is not None]
    numbers += [b.since for b in boot.values()]
    numbers += [e.sent_at for e in ends.values() if e.sent_at is not None]
    if not all(math.isfinite(n) for n in numbers):
        raise ValueError("corrupt memory document: a time is not a finite number")
    return Memory(
        slots=MappingProxyType(slots),
        errors=MappingProxyType(errors),
        notified=notified,
        intent_digest=intent_digest,
        intent_since=intent_since,
        workloads=MappingProxyType(workloads),
        operations=MappingProxyType(operations),
        latency=MappingProxyType(latency),
        boot=MappingProxyType(boot),
        ends=MappingProxyType(ends),
    )


def _opt(value: Any, kind: Callable[[Any], T]) -> T | None:
    return None if value is None else kind(value)


def _refusal_dict(r: Refusal) -> dict[str, Any]:
    return {
        "quota_id": r.quota_id,
        "limit": r.limit,
        "scope": r.scope,
        "place": r.place,
        "used": r.used,
        **({"known": r.known} if r.known is not None else {}),
    }


def _refusal(d: Any) -> Refusal:
    return Refusal(
        quota_id=str(d["quota_id"]),
        limit=_opt(d.get("limit"), int),
        scope=_opt(d.get("scope"), str),
        place=_opt(d.get("place"), str),
        used=_opt(d.get("used"), int),
        known=_opt(d.get("known"), int),
    )
