"""Chip limits in the plan: count what the cloud counts, send no create past a limit, and
retry a create the cloud refused for quota only once the use under that quota dropped.

- **Use**: every observed queued resource counts its chips (``model.names.chip_count``) against
  its family and mode in its zone and its region, whatever its state (queued, provisioning,
  active, suspended, failed, deleting): the cloud counts each one until it is deleted, ours
  or not.
- **Gate** (``gate``): the plan's creates, in plan order, each against every limit of its
  family, mode and zone or region (``Desired.quotas``: the file's ``quotas:``, and the
  cloud's when ``settings.quota_source: cloud``). A create that fits adds its chips to the
  use the next one sees; one that would pass a limit waits, ``rule="quota"``, with the
  words ``waiting for quota: 64/64 spot v6e chips in europe-west4-a``. A race's candidates
  are creates in their own zones, so each is counted there.
- **Refusals** (``refusal_lifted``): a create the cloud refused for quota is blocked like
  any permanent error (until its fingerprint, the intent behind it, changes), and also
  goes again once the chips counted under the quota it named are fewer than when it was
  sent (``Action.quota_use``, recorded with the refusal).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import functools
import heapq
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Final

from reconciler.core import quota_share as share
from reconciler.core.memory import ActionError, Memory
from reconciler.core.plan_values import Action, Held, Kind
from reconciler.errors import UnsafeName
from reconciler.model.desired import Desired, QuotaSpec
from reconciler.model.names import accelerator_family
from reconciler.model.names import chip_count as chips
from reconciler.model.observed import Observation
from reconciler.model.quotas import quota_mode, region_of
from reconciler.model.status import QuotaStatus, SlotQuotaStatus

#: ``Held.rule`` of a create waiting for quota.
RULE: Final = "quota"

Key = tuple[str, str, str, str]  # (family, mode, scope, place)


@functools.lru_cache(maxsize=512)
def _shape(accelerator: str) -> tuple[str, int] | None:
    """(family, chips) of an accelerator type; None when it is not one. A file and a project
    use a handful of types: each is parsed once, not once per request per pass."""
    try:
        return accelerator_family(accelerator), chips(accelerator)
    except UnsafeName:
        return None


_region = functools.lru_cache(maxsize=1024)(region_of)


def _chips(accelerator: str) -> int:
    shape = _shape(accelerator)
    return shape[1] if shape is not None else chips(accelerator)


def _family(accelerator: str | None) -> str | None:
    shape = _shape(accelerator) if accelerator else None
    return shape[0] if shape is not None else None


def tally(observed: Observation) -> Counter[Key]:
    """Chips counted per (family, mode, "zone"|"region", place) by the observed requests."""
    use: Counter[Key] = Counter()
    for request in observed.requests:
        shape = _shape(request.accelerator) if request.accelerator else None
        if shape is None:
            continue
        family, n = shape[0], shape[1] * max(1, request.slices)  # every slice counts
        mode = quota_mode(request.mode)
        use[(family, mode, "zone", request.zone)] += n
        use[(family, mode, "region", _region(request.zone))] += n
    return use


def key(spec: QuotaSpec) -> Key:
    return (spec.family, spec.mode, spec.scope, spec.place)


def applies(spec: QuotaSpec, family: str, mode: str, zone: str) -> bool:
    if spec.family != family or spec.mode != mode:
        return False
    return spec.place == (zone if spec.scope == "zone" else region_of(zone))


def wait_text(spec: QuotaSpec, used: int) -> str:
    return f"waiting for quota: {used}/{spec.chips} {spec.mode} {spec.family} chips in {spec.place}"


def gate(
    quotas: Sequence[QuotaSpec],
    observed: Observation,
    actions: Iterable[Action],
    lab: share.Lab | None = None,
) -> tuple[list[Action], list[Held]]:
    """(the actions that go, in the plan's order; the creates that wait for quota or a
    member's cap). Every create comes back with ``quota_use``: the chips counted in its zone
    and region before it. With a ``lab`` (``core.quota_share``) creates are decided in its
    fair order and waiting ones say who is ahead."""
    listed = list(actions)
    creates = [(i, a, f) for i, a in enumerate(listed) if (f := _create_family(a)) is not None]
    if not creates:
        return listed, []  # nothing to count against (the steady pass)
    use = tally(observed)
    decided: dict[int, Action] = {}
    waits: list[Held] = []
    went: dict[Key, list[str]] = {}

    for i, a, family in creates if lab is None else _fair(creates, lab):
        assert a.create is not None
        mode, region = quota_mode(a.create.mode), _region(a.zone)
        n = _chips(a.create.accelerator) * max(1, a.create.slices)
        zone_key, region_key = (family, mode, "zone", a.zone), (family, mode, "region", region)
        a = replace(a, quota_use=((a.zone, use[zone_key]), (region, use[region_key])))
        capped = lab.cap(a.slot, family) if lab is not None else None
        over = next(
            (q for q in quotas if applies(q, family, mode, a.zone) and use[key(q)] + n > q.chips),
            None,
        )
        if capped is not None and capped[1] + n > capped[2]:
            waits.append(
                Held(a, share.cap_text(capped[0], capped[1], capped[2], family), rule=RULE)
            )
        elif over is not None:
            why = wait_text(over, use[key(over)])
            if lab is not None:
                why += share.behind(lab, key(over), went.get(key(over), []))
            waits.append(Held(a, why, rule=RULE))
        else:
            use[zone_key] += n
            use[region_key] += n
            for k in (zone_key, region_key):
                went.setdefault(k, []).append(a.slot)
            decided[i] = a
            if lab is not None:
                lab.held[(lab.owner(a.slot), family)] += n  # fair share: counted at once
    create_at = {i for i, _, _ in creates}
    go = [
        decided[i] if i in create_at else a
        for i, a in enumerate(listed)
        if i not in create_at or i in decided
    ]
    return go, waits


def _fair(
    creates: list[tuple[int, Action, str]], lab: share.Lab
) -> Iterator[tuple[int, Action, str]]:
    """``creates`` in the lab's order, each ranked when it comes up: its owner's chips held
    grow as their creates go (a heap, re-queued lazily: a rank only ever grows)."""
    heap = [(lab.rank(a.slot, f, i), i, a, f) for i, a, f in creates]
    heapq.heapify(heap)
    while heap:
        ranked, i, a, family = heapq.heappop(heap)
        if (now := lab.rank(a.slot, family, i)) != ranked:  # its owner took more chips since
            heapq.heappush(heap, (now, i, a, family))
            continue
        yield i, a, family


def _create_family(a: Action) -> str | None:
    if a.kind != Kind.CREATE or a.create is None:
        return None
    return _family(a.create.accelerator)


def refusal_use(error: ActionError, action: Action, observed: Observation) -> int | None:
    """Chips counted now under the quota that refused ``action`` (None: not a quota refusal)."""
    r = error.quota
    if r is None or action.create is None:
        return None
    family = _family(action.create.accelerator)
    if family is None:
        return None
    scope = r.scope or "zone"
    place = r.place or (action.zone if scope == "zone" else region_of(action.zone))
    return tally(observed)[(family, action.create.mode, scope, place)]


def refusal_lifted(error: ActionError, action: Action, observed: Observation) -> bool:
    """The create the cloud refused for quota may go again: fewer chips are counted under
    that quota than when it was sent."""
    r = error.quota
    now = refusal_use(error, action, observed)
    return r is not None and r.used is not None and now is not None and now < r.used


def refused_text(error: ActionError) -> str:
    """A blocked create's reason: the cloud's words, and what lets it go again."""
    return f"quota: {error.message}; sent again when use under it drops or the intent changes"


@dataclass(frozen=True, slots=True)
class Limit:
    """One limit as ``quota`` shows it: how much is used and which slots wait on it."""

    spec: QuotaSpec
    used: int
    waiting: tuple[str, ...]


def limits(quotas: Sequence[QuotaSpec], observed: Observation, held: Iterable[Held]) -> list[Limit]:
    """Every limit with the chips counted under it and the slots whose create waits on it."""
    use = tally(observed)
    waits = [h for h in held if h.rule == RULE]
    return [
        Limit(q, use[key(q)], tuple(h.action.slot for h in waits if _about(h.why, q)))
        for q in quotas
    ]


def _tail(spec: QuotaSpec) -> str:
    return f"/{spec.chips} {spec.mode} {spec.family} chips in {spec.place}"


def _about(why: str, spec: QuotaSpec) -> bool:
    """The wait ``why`` is for ``spec`` (its words end there, or go on with who is ahead)."""
    tail = _tail(spec)
    return why.startswith("waiting for quota: ") and (why.endswith(tail) or f"{tail} (" in why)


def slot_states(
    quotas: Sequence[QuotaSpec], held: Iterable[Held], blocked: Iterable[Held], memory: Memory
) -> dict[str, SlotQuotaStatus]:
    """Per slot whose create waits for quota or was refused for it: what ``status`` shows."""
    out: dict[str, SlotQuotaStatus] = {}
    for h in held:
        if h.rule == RULE:
            q = next((q for q in quotas if _about(h.why, q)), None)
            out[h.action.slot] = SlotQuotaStatus(
                state="waiting",
                message=h.why,
                quota_id=q.quota_id if q else None,
                limit=q.chips if q else None,
                place=q.place if q else None,
            )
    for h in blocked:
        error = memory.error(h.action.key)
        if h.rule == RULE and error is not None and error.quota is not None:
            r = error.quota
            out[h.action.slot] = SlotQuotaStatus(
                state="refused",
                message=error.message,
                quota_id=r.quota_id,
                limit=r.limit,
                place=r.place,
            )
    return out


def statuses(
    desired: Desired | None, observed: Observation, held: Iterable[Held]
) -> tuple[QuotaStatus, ...]:
    """Every limit of the intent with its use and waiting slots (the snapshot's ``quotas``)."""
    if desired is None or not desired.quotas:
        return ()
    return tuple(
        QuotaStatus(
            family=lim.spec.family,
            mode=lim.spec.mode,
            scope=lim.spec.scope,
            place=lim.spec.place,
            chips=lim.spec.chips,
            used=lim.used,
            waiting=lim.waiting,
            source=lim.spec.source,
            quota_id=lim.spec.quota_id,
        )
        for lim in limits(desired.quotas, observed, held)
    )
