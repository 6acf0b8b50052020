"""Chip limits in the plan: count what the cloud counts, send no create past a limit, and
retry a create the cloud refused for quota only once the use under that quota dropped or
its limit rose.

Each API has its own quotas (a TPU API limit does not cover Compute Engine's, nor the other
way round): every count and every limit is keyed by the API too, ``(api, family, mode,
scope, place)``.

- **Use**: every observed capacity request counts its chips (``model.names.chip_count``)
  against its API, family and mode in its zone and its region, whatever its state (queued,
  provisioning, active, suspended, failed, deleting): the cloud counts each one until it is
  deleted, ours or not. Flex-start counts as spot (``model.quotas.quota_mode``).
- **Gate** (``gate``): the plan's creates, in plan order, each against every limit of its
  API, family, mode and zone or region (``Desired.quotas``: the file's ``quotas:``, and the
  cloud's when ``settings.quota_source: cloud``). A create that fits adds its chips to the
  use the next one sees; one that would pass a limit waits, ``gate="quota"``, with the
  words ``waiting for quota: 64/64 spot v6e chips in europe-west4-a`` (`` on Compute
  Engine`` after a limit of that API). One bigger than a limit (or its owner's cap) all by
  itself can never fit: it waits as ``never fits: needs 32, limit 16 ...`` (``validate``
  refuses such a slot when the limit is the file's; a cloud's limit is known only here). A
  race's candidates are creates in their own zones, so each is counted there.
- **Refusals** (``refusal_lifted``): a create the cloud refused for quota is blocked like
  any permanent error (until its fingerprint, the intent behind it, changes), and also goes
  again once the chips counted under the quota it named are fewer than when it was sent
  (``Action.chips_counted``, recorded with the refusal), or once a higher limit is known for
  that quota (the file's or the Cloud Quotas API's) than the one it was refused at (the
  cloud's words, or the limit known when it was sent, ``Action.limits_known``: memory keeps
  both, so a restart still knows).

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
from reconciler.core.plan_values import Action, Kind, Withheld
from reconciler.errors import UnsafeName
from reconciler.model.accelerators import API_WORDS, TPU_API
from reconciler.model.desired import Desired, QuotaSpec
from reconciler.model.names import accelerator_family
from reconciler.model.names import chip_count as chips
from reconciler.model.observed import Observation
from reconciler.model.quotas import Refusal, quota_about, quota_mode, region_of
from reconciler.model.status import QuotaStatus, SlotQuotaStatus

#: ``Withheld.gate`` of a create waiting for quota.
GATE: Final = "quota"
#: How a create that can never fit under a limit (or a cap) says so.
NEVER: Final = "never fits: "

Key = tuple[str, str, str, str, str]  # (api, family, mode, scope, place)


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
    """Chips counted per (api, family, mode, "zone"|"region", place) by the observed
    requests."""
    use: Counter[Key] = Counter()
    for request in observed.requests:
        shape = _shape(request.accelerator) if request.accelerator else None
        if shape is None:
            continue
        family, n = shape[0], shape[1] * max(1, request.slices)  # every slice counts
        mode = quota_mode(request.mode)
        use[(request.api, family, mode, "zone", request.zone)] += n
        use[(request.api, family, mode, "region", _region(request.zone))] += n
    return use


def key(spec: QuotaSpec) -> Key:
    return (spec.api, spec.family, spec.mode, spec.scope, spec.place)


def applies(spec: QuotaSpec, family: str, mode: str, zone: str, api: str = TPU_API) -> bool:
    if spec.family != family or spec.mode != mode or spec.api != api:
        return False
    return spec.place == (zone if spec.scope == "zone" else region_of(zone))


def limit_words(spec: QuotaSpec) -> str:
    """``spot v6e chips in europe-west4-a``, `` on Compute Engine`` after another API's."""
    where = "" if spec.api == TPU_API else f" on {API_WORDS.get(spec.api, spec.api)}"
    return f"{spec.mode} {spec.family} chips in {spec.place}{where}"


def wait_text(spec: QuotaSpec, used: int) -> str:
    return f"waiting for quota: {used}/{spec.chips} {limit_words(spec)}"


