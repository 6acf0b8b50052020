"""When a create waiting for a quota or a member's cap can go: the quota gate replayed forward
over the scheduled ends.

The gate (``core.quota.gate``) sends a create only when its chips fit under every limit that
applies to it and under its owner's cap, deciding competing creates in the lab's fair order
(``core.quota_share``: higher ``priority``, then fewest chips held, then file order; without a
lab, file order). ``estimate`` runs that same decision at ``now`` and again at every scheduled
end, earliest first:

- a **holder** (anything the cloud counts now: held, queued, suspended) frees its chips at its
  scheduled end (``ends``: a ``hold_until`` or ``hold_for`` release, a slot being released, a
  flex-start run that ``renews`` — whose slot then queues again and competes like any create);
  one without a scheduled end is taken to stay;
- at each such moment the waiting creates that now fit go, in the fair order, each counted at
  once against the limits and its owner's chips (as the gate counts the creates that went
  before it in one pass), so the next in line sees what is left;
- a create that went holds its chips in turn until its own end: ``until`` (its
  ``hold_until``) or ``runs`` seconds after it went (its ``hold_for`` or a flex-start run,
  plus the expected queue wait), and frees them then for those behind it.

A create that needs more chips than a limit or its owner's cap allows, that may not go at all
(``blocked``: paused, the controller suspended), or whose chips stay held with no scheduled end
ahead of it, never goes: ``Estimate.never`` says why. Everything else is an estimate: the
earliest moment the gate would send it if the scheduled ends happen on time and nobody edits
the file; the cloud then still has to grant it (the queue wait is the history's, apart).

Pure: ``now`` is an argument; no I/O.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from reconciler.core import quota_share as share
from reconciler.core.quota import applies, key, wait_text
from reconciler.model.accelerators import API_WORDS, TPU_API
from reconciler.model.desired import QuotaSpec
from reconciler.model.durations import format_duration

Key = tuple[str, str, str, str, str]  # (api, family, mode, scope, place), as ``core.quota``'s

QUOTA: Final = "quota"
CAP: Final = "cap"
#: Holders named in a "never" reason before "and N more".
NAMED: Final = 3


@dataclass(frozen=True, slots=True)
class Need:
    """The chips one slot's request counts, and where: its family, quota mode and zone, and
    the API whose quotas count it."""

    slot: str
    family: str
    mode: str  # the quota's mode (flex-start counts as spot: ``model.quotas.quota_mode``)
    zone: str
    chips: int
    api: str = TPU_API

    def under(self, spec: QuotaSpec) -> bool:
        """``spec`` limits these chips (its API, family, mode and place)."""
        return applies(spec, self.family, self.mode, self.zone, self.api)


@dataclass(frozen=True, slots=True)
class Holder:
    """A request the cloud counts now. ``ends``: when its chips stop counting (None: not
    scheduled); ``why`` names that end (``hold_until``, ``hold_for``, ...). ``renews``: a
    flex-start run that queues again at its end (its slot then waits like any create)."""

    need: Need
    ends: float | None = None
    why: str = ""
    renews: bool = False
    index: int = 0  # its slot's place in the file, for the fair order when it renews
    wait: float = 0.0  # when it renews: the next run's expected queue wait
    run: float | None = None  # and how long that run holds


@dataclass(frozen=True, slots=True)
class Waiter:
    """A create the gate holds back. ``index``: its place in the file (the last tie-break).
    Once it goes it is ACTIVE after ``wait`` (the expected queue wait), not before
    ``start_at`` nor ``start_after`` seconds after it went, and holds then for ``run``
    seconds or until ``until``, whichever ends first (neither: it stays). ``blocked``: why it
    cannot go at all, whatever frees."""

    need: Need
    index: int
    wait: float = 0.0
    run: float | None = None
    until: float | None = None
    start_at: float | None = None
    start_after: float | None = None
    blocked: str | None = None

    def active(self, sent: float) -> float:
        """When it would be ACTIVE if its create went at ``sent``."""
        return active_from(sent, self.wait, self.start_at, self.start_after)

    def end(self, sent: float) -> float | None:
        """When it would stop holding if its create went at ``sent`` (None: no end)."""
        active = self.active(sent)
        ends = [t for t in (self.until, active + self.run if self.run else None) if t is not None]
        return max(sent, min(ends)) if ends else None


def active_from(
    sent: float, wait: float, start_at: float | None = None, start_after: float | None = None
) -> float:
    """When a request sent at ``sent`` can be ACTIVE: after its expected queue ``wait``, and
    not before its ``start_at`` nor ``start_after`` seconds after it was sent."""
    return max(sent + wait, start_at or sent, sent + (start_after or 0.0))


@dataclass(frozen=True, slots=True)
class Limit:
    """A chip limit and the chips counted under it now."""

    spec: QuotaSpec
    used: int


@dataclass(frozen=True, slots=True)
class Estimate:
    """When ``slot``'s create can go: ``start`` (None: never, and ``never`` says why).
    ``waits_on``: "quota" or "cap", what held it back; ``because``: what frees its chips;
    ``ahead``: the creates that go before it, in the fair order, for the same chips;
    ``renewal``: the next run of a flex-start slot held now."""

    slot: str
    start: float | None
    waits_on: str
    because: str = ""
    never: str | None = None
    ahead: tuple[str, ...] = ()
    renewal: bool = False


@dataclass
class _Replay:
    """The gate's counts as time moves on: use per limit, chips per owner, who holds."""

    limits: Sequence[Limit]
    lab: share.Lab | None
    use: Counter[Key] = field(default_factory=Counter)
    holding: dict[str, tuple[Need, str]] = field(default_factory=dict)  # slot -> need, how
    went: list[tuple[Need, float]] = field(default_factory=list)  # creates that went, in order

    def limits_of(self, need: Need) -> list[QuotaSpec]:
        return [lim.spec for lim in self.limits if need.under(lim.spec)]

    def owner(self, slot: str) -> str | None:
        return self.lab.owner(slot) if self.lab is not None else None

    def take(self, need: Need, how: str) -> None:
        for spec in self.limits_of(need):
            self.use[key(spec)] += need.chips
        if self.lab is not None:
            self.lab.held[(self.lab.owner(need.slot), need.family)] += need.chips
        self.holding[need.slot] = (need, how)

    def free(self, need: Need) -> None:
        for spec in self.limits_of(need):
            self.use[key(spec)] -= need.chips
        if self.lab is not None:
            self.lab.held[(self.lab.owner(need.slot), need.family)] -= need.chips
        self.holding.pop(need.slot, None)

    def blocker(self, need: Need) -> tuple[str, QuotaSpec | None] | None:
        """What keeps ``need`` from going now: (CAP, None) or (QUOTA, the limit); None: fits."""
        capped = self.lab.cap(need.slot, need.family) if self.lab is not None else None
        if capped is not None and capped[1] + need.chips > capped[2]:
            return CAP, None
        for spec in self.limits_of(need):
            if self.use[key(spec)] + need.chips > spec.chips:
                return QUOTA, spec
        return None

    def rank(self, waiter: Waiter) -> tuple[int, int, int]:
        if self.lab is None:
            return (0, 0, waiter.index)
        return self.lab.rank(waiter.need.slot, waiter.need.family, waiter.index)


