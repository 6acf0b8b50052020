"""Compute Engine's TPU quota: chips per family, pool and region, checked when an instance is
admitted against every instance of the project that holds or awaits TPUs.

Two pools [3P, compute-engine.md §4]: ``standard`` (on-demand; the dimensioned quota
``TPUS_PER_TPU_FAMILY`` with ``tpu_family`` CT6E / CT5P / tpu7x) and ``preemptible`` (spot;
``PREEMPTIBLE_TPU_V6E`` for v6e [3P], the same pattern for v5p and TPU7x [I]). Flex-start
spends the preemptible pool and falls back to the standard one [3P]; a reservation-bound
instance is charged to its reservation, not here. A stopped (TERMINATED) instance holds no
chips [I]. Past a limit, the insert's operation fails with ``QUOTA_EXCEEDED`` and its
``quotaInfo`` (``_compute_errors.quota_exceeded``). No limit is set unless a test sets one.

Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from reconciler.emulator._compute_catalog import MachineType
from reconciler.emulator._compute_errors import OpFailure, quota_exceeded
from reconciler.emulator._compute_records import Instance
from reconciler.model.quotas import region_of

POOLS: Final = ("standard", "preemptible")
FAMILIES: Final = ("tpu7x", "v6e", "v5p")
#: The preemptible quota's generation word per family [3P for V6E; I for the others].
_PREEMPTIBLE_WORD: Final = {"v6e": "V6E", "v5p": "V5P", "tpu7x": "TPU7X"}
#: The on-demand quota's ``tpu_family`` dimension per family (as the catalogue's types say).
_TPU_FAMILY: Final = {"v6e": "CT6E", "v5p": "CT5P", "tpu7x": "tpu7x"}


def pools_for(model: str) -> tuple[str, ...]:
    """The pools a provisioning model may be charged to, in the order tried."""
    return {
        "SPOT": ("preemptible",),
        "FLEX_START": ("preemptible", "standard"),
        "RESERVATION_BOUND": (),
    }.get(model, ("standard",))


def refusal(pool: str, machine: MachineType, region: str, limit: int) -> OpFailure:
    if pool == "standard":
        return quota_exceeded(
            "TPUS_PER_TPU_FAMILY",
            "compute.googleapis.com/tpus_per_tpu_family",
            "TPUS-PER-TPU-FAMILY-per-project-region",
            limit,
            region,
            {"region": region, "tpu_family": machine.tpu_family},
        )
    word = _PREEMPTIBLE_WORD[machine.family]
    return quota_exceeded(
        f"PREEMPTIBLE_TPU_{word}",
        f"compute.googleapis.com/preemptible_tpu_{word.lower()}",
        f"PREEMPTIBLE-TPU-{word}-per-project-region",
        limit,
        region,
        {"region": region},
    )


@dataclass
class ComputeQuotaBook:
    limits: dict[tuple[str, str, str], int] = field(default_factory=dict)  # family, pool, region

    def set(self, family: str, pool: str, region: str, chips: int | None) -> None:
        """``chips`` None removes the limit (unlimited, the default)."""
        if family not in FAMILIES:
            raise ValueError(f"family must be one of {', '.join(FAMILIES)}")
        if pool not in POOLS:
            raise ValueError("pool must be 'standard' or 'preemptible'")
        if chips is None:
            self.limits.pop((family, pool, region), None)
        elif chips < 0:
            raise ValueError("chips must be >= 0")
        else:
            self.limits[(family, pool, region)] = int(chips)

    def quota_infos(self, project: str) -> dict[str, object]:
        """``GET .../services/compute.googleapis.com/quotaInfos`` (Cloud Quotas v1): one
        QuotaInfo per limit name, a ``dimensionsInfos`` entry per region (and ``tpu_family``
        for the on-demand one), limits only [I: the ids are compute-engine.md §4's 3P words;
        that Cloud Quotas lists these for TPUs is said there too, not verified]."""
        by_id: dict[str, list[tuple[dict[str, str], int]]] = {}
        for (family, pool, region), limit in sorted(self.limits.items()):
            if pool == "standard":
                qid = "TPUS-PER-TPU-FAMILY-per-project-region"
                dims = {"region": region, "tpu_family": _TPU_FAMILY[family]}
            else:
                qid = f"PREEMPTIBLE-TPU-{_PREEMPTIBLE_WORD[family]}-per-project-region"
                dims = {"region": region}
            by_id.setdefault(qid, []).append((dims, limit))
        infos = [
            {
                "name": f"projects/{project}/locations/global/services/compute.googleapis.com"
                f"/quotaInfos/{qid}",
                "quotaId": qid,
                "metric": "compute.googleapis.com/"
                + ("tpus_per_tpu_family" if qid.startswith("TPUS") else qid.split("-per-")[0]
                   .lower().replace("-", "_")),
                "service": "compute.googleapis.com",
                "isPrecise": True,
                "containerType": "PROJECT",
                "dimensions": sorted(entries[0][0]),
                "quotaDisplayName": qid,
                "metricUnit": "1",
                "dimensionsInfos": [
                    {
                        "dimensions": dims,
                        "details": {"value": str(limit)},
                        "applicableLocations": [dims["region"]],
                    }
                    for dims, limit in entries
                ],
            }
            for qid, entries in by_id.items()
        ]  # fmt: skip
        return {"quotaInfos": infos} if infos else {}

    def used(self, instances: Iterable[Instance], family: str, pool: str, region: str) -> int:
        return sum(
            vm.machine.chips
            for vm in instances
            if vm.pool == pool
            and vm.status != "TERMINATED"
            and vm.machine.family == family
            and region_of(vm.zone) == region
        )

    def admit(
        self, instances: Iterable[Instance], machine: MachineType, zone: str, model: str, count: int
    ) -> tuple[str | None, OpFailure | None]:
        """(the pool ``count`` new VMs are charged to, or the refusal of the last pool tried).
        A model charged to no pool gets (None, None)."""
        existing = list(instances)
        region = region_of(zone)
        last: OpFailure | None = None
        for pool in pools_for(model):
            limit = self.limits.get((machine.family, pool, region))
            need = machine.chips * count
            if limit is None or self.used(existing, machine.family, pool, region) + need <= limit:
                return pool, None
            last = refusal(pool, machine, region, limit)
        return None, last
