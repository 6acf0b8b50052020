"""Words and numbers of Cloud TPU quota, shared by the planner, the adapters and the emulator:
chips per accelerator type, a zone's region, the quota ids the cloud names, and what a
quota refusal's text says (quota id, limit, zone or region).

Each API has its own quotas (``quota_about`` tells whose an id is):

- the TPU API answers a create past a limit with RESOURCE_EXHAUSTED (HTTP 429) and words like
  ``Quota 'TPUV6EPreemptiblePerProjectPerZoneForTPUAPI' exhausted. Limit: 64 in zone
  europe-west4-a``: one id per family, mode and zone or region;
- Compute Engine fails the insert's operation with ``QUOTA_EXCEEDED``, ``Quota
  'TPUS_PER_TPU_FAMILY' exceeded. Limit: 64.0 in region us-central1.``: on-demand chips of
  every family under one id whose ``tpu_family`` dimension names the family (CT6E, CT5P,
  tpu7x), spot ones under ``PREEMPTIBLE_TPU_V6E`` (V5P, TPU7X), per region; flex-start is
  charged to the preemptible one first (``/work/shared/compute-engine.md`` §4; the Cloud
  Quotas API names the same limits ``TPUS-PER-TPU-FAMILY-per-project-region`` and
  ``PREEMPTIBLE-TPU-V6E-per-project-region``).

``parse_refusal`` reads either text. Values only: no I/O.
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


#: Compute Engine's on-demand TPU quota: one id, the family in its ``tpu_family`` dimension.
COMPUTE_FAMILY_QUOTA: Final = "TPUS_PER_TPU_FAMILY"
#: ``tpu_family`` dimension values [3P: CT6E, tpu7x; I: CT5P], and the generation word of
#: the preemptible ids [3P: V6E; I: V5P, TPU7X].
TPU_FAMILY_DIMENSION: Final = {"v6e": "CT6E", "v5p": "CT5P", "tpu7x": "tpu7x"}
PREEMPTIBLE_WORD: Final = {"v6e": "V6E", "v5p": "V5P", "tpu7x": "TPU7X"}
_COMPUTE_FAMILY: Final = re.compile(
    r"^(?:compute\.googleapis\.com/)?TPUS[-_]PER[-_]TPU[-_]FAMILY", re.I
)
_COMPUTE_SPOT: Final = re.compile(
    r"^(?:compute\.googleapis\.com/)?PREEMPTIBLE[-_]TPU[-_]([A-Z0-9]+?)(?:-per-project|$)", re.I
)


def quota_id(family: str, mode: str, scope: str, api: str = accelerators.TPU_API) -> str:
    """The id the cloud gives a family's quota: ``TPUV6EPreemptiblePerProjectPerZoneForTPUAPI``
    on the TPU API; Compute Engine's ``TPUS_PER_TPU_FAMILY`` or ``PREEMPTIBLE_TPU_V6E`` (per
    region, whatever ``scope``)."""
    if api == accelerators.COMPUTE_API:
        if quota_mode(mode) == "spot":
            return f"PREEMPTIBLE_TPU_{PREEMPTIBLE_WORD.get(family, family.upper())}"
        return COMPUTE_FAMILY_QUOTA
    return f"TPU{family.upper()}{_MODE_WORD.get(mode, '')}PerProjectPer{scope.title()}ForTPUAPI"


def quota_about(quota: str, family: str | None = None) -> tuple[str, str | None, str] | None:
    """(api, family, mode) a quota id (or Cloud Quotas limit name, or metric) is about; None
    when it is no TPU chip quota. Compute Engine's on-demand id names no family: it is
    ``family`` (the refused create's, or the ``tpu_family`` dimension's) when given."""
    if _COMPUTE_FAMILY.match(quota):
        return accelerators.COMPUTE_API, family, "on-demand"
    m = _COMPUTE_SPOT.match(quota)
    if m is not None:
        word = m.group(1).upper()
        named = next((f for f, w in PREEMPTIBLE_WORD.items() if w == word), word.lower())
        return accelerators.COMPUTE_API, named, "spot"
    about = family_mode_of(quota)
    return None if about is None else (accelerators.TPU_API, about[0], about[1])


def family_of_dimension(value: str) -> str | None:
    """The family a ``tpu_family`` dimension names: ``CT6E`` -> ``v6e``."""
    return next((f for f, d in TPU_FAMILY_DIMENSION.items() if d.lower() == value.lower()), None)


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
        gen = accelerators.family_entry(candidate)
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
    #: the limit the planner knew for it when the create was sent (the file's or the Cloud
    #: Quotas API's; None: none): the create is sent again once a higher one is known than
    #: both this and ``limit``
    known: int | None = None

    @property
    def refused_at(self) -> int | None:
        """The highest limit the create was refused under: the cloud's words or ours."""
        limits = [x for x in (self.limit, self.known) if x is not None]
        return max(limits) if limits else None


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