def never_text(spec: QuotaSpec, needs: int) -> str:
    """``never fits: needs 32, limit 16 spot v5litepod chips in europe-west4-a``."""
    return f"{NEVER}needs {needs}, limit {spec.chips} {limit_words(spec)}"


def gate(
    quotas: Sequence[QuotaSpec],
    observed: Observation,
    actions: Iterable[Action],
    lab: share.Lab | None = None,
) -> tuple[list[Action], list[Withheld]]:
    """(the actions that go, in the plan's order; the creates that wait for quota or a
    member's cap). Every create that goes comes back with ``chips_counted``: the chips counted
    in its zone and region with every other create of this pass, which go out together and
    may reach the cloud before it. With a ``lab`` (``core.quota_share``) creates are decided in
    its fair order and waiting ones say who is ahead."""
    listed = list(actions)
    creates = [(i, a, f) for i, a in enumerate(listed) if (f := _create_family(a)) is not None]
    if not creates:
        return listed, []  # nothing to count against (the steady pass)
    use = tally(observed)
    decided: dict[int, Action] = {}
    waits: list[Withheld] = []
    went: dict[Key, list[str]] = {}
    counted: dict[int, tuple[Key, Key, int]] = {}

    for i, a, family in creates if lab is None else _fair(creates, lab):
        assert a.create is not None
        api, mode, region = a.create.api, quota_mode(a.create.mode), _region(a.zone)
        n = needs(a)
        zone_key = (api, family, mode, "zone", a.zone)
        region_key = (api, family, mode, "region", region)
        mine = [q for q in quotas if applies(q, family, mode, a.zone, api)]
        a = replace(a, limits_known=tuple((q.place, q.chips) for q in mine))
        capped = lab.cap(a.slot, family) if lab is not None else None
        too_big = next((q for q in mine if n > q.chips), None)
        over = next((q for q in mine if use[key(q)] + n > q.chips), None)
        if capped is not None and n > capped[2]:
            waits.append(
                Withheld(a, share.never_cap_text(capped[0], n, capped[2], family), gate=GATE)
            )
        elif too_big is not None:
            waits.append(Withheld(a, never_text(too_big, n), gate=GATE, limit=too_big))
        elif capped is not None and capped[1] + n > capped[2]:
            waits.append(
                Withheld(a, share.cap_text(capped[0], capped[1], capped[2], family), gate=GATE)
            )
        elif over is not None:
            why = wait_text(over, use[key(over)])
            if lab is not None:
                why += share.behind(lab, key(over), went.get(key(over), []))
            waits.append(Withheld(a, why, gate=GATE, limit=over))
        else:
            use[zone_key] += n
            use[region_key] += n
            for k in (zone_key, region_key):
                went.setdefault(k, []).append(a.slot)
            decided[i] = a
            counted[i] = (zone_key, region_key, n)
            if lab is not None:
                lab.held[(lab.owner(a.slot), family)] += n  # fair share: counted at once
    for i, (zone_key, region_key, n) in counted.items():
        # the pass's creates run concurrently: the cloud may count any other one first
        at = tuple((k[-1], use[k] - n) for k in (zone_key, region_key))  # (place, chips)
        decided[i] = replace(decided[i], chips_counted=at)
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


def needs(a: Action) -> int:
    """Chips a create asks for: one slice's times its slices."""
    assert a.create is not None
    return _chips(a.create.accelerator) * max(1, a.create.slices)


def refusal_key(r: Refusal, action: Action) -> Key | None:
    """The limit a refusal of ``action``'s create names, as ``key`` writes one: the create's
    API and family, the mode the quota id says (Compute Engine charges a flex-start to its
    preemptible quota, then its on-demand one), its scope and place (the create's zone or
    region where the cloud's words do not say)."""
    if action.create is None:
        return None
    family = _family(action.create.accelerator)
    if family is None:
        return None
    about = quota_about(r.quota_id, family)
    mode = about[2] if about is not None else quota_mode(action.create.mode)
    scope = r.scope or "zone"
    place = r.place or (action.zone if scope == "zone" else region_of(action.zone))
    return (action.create.api, family, mode, scope, place)


