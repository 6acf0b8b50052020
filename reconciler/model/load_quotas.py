"""The ``quotas:`` entries of a schema-valid file -> ``QuotaSpec`` values, and their rules
across entries: each names exactly one of ``zone`` and ``region``, its API offers its family
(``api:``, else ``settings.apis``, else the family's default: each API has its own quotas),
and no two entries limit the same family, mode, API and place. ``check_fits``: no slot asks
for more chips than a limit (or its owner's cap) allows at all.

Pure: values in, values out; problems go to the caller's ``err(loc, message, key=...)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reconciler.model import accelerators
from reconciler.model.desired import QuotaModel, QuotaSpec, SlotSpec
from reconciler.model.load_compute import sibling
from reconciler.model.load_shape import not_offered
from reconciler.model.quotas import quota_mode, region_of

Err = Callable[..., Any]
Loc = tuple[int | str, ...]


def resolve_quotas(
    entries: Sequence[QuotaModel], apis: Mapping[str, str], err: Err
) -> tuple[QuotaSpec, ...]:
    out: list[QuotaSpec] = []
    seen: dict[tuple[str, str, str, str, str], int] = {}
    for i, q in enumerate(entries):
        loc = ("quotas", i)
        if (q.zone is None) == (q.region is None):
            both = q.zone is not None
            err(
                (*loc, "region") if both else loc,
                "a quota names either zone or region, not both"
                if both
                else "a quota needs a zone or a region",
                key=both,
            )
            continue
        scope, place = ("zone", q.zone) if q.zone is not None else ("region", str(q.region))
        assert place is not None
        api = q.api or apis.get(q.family) or accelerators.default_api(q.family)
        gen = accelerators.family_entry(q.family)
        if gen is not None and api not in gen.apis:
            if q.api is not None:  # one from settings.apis is reported there
                err((*loc, "api"), not_offered(gen, api))
            continue
        key = (q.family, q.mode, api, scope, place)
        if key in seen:
            err(
                (*loc, "family"),
                f"{q.mode} {q.family} chips in {place} are already limited by quotas[{seen[key]}]",
            )
            continue
        seen[key] = i
        out.append(QuotaSpec(q.family, q.mode, scope, place, q.chips, api=api))
    return tuple(out)


def check_fits(
    slots: Sequence[SlotSpec],
    where: Mapping[str, Loc],
    quotas: Sequence[QuotaSpec],
    members: Mapping[str, Mapping[str, int]],
    err: Err,
) -> None:
    """A slot that asks for more chips than a limit of its API, family, mode and place (or
    its owner's cap) allows at all can never be created: refused at its line, with the
    numbers. A released slot asks for nothing and is let be."""
    for spec in slots:
        found = accelerators.lookup(spec.accelerator)
        if spec.want == "released" or found is None or spec.name not in where:
            continue
        family, needs = found[0].family, spec.chips * max(1, spec.slices)
        mode, loc = quota_mode(spec.mode), where[spec.name]
        what = f"{spec.slices}-slice {spec.accelerator}" if spec.slices > 1 else spec.accelerator
        at = sibling(loc, "accelerator")
        for i, q in enumerate(quotas):
            place = spec.zone if q.scope == "zone" else region_of(spec.zone)
            if (q.api, q.family, q.mode, q.place) == (spec.api, family, mode, place) and (
                needs > q.chips
            ):
                err(
                    at,
                    f"slot {spec.name!r} can never fit: a {what} is {needs} chips, more than "
                    f"quotas[{i}] allows ({q.chips} {q.mode} {family} chips in {q.place}); "
                    "ask for fewer chips or raise the limit",
                )
        cap = members.get(spec.owner or "", {}).get(family)
        if cap is not None and needs > cap:
            err(
                at,
                f"slot {spec.name!r} can never fit: a {what} is {needs} chips, more than "
                f"{spec.owner}'s cap of {cap} {family} chips (members:); ask for fewer chips "
                "or raise the cap",
            )
