"""Quota as the cloud enforces it: chip limits per accelerator family, mode and zone or
region, checked at create time against every queued resource of the project whatever its
state (a waiting, suspended or failed one counts until it is deleted).

A create past a limit is refused RESOURCE_EXHAUSTED (HTTP 429) with the service's words,
``Quota 'TPUV6EPreemptiblePerProjectPerZoneForTPUAPI' exhausted. Limit: 64 in zone
europe-west4-a.``; ``quota_infos`` renders the limits as the Cloud Quotas API's
``quotaInfos`` list (``cloudquotas.googleapis.com/v1``), limits only, as that API gives.

Pure: no clock, no I/O. The world calls ``check`` with its records.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from reconciler.emulator._records import JSON, ApiError, QRRecord
from reconciler.model.names import accelerator_family
from reconciler.model.names import chip_count as chips
from reconciler.model.quotas import quota_id, region_of
from reconciler.model.vocabulary import QUOTA_MODES

Key = tuple[str, str, str, str]  # (family, mode, "zone" | "region", place)


def mode_of(q: QRRecord) -> str:
    """The tier a record was created in, in the project's words."""
    if "spot" in q.tier:
        return "spot"
    guaranteed = q.tier.get("guaranteed")
    if q.tier.get("reservationName") or (
        isinstance(guaranteed, dict) and guaranteed.get("reserved")
    ):
        return "reserved"
    return "on-demand"


@dataclass
class QuotaBook:
    limits: dict[Key, int] = field(default_factory=dict)

    def set(self, family: str, mode: str, scope: str, place: str, chips: int | None) -> None:
        """``chips`` None removes the limit (unlimited, the emulator's default)."""
        if scope not in ("zone", "region"):
            raise ValueError("scope must be 'zone' or 'region'")
        if mode not in QUOTA_MODES:
            raise ValueError(f"mode must be {', '.join(QUOTA_MODES[:-1])} or {QUOTA_MODES[-1]}")
        if chips is None:
            self.limits.pop((family, mode, scope, place), None)
        elif chips < 0:
            raise ValueError("chips must be >= 0")
        else:
            self.limits[(family, mode, scope, place)] = int(chips)

    def used(self, records: Iterable[QRRecord], key: Key) -> int:
        family, mode, scope, place = key
        return sum(
            chips(q.accelerator)
            for q in records
            if accelerator_family(q.accelerator) == family
            and mode_of(q) == mode
            and (q.zone if scope == "zone" else region_of(q.zone)) == place
        )

    def check(self, records: Iterable[QRRecord], new: QRRecord) -> None:
        """Refuse ``new`` when its chips would pass a limit of its family, mode and place."""
        if not self.limits:
            return
        family, mode = accelerator_family(new.accelerator), mode_of(new)
        existing = list(records)
        for scope, place in (("zone", new.zone), ("region", region_of(new.zone))):
            key = (family, mode, scope, place)
            limit = self.limits.get(key)
            if limit is None:
                continue
            if self.used(existing, key) + chips(new.accelerator) > limit:
                raise ApiError(
                    "RESOURCE_EXHAUSTED",
                    f"Quota '{quota_id(family, mode, scope)}' exhausted. "
                    f"Limit: {limit} in {scope} {place}.",
                )

    def quota_infos(self, project: str) -> JSON:
        """``GET .../services/tpu.googleapis.com/quotaInfos``: one QuotaInfo per quota id,
        a ``dimensionsInfos`` entry per place."""
        by_id: dict[str, list[tuple[str, str, int]]] = {}
        for (family, mode, scope, place), limit in sorted(self.limits.items()):
            by_id.setdefault(quota_id(family, mode, scope), []).append((scope, place, limit))
        infos = []
        for qid, places in by_id.items():
            scope = places[0][0]
            infos.append(
                {
                    "name": f"projects/{project}/locations/global/services/tpu.googleapis.com"
                    f"/quotaInfos/{qid}",
                    "quotaId": qid,
                    "metric": f"tpu.googleapis.com/{qid}",
                    "service": "tpu.googleapis.com",
                    "isPrecise": True,
                    "containerType": "PROJECT",
                    "dimensions": [scope],
                    "quotaDisplayName": qid,
                    "metricUnit": "1",
                    "dimensionsInfos": [
                        {
                            "dimensions": {scope: place},
                            "details": {"value": str(limit)},
                            "applicableLocations": [place],
                        }
                        for _, place, limit in places
                    ],
                }
            )
        return {"quotaInfos": infos} if infos else {}
