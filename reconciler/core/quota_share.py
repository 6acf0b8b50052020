"""A lab sharing one project: whose creates go first when they compete for a quota, and how
many chips each member may hold (``members:``, read with each slot's ``owner:``).

- **Order**: creates go by their owner's ``priority`` (higher first), then by the chips the
  owner already holds of that family (fewest first: fair share, counted again after every
  create that goes), then by file order. Without members and owners the order is the plan's.
- **Caps**: a member's ``chips: {v6e: 32}`` counts the chips of that family held or queued
  by the member's slots (every observed request of a slot they own, whatever its state, plus the
  creates that go this pass); a create past it waits, "waiting for alice's cap: 32/32 v6e
  chips", and one bigger than the cap itself never goes ("never fits: needs 64, alice's cap
  32 v6e chips"). A cap counts a family's chips on every API.
- **Behind whom**: a create waiting for quota says who is ahead of it: the creates that went
  this pass under that limit (``behind v6e-a (bob)``), else the owners holding its chips
  (``held by alice 8, bob 8``).

A slot's owner is read as ``getattr(spec, "owner", None)``: the key may be absent. Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.errors import UnsafeName
from reconciler.model.desired import Desired
from reconciler.model.names import accelerator_family
from reconciler.model.names import chip_count as chips
from reconciler.model.observed import Observation
from reconciler.model.quotas import quota_mode, region_of

Key = tuple[str, str, str, str, str]  # (api, family, mode, scope, place), as ``core.quota``'s

OTHERS = "others"  # requests of no owner (unmanaged, or slots without an owner)


@dataclass
class Lab:
    """Who owns which slot, each member's caps and priority, and the chips held so far."""

    owners: Mapping[str, str | None]  # slot -> owner
    priority: Mapping[str, int]  # owner -> priority
    caps: Mapping[str, Mapping[str, int]]  # owner -> family -> chips
    held: Counter[tuple[str | None, str]] = field(default_factory=Counter)  # (owner, family)
    holders: dict[Key, Counter[str]] = field(default_factory=dict)  # limit -> owner -> chips

    def owner(self, slot: str) -> str | None:
        return self.owners.get(slot)

    def rank(self, slot: str, family: str, index: int) -> tuple[int, int, int]:
        """Smaller goes first: higher priority, fewer chips held, earlier in the file."""
        o = self.owner(slot)
        return (-self.priority.get(o or "", 0), self.held[(o, family)], index)

    def cap(self, slot: str, family: str) -> tuple[str, int, int] | None:
        """(owner, held, cap) of the slot's owner for ``family``, when capped."""
        o = self.owner(slot)
        limit = self.caps.get(o or "", {}).get(family)
        return None if o is None or limit is None else (o, self.held[(o, family)], limit)


def lab(desired: Desired, observed: Observation) -> Lab | None:
    """The lab of ``desired``; None when it has no members and no slot names an owner."""
    if not desired.members and not any(getattr(s, "owner", None) for s in desired.slots):
        return None
    owners = {s.name: getattr(s, "owner", None) for s in desired.slots}
    found = Lab(
        owners=owners,
        priority={m.name: m.priority for m in desired.members},
        caps={m.name: m.chips for m in desired.members},
    )
    for request in observed.requests:
        spec = desired.slot(request.name)
        if request.accelerator is None:
            continue
        try:
            family = accelerator_family(request.accelerator)
        except UnsafeName:
            continue
        o = owners.get(request.name) if spec is not None and spec.zone == request.zone else None
        n = chips(request.accelerator) * max(1, request.slices)  # every slice counts
        found.held[(o, family)] += n
        mode = quota_mode(request.mode)
        for key in (
            (request.api, family, mode, "zone", request.zone),
            (request.api, family, mode, "region", region_of(request.zone)),
        ):
            found.holders.setdefault(key, Counter())[o or OTHERS] += n
    return found


def cap_text(owner: str, held: int, limit: int, family: str) -> str:
    return f"waiting for {owner}'s cap: {held}/{limit} {family} chips"


def never_cap_text(owner: str, needs: int, limit: int, family: str) -> str:
    """A create bigger than its owner's cap: it can never go."""
    return f"never fits: needs {needs}, {owner}'s cap {limit} {family} chips"


def behind(found: Lab, key: Key, ahead: Sequence[str]) -> str:
    """`` (behind v6e-a (bob), ...)`` or `` (held by alice 8, others 8)``; "" when nobody."""
    if ahead:
        named = [f"{s} ({found.owner(s) or OTHERS})" for s in ahead]
        return f" (behind {', '.join(named)})"
    holders = found.holders.get(key)
    if not holders:
        return ""
    return " (held by " + ", ".join(f"{o} {n}" for o, n in sorted(holders.items())) + ")"