def estimate(
    limits: Sequence[Limit],
    holders: Iterable[Holder],
    waiters: Iterable[Waiter],
    lab: share.Lab | None,
    now: float,
) -> dict[str, Estimate]:
    """Per waiting slot (and per flex-start slot renewing within the scheduled ends), when its
    create can go. ``lab`` (a ``core.quota_share.Lab``: owners, priorities, caps) is counted
    on here, its ``held`` from ``holders``: pass a fresh one, with nothing held. See the module
    docstring for the rules."""
    replay = _Replay(limits, lab)
    for lim in limits:
        replay.use[key(lim.spec)] = lim.used
    ends: list[tuple[float, int, Need, str, Waiter | None]] = []
    for n, h in enumerate(holders):
        if lab is not None:
            lab.held[(lab.owner(h.need.slot), h.need.family)] += h.need.chips
        replay.holding[h.need.slot] = (h.need, h.why if h.ends is None else "")
        if h.ends is not None:
            again = Waiter(h.need, h.index, wait=h.wait, run=h.run) if h.renews else None
            heapq.heappush(ends, (max(h.ends, now), n, h.need, _ended(h), again))
    out: dict[str, Estimate] = {}
    pending: list[Waiter] = []
    waits_from: dict[str, float] = {}  # slot -> since when it waits (a renewal: its run's end)
    for w in waiters:
        never = w.blocked or _too_big(w, replay)
        if never is not None:
            out[w.need.slot] = Estimate(w.need.slot, None, _kind(w, replay), never=never)
        else:
            pending.append(w)
    renewing: set[str] = set()
    seq = len(ends)
    t = now
    freed: list[tuple[Need, str]] = []  # (need, what ended) at ``t``
    last: dict[str, tuple[str, QuotaSpec | None]] = {}  # slot -> what held it back last
    while True:
        for w in _fair(pending, replay):
            held = replay.blocker(w.need)
            if held is not None:
                last[w.need.slot] = held
                continue
            kind, spec = last.get(w.need.slot, (QUOTA, None))
            out[w.need.slot] = Estimate(
                w.need.slot,
                t,
                kind,
                because=_because(w.need, kind, spec, freed, replay),
                ahead=_ahead(w.need, kind, spec, replay, waits_from.get(w.need.slot, now)),
                renewal=w.need.slot in renewing,
            )
            replay.take(w.need, "went")
            replay.went.append((w.need, t))
            end = w.end(t)
            if end is not None:
                seq += 1
                heapq.heappush(ends, (end, seq, w.need, _ran(w, t, end), None))
        pending = [w for w in pending if w.need.slot not in out]
        if not ends or (not pending and not any(e[4] is not None for e in ends)):
            break
        t, freed = ends[0][0], []
        while ends and ends[0][0] == t:
            _, _, need, what, again = heapq.heappop(ends)
            replay.free(need)
            freed.append((need, what))
            if again is not None:
                renewing.add(again.need.slot)
                waits_from[again.need.slot] = t
                pending.append(again)
    for w in pending:
        kind, spec = last.get(w.need.slot) or replay.blocker(w.need) or (QUOTA, None)
        out[w.need.slot] = Estimate(
            w.need.slot,
            None,
            kind,
            never=_stuck(w.need, kind, spec, replay),
            renewal=w.need.slot in renewing,
        )
    return out


