"""The ``quotas:`` entries of a schema-valid file -> ``QuotaSpec`` values, and their rules
across entries: each names exactly one of ``zone`` and ``region``, its API offers its family
(``api:``, else ``settings.apis``, else the family's default: each API has its own quotas),
and no two entries limit the same family, mode, API and place.

Pure: values in, values out; problems go to the caller's ``err(loc, message, key=...)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reconciler.model import accelerators
from reconciler.model.desired import QuotaModel, QuotaSpec
from reconciler.model.load_shape import not_offered

Err = Callable[..., Any]


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
        gen = accelerators.generation(q.family)
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
