"""Words and numbers of Cloud TPU quota, shared by the planner, the adapters and the emulator:
chips per accelerator type, a zone's region, the quota ids the cloud names, and what a
quota refusal's text says (quota id, limit, zone or region).

The cloud answers a create past a limit with RESOURCE_EXHAUSTED (HTTP 429) and words like
``Quota 'TPUV6EPreemptiblePerProjectPerZoneForTPUAPI' exhausted. Limit: 64 in zone
europe-west4-a``; ``parse_refusal`` reads them. Values only: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from reconciler.model import accelerators

#: The words a quota id uses for a mode (the cloud says "Preemptible" for spot).
_MODE_WORD: Final = {"spot": "Preemptible", "on-demand": "", "reserved": "Reserved"}

_QUOTA_ID: Final = re.compile(r"[Qq]uota(?: limit| metric)? '([A-Za-z0-9_./-]+)'")
_LIMIT: Final = re.compile(r"\bLimit:?\s*([0-9]+)(?:\.[0-9]+)?")
_PLACE: Final = re.compile(r"\bin (zone|region)\s+'?([a-z]+-[a-z]+[0-9]+(?:-[a-z])?)'?")
_ID_TAIL: Final = re.compile(
    r"^TPU(V[0-9][A-Za-z0-9]*?)[Ss]?(Preemptible|Reserved)?(?:Pod)?PerProject"
)


def quota_mode(mode: str | None) -> str:
    """The mode whose quota a request counts against: flex-start uses preemptible (spot) quota."""
    if mode is None:
        return "on-demand"
    return "spot" if mode == "flex-start" else mode


def region_of(zone: str) -> str:
    """``europe-west4-a`` -> ``europe-west4``."""
    return zone.rsplit("-", 1)[0]


def quota_id(family: str, mode: str, scope: str) -> str:
    """The id the cloud gives a family's quota: ``TPUV6EPreemptiblePerProjectPerZoneForTPUAPI``."""
    return f"TPU{family.upper()}{_MODE_WORD.get(mode, '')}PerProjectPer{scope.title()}ForTPUAPI"


def family_mode_of(quota: str) -> tuple[str, str] | None:
    """(family, mode) a quota id is about, when it reads like ``quota_id``'s; else None."""
    m = _ID_TAIL.match(quota)
    if m is None:
        return None
    mode = {"Preemptible": "spot", "Reserved": "reserved"}.get(m.group(2) or "", "on-demand")
    return _family_word(m.group(1).lower()), mode


def _family_word(word: str) -> str:
    """The family a quota id's word names, read through the catalogue: ``v5slitepod`` (from
    ``TPUV5sLitepod...``, a plural ``s`` after the version) -> ``v5litepod``; a word the
    catalogue does not know stays as it is."""
    for candidate in (word, re.sub(r"^(v[0-9]+)s(?=[a-z])", r"\1", word)):
        gen = accelerators.generation(candidate)
        if gen is not None:
            return gen.family
    return word


def scope_of(quota: str) -> str | None:
    """ "zone" or "region" from an id's ``PerZone`` / ``PerRegion``; None when it says neither."""
    if "PerZone" in quota:
        return "zone"
    if "PerRegion" in quota:
        return "region"
    return None


@dataclass(frozen=True, slots=True)
class Refusal:
    """What a quota refusal said: the quota's id, its limit and where (when the text says)."""

    quota_id: str
    limit: int | None = None
    scope: str | None = None  # "zone" | "region"
    place: str | None = None
    #: chips the planner counted under it when the refused create was sent (None: unknown);
    #: the create is sent again once fewer are counted
    used: int | None = None


def parse_refusal(text: str) -> Refusal | None:
    """The quota a RESOURCE_EXHAUSTED / 429 text names, or None when it names none (a rate
    limit, not a quota)."""
    m = _QUOTA_ID.search(text)
    if m is None:
        return None
    limit = _LIMIT.search(text[m.end() :])
    place = _PLACE.search(text[m.end() :])
    return Refusal(
        quota_id=m.group(1),
        limit=int(limit.group(1)) if limit else None,
        scope=place.group(1) if place else scope_of(m.group(1)),
        place=place.group(2) if place else None,
    )
