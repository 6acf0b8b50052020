"""Which zones offer which Cloud TPU families: a small catalogue for ``validate`` and
``recommend``.

Source: Google Cloud, "TPU regions and zones", https://cloud.google.com/tpu/docs/regions-zones,
as its authors remembered it in December 2026 (knowledge of the page as published through
2024-2025). Written **without internet access**: it could not be checked against the live page
on that date, and neither the installed gcloud SDK nor its generated API clients list zones per
TPU type. Google adds zones often, so the catalogue is only ever used to *warn* ("not known to
offer"), never to refuse; a zone missing here may well serve. Correct it from the page
(``gcloud compute tpus accelerator-types list --zone Z`` answers for one zone) and update the
date.

May: hold values. May not: do I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

SOURCE: Final = "https://cloud.google.com/tpu/docs/regions-zones"
AS_OF: Final = "2026-12-01 (from memory of the 2024-2025 page; not checked online)"

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
            "us-south1-a",
            "us-west1-c",
            "us-west4-a",
            "us-west4-b",
            "europe-west4-b",
            "asia-southeast1-b",
        }
    ),
    "v5p": frozenset({"us-central1-a", "us-east5-a", "europe-west4-b"}),
    "v6e": frozenset(
        {
            "us-central1-b",
            "us-central2-b",
            "us-east1-d",
            "us-east5-a",
            "us-east5-b",
            "us-south1-a",
            "europe-west4-a",
            "asia-northeast1-b",
            "southamerica-west1-a",
        }
    ),
}

#: Other spellings users write for a family.
ALIASES: Final[Mapping[str, str]] = {"v5e": "v5litepod", "v5lite": "v5litepod"}


def family_of(accelerator: str) -> str:
    """``v6e-8`` -> ``v6e``; ``v5e-8`` -> ``v5litepod`` (no validation: values only)."""
    family = accelerator.rsplit("-", 1)[0]
    return ALIASES.get(family, family)


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