def _fair(pending: Sequence[Waiter], replay: _Replay) -> Iterator[Waiter]:
    """``pending`` in the fair order, each ranked when it comes up (as ``core.quota._fair``:
    an owner's chips held grow as their creates go, so a rank only ever grows)."""
    heap = [(replay.rank(w), n, w) for n, w in enumerate(pending)]
    heapq.heapify(heap)
    while heap:
        ranked, n, w = heapq.heappop(heap)
        if (now := replay.rank(w)) != ranked:
            heapq.heappush(heap, (now, n, w))
            continue
        yield w


def _kind(w: Waiter, replay: _Replay) -> str:
    found = replay.blocker(w.need)
    return found[0] if found is not None else QUOTA


def _too_big(w: Waiter, replay: _Replay) -> str | None:
    """Why ``w`` can never fit, even with nothing else held; None when it can."""
    n = w.need
    for spec in replay.limits_of(n):
        if n.chips > spec.chips:
            where = "" if spec.api == TPU_API else f" on {API_WORDS.get(spec.api, spec.api)}"
            return (
                f"needs {n.chips} {spec.mode} {n.family} chips; the limit in {spec.place}{where} "
                f"is {spec.chips}"
            )
    capped = replay.lab.cap(n.slot, n.family) if replay.lab is not None else None
    if capped is not None and n.chips > capped[2]:
        return f"needs {n.chips} {n.family} chips; {capped[0]}'s cap is {capped[2]}"
    return None


def _ended(h: Holder) -> str:
    return h.why or "its end"


def _ran(w: Waiter, start: float, end: float) -> str:
    if w.until is not None and end == w.until:
        return "hold_until"
    return f"after {format_duration(end - start)}"


def _shares(a: Need, b: Need, kind: str, spec: QuotaSpec | None, replay: _Replay) -> bool:
    """``b``'s chips count where ``a`` waited: under the same limit, or its owner's cap."""
    if kind == CAP:
        return a.family == b.family and replay.owner(a.slot) == replay.owner(b.slot)
    if spec is not None:
        return b.under(spec)
    return bool({key(s) for s in replay.limits_of(a)} & {key(s) for s in replay.limits_of(b)})


def _who(slot: str, replay: _Replay) -> str:
    owner = replay.owner(slot)
    return f"{slot} ({owner})" if owner else slot


def _because(
    need: Need,
    kind: str,
    spec: QuotaSpec | None,
    freed: Sequence[tuple[Need, str]],
    replay: _Replay,
) -> str:
    """What lets ``need`` go: the ends at that moment that free chips where it waits."""
    if not freed:
        return "fits now"
    own = [what for n, what in freed if n.slot == need.slot]  # a renewal: its own run's end
    others = [(n, what) for n, what in freed if n.slot != need.slot]
    mine = [(n, what) for n, what in others if _shares(need, n, kind, spec, replay)] or others
    parts = ["its run ends"] if own else []
    parts += [f"{_who(n.slot, replay)} ends ({what})" for n, what in mine if not own]
    return "when " + ", ".join(parts)


def _ahead(
    need: Need, kind: str, spec: QuotaSpec | None, replay: _Replay, since: float
) -> tuple[str, ...]:
    """The creates that went first, since ``need`` waits, for chips it also needed."""
    return tuple(
        n.slot for n, t in replay.went if t >= since and _shares(need, n, kind, spec, replay)
    )


def _stuck(need: Need, kind: str, spec: QuotaSpec | None, replay: _Replay) -> str:
    """Why ``need`` never goes once every scheduled end has passed: where it waits, and who
    keeps those chips with no scheduled end."""
    stay = [(n, how) for n, how in replay.holding.values() if _shares(need, n, kind, spec, replay)]
    stay.sort(key=lambda item: (-item[0].chips, item[0].slot))
    named = [f"{_who(n.slot, replay)} {n.chips}" + (f" ({how})" if how else "") for n, how in stay]
    if len(named) > NAMED:
        named[NAMED:] = [f"{len(named) - NAMED} more"]
    by = f" by {', '.join(named)}" if named else ""
    if (
        kind == CAP
        and replay.lab is not None
        and (capped := replay.lab.cap(need.slot, need.family))
    ):
        where = share.cap_text(*capped, need.family).removeprefix("waiting for ")
    elif spec is not None:
        where = wait_text(spec, replay.use[key(spec)]).removeprefix("waiting for ")
    else:
        where = f"{need.chips} {need.family} chips"
    return f"{where}: held with no scheduled end{by}"


def limits_of(specs: Iterable[QuotaSpec], used: Mapping[Key, int]) -> list[Limit]:
    """``Limit`` values of ``specs`` with the chips counted under each (0 when not known)."""
    return [Limit(spec, used.get(key(spec), 0)) for spec in specs]