def refusal_use(error: ActionError, action: Action, observed: Observation) -> int | None:
    """Chips counted now under the quota that refused ``action`` (None: not a quota refusal)."""
    r = error.quota
    k = refusal_key(r, action) if r is not None else None
    return None if k is None else tally(observed)[k]


def known_limit(quotas: Sequence[QuotaSpec], r: Refusal, action: Action) -> int | None:
    """The limit known now for the quota a refusal names (the file's or the Cloud Quotas
    API's; None: none is)."""
    k = refusal_key(r, action)
    found = [q.chips for q in quotas if key(q) == k]
    return max(found) if found else None


def refusal_lifted(
    error: ActionError, action: Action, observed: Observation, quotas: Sequence[QuotaSpec] = ()
) -> bool:
    """The create the cloud refused for quota may go again: fewer chips are counted under
    that quota than when it was sent, or a higher limit is known for it than the one it was
    refused at (a granted increase: the Cloud Quotas API's, or the file's new ``chips:``)."""
    r = error.quota
    if r is None:
        return False
    now = refusal_use(error, action, observed)
    if r.used is not None and now is not None and now < r.used:
        return True
    then, limit = r.refused_at, known_limit(quotas, r, action)
    return then is not None and limit is not None and limit > then


def never_refused(error: ActionError, action: Action) -> str | None:
    """``never fits: needs 32, limit 16`` when the limit the cloud refused ``action`` at is
    smaller than the create itself; else None."""
    r = error.quota
    if r is None or r.limit is None or action.create is None or needs(action) <= r.limit:
        return None
    return f"{NEVER}needs {needs(action)}, limit {r.limit}"


def refused_text(error: ActionError, action: Action) -> str:
    """A blocked create's reason: the cloud's words, and what lets it go again."""
    never = never_refused(error, action)
    if never is not None:
        return f"quota: {never} ({error.message}); sent again when its limit rises"
    return (
        f"quota: {error.message}; sent again when use under it drops, its limit rises or the "
        "intent changes"
    )


@dataclass(frozen=True, slots=True)
class Limit:
    """One limit as ``quota`` shows it: how much is used and which slots wait on it."""

    spec: QuotaSpec
    used: int
    waiting: tuple[str, ...]


def limits(
    quotas: Sequence[QuotaSpec], observed: Observation, gated: Iterable[Withheld]
) -> list[Limit]:
    """Every limit with the chips counted under it and the slots whose create waits on it."""
    use = tally(observed)
    waits = [h for h in gated if h.gate == GATE and h.limit is not None]
    return [
        Limit(q, use[key(q)], tuple(h.action.slot for h in waits if h.limit == q)) for q in quotas
    ]


def slot_states(
    quotas: Sequence[QuotaSpec],
    gated: Iterable[Withheld],
    blocked: Iterable[Withheld],
    memory: Memory,
) -> dict[str, SlotQuotaStatus]:
    """Per slot whose create waits for quota or was refused for it: what ``status`` shows
    (``state`` waiting, refused, or never-fits: bigger than the limit, or the cap, itself)."""
    out: dict[str, SlotQuotaStatus] = {}
    for h in gated:
        if h.gate == GATE and h.action.create is not None:
            q = h.limit
            out[h.action.slot] = SlotQuotaStatus(
                state="never-fits" if h.why.startswith(NEVER) else "waiting",
                message=h.why,
                quota_id=q.quota_id if q else None,
                limit=q.chips if q else None,
                place=q.place if q else None,
                api=h.action.create.api,
                needs=needs(h.action),
            )
    for h in blocked:
        error = memory.error(h.action.key)
        if h.gate == GATE and error is not None and error.quota is not None:
            r = error.quota
            never = never_refused(error, h.action)
            out[h.action.slot] = SlotQuotaStatus(
                state="refused" if never is None else "never-fits",
                message=error.message if never is None else f"{never} ({error.message})",
                quota_id=r.quota_id,
                limit=r.limit,
                place=r.place,
                api=h.action.api,
                needs=needs(h.action) if h.action.create is not None else None,
            )
    return out


def statuses(
    desired: Desired | None, observed: Observation, gated: Iterable[Withheld]
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
            api=lim.spec.api,
        )
        for lim in limits(desired.quotas, observed, gated)
    )
