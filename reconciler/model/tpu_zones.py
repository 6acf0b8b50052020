"""Which zones exist and which offer which Cloud TPU families: a small catalogue for
``validate``, the loader and ``recommend``.

Two tables of different strength:

- ``KNOWN_ZONES``: every Compute Engine zone (plus the TPU-only ``us-central2-b``). A zone
  outside it is refused by the loader with a "did you mean" (``us-wset4-a``, ``us-west4-z``
  are typos, not zones), unless ``settings.allow_unknown_zones: true`` says the zone is newer
  than this list. Source: a public list of GCP zones (``GCPZones``, stored in the code index)
  checked against the zones named on Google's TPU pages, plus the regions opened since
  (africa-south1, northamerica-south1, europe-north2).
- ``ZONES_BY_FAMILY``: the zones known to offer each family. Source: Google Cloud, "TPU
  regions and zones", https://cloud.google.com/tpu/docs/regions-zones, as remembered and as
  stored copies of the page show it (2024-2026); TPU7x from third-party notes only. Google
  adds zones often, so this table is only ever used to *warn* ("not known to offer"), never to
  refuse; a zone missing here may well serve. Correct it from the page
  (``gcloud compute tpus accelerator-types list --zone Z`` answers for one zone) and update
  the date.

May: hold values. May not: do I/O.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Final

from reconciler.model.accelerators import ALIASES
from reconciler.model.accelerators import family_of as _family_of

SOURCE: Final = "https://cloud.google.com/tpu/docs/regions-zones"
AS_OF: Final = "2026-12-01 (from stored copies of the 2024-2026 page; not checked online)"

#: Region -> the letters of its zones (Compute Engine's, and us-central2's TPU zone).
_REGIONS: Final[Mapping[str, str]] = {
    "africa-south1": "abc",
    "asia-east1": "abc",
    "asia-east2": "abc",
    "asia-northeast1": "abc",
    "asia-northeast2": "abc",
    "asia-northeast3": "abc",
    "asia-south1": "abc",
    "asia-south2": "abc",
    "asia-southeast1": "abc",
    "asia-southeast2": "abc",
    "australia-southeast1": "abc",
    "australia-southeast2": "abc",
    "europe-central2": "abc",
    "europe-north1": "abc",
    "europe-north2": "abc",
    "europe-southwest1": "abc",
    "europe-west1": "bcd",
    "europe-west2": "abc",
    "europe-west3": "abc",
    "europe-west4": "abc",
    "europe-west6": "abc",
    "europe-west8": "abc",
    "europe-west9": "abc",
    "europe-west10": "abc",
    "europe-west12": "abc",
    "me-central1": "abc",
    "me-central2": "abc",
    "me-west1": "abc",
    "northamerica-northeast1": "abc",
    "northamerica-northeast2": "abc",
    "northamerica-south1": "abc",
    "southamerica-east1": "abc",
    "southamerica-west1": "abc",
    "us-central1": "abcf",
    "us-central2": "b",
    "us-east1": "bcd",
    "us-east4": "abc",
    "us-east5": "abc",
    "us-south1": "abc",
    "us-west1": "abc",
    "us-west2": "abc",
    "us-west3": "abc",
    "us-west4": "abc",
}
KNOWN_REGIONS: Final = frozenset(_REGIONS)
KNOWN_ZONES: Final = frozenset(f"{r}-{z}" for r, letters in _REGIONS.items() for z in letters)
#: What lets a zone or region the list does not know through (in the loader's messages).
OPT_OUT: Final = "settings.allow_unknown_zones: true"


def _listed(items: list[str]) -> str:
    return ", ".join(items[:-1]) + f" and {items[-1]}" if len(items) > 1 else items[0]


def zone_problem(zone: str) -> str | None:
    """Why ``zone`` is refused (it is in no region, or its region has no such zone), with a
    "did you mean"; None for a known zone."""
    if zone in KNOWN_ZONES:
        return None
    region = zone.rsplit("-", 1)[0]
    newer = f"; for a zone newer than tpu-reconciler's list, set {OPT_OUT}"
    if region in _REGIONS:
        zones = [f"{region}-{z}" for z in _REGIONS[region]]
        return f"zone {zone!r} does not exist: {region}'s zones are {_listed(zones)}{newer}"
    near = difflib.get_close_matches(zone, sorted(KNOWN_ZONES), n=1, cutoff=0.7)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return f"zone {zone!r} is not a known zone{hint}{newer}"


def region_problem(region: str) -> str | None:
    """Why ``region`` is refused, with a "did you mean"; None for a known region."""
    if region in KNOWN_REGIONS:
        return None
    near = difflib.get_close_matches(region, sorted(KNOWN_REGIONS), n=1, cutoff=0.7)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return (
        f"region {region!r} is not a known region{hint}; for a region newer than "
        f"tpu-reconciler's list, set {OPT_OUT}"
    )


#: Family (as ``model.names.accelerator_family`` spells it) -> zones known to offer it.
ZONES_BY_FAMILY: Final[Mapping[str, frozenset[str]]] = {
    "v2": frozenset(
        {"us-central1-b", "us-central1-c", "us-central1-f", "europe-west4-a", "asia-east1-c"}
    ),
    "v3": frozenset({"us-central1-a", "us-central1-b", "us-central1-f", "europe-west4-a"}),
    "v4": frozenset({"us-central2-b"}),
    "v5litepod": frozenset(
        {
            "us-central1-a",
            "us-east1-c",
            "us-east5-a",
            "us-east5-b",
            "us-east5-c",
            "us-south1-a",
            "us-west1-c",
            "us-west4-a",
            "us-west4-b",
            "europe-west4-b",
            "asia-southeast1-b",
        }
    ),
    "v5p": frozenset(
        {"us-central1-a", "us-east5-a", "us-east5-b", "us-east5-c", "us-south1-a", "europe-west4-b"}
    ),
    "v6e": frozenset(
        {
            "us-central1-b",
            "us-central2-b",
            "us-east1-d",
            "us-east4-a",
            "us-east4-b",
            "us-east5-a",
            "us-east5-b",
            "us-east5-c",
            "us-south1-a",
            "us-west1-c",
            "europe-west4-a",
            "asia-northeast1-b",
            "southamerica-west1-a",
        }
    ),
    # third-party notes only: "only 4 zones had the machine type"; us-central1-c is the one
    # every source names (compute-engine.md §5)
    "tpu7x": frozenset({"us-central1-c"}),
}


def family_of(accelerator: str) -> str:
    """``v6e-8`` -> ``v6e``; ``v5e-8`` -> ``v5litepod`` (no validation: values only)."""
    family = accelerator.rsplit("-", 1)[0]
    return _family_of(accelerator) or ALIASES.get(family, family)


def zones_for(accelerator: str) -> frozenset[str] | None:
    """Zones known to offer ``accelerator``'s family; None when the family is not catalogued."""
    return ZONES_BY_FAMILY.get(family_of(accelerator))


def known_to_offer(zone: str, accelerator: str) -> bool | None:
    """True / False per the catalogue; None when it does not know the family at all."""
    zones = zones_for(accelerator)
    return None if zones is None else zone in zones


def catalogue_warnings(slots: list[tuple[str, str, str]]) -> list[str]:
    """``validate``'s warnings for (slot, zone, accelerator): zones not known to offer the
    slot's family. Never an error: the catalogue may be behind Google's page."""
    out = []
    for name, zone, accelerator in slots:
        if known_to_offer(zone, accelerator) is False:
            out.append(
                f"slot {name!r}: zone {zone} is not known to offer {family_of(accelerator)} "
                f"TPUs (catalogue of {SOURCE}, {AS_OF.split(' ')[0]}); it may still serve"
            )
    return out
