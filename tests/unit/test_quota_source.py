"""``settings.quota_source: cloud``: the Cloud Quotas API's QuotaInfos read as chip limits,
merged under the file's own, re-read on a timer, and a failed read keeping the last limits."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from reconciler.adapters.cloud_quotas import limits_from_infos
from reconciler.errors import TransientCloudError
from reconciler.model.desired import Desired, QuotaSpec
from reconciler.model.load import parse_desired
from reconciler.runtime.quota_limits import REFRESH, RETRY, CloudQuotaLimits

V6E = "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI"


def info(qid: str, *entries: tuple[dict[str, str], str]) -> dict[str, Any]:
    return {
        "quotaId": qid,
        "dimensionsInfos": [{"dimensions": d, "details": {"value": v}} for d, v in entries],
    }


def test_quota_infos_become_limits() -> None:
    infos = [
        info(V6E, ({"zone": "europe-west4-a"}, "64"), ({}, "0"), ({"zone": "us-east1-d"}, "-1")),
        info(
            "TPUV4sPreemptiblePodPerProjectPerRegionForTPUAPI", ({"region": "us-central2"}, "100")
        ),
        info("TPUV6EPerProjectPerZoneForTPUAPI", ({"zone": "europe-west4-a"}, "8")),
        info("CPUS-ALL-REGIONS", ({}, "24")),
    ]
    assert limits_from_infos(infos) == [
        QuotaSpec("v6e", "spot", "zone", "europe-west4-a", 64, "cloud", V6E),
        QuotaSpec(
            "v4", "spot", "region", "us-central2", 100, "cloud",
            "TPUV4sPreemptiblePodPerProjectPerRegionForTPUAPI",
        ),
        QuotaSpec(
            "v6e", "on-demand", "zone", "europe-west4-a", 8, "cloud",
            "TPUV6EPerProjectPerZoneForTPUAPI",
        ),
    ]  # fmt: skip
    with pytest.raises(ValueError):
        limits_from_infos({"quotaInfos": "no"})
    with pytest.raises(ValueError):
        limits_from_infos([{"quotaId": V6E, "dimensionsInfos": [{"dimensions": 3}]}])


FILE = """\
project: my-project-1
settings: {quota_source: cloud}
quotas:
  - {family: v6e, mode: spot, zone: europe-west4-a, chips: 16}
slots: []
"""
CLOUD = (
    QuotaSpec("v6e", "spot", "zone", "europe-west4-a", 64, "cloud", V6E),
    QuotaSpec("v6e", "spot", "zone", "europe-west4-b", 32, "cloud", V6E),
)


class Reads:
    def __init__(self) -> None:
        self.now = 1000.0
        self.calls = 0
        self.fail = False
        self.notes: list[tuple[str, dict[str, Any]]] = []

    async def read(self, desired: Desired) -> tuple[QuotaSpec, ...]:
        self.calls += 1
        if self.fail:
            raise TransientCloudError("UNAVAILABLE: try later")
        return CLOUD

    def limits(self) -> CloudQuotaLimits:
        return CloudQuotaLimits(
            lambda: self.now, lambda k, **f: self.notes.append((k, f)), self.read
        )


def test_the_file_wins_the_cloud_fills_in_and_reads_are_paced() -> None:
    r = Reads()
    limits = r.limits()
    d = parse_desired(FILE)
    got = asyncio.run(limits.apply(d))
    assert [(q.place, q.chips, q.source) for q in got.quotas] == [
        ("europe-west4-a", 16, "file"),
        ("europe-west4-b", 32, "cloud"),
    ]
    r.now += REFRESH - 1
    asyncio.run(limits.apply(d))
    assert r.calls == 1
    r.now += 1
    r.fail = True
    kept = asyncio.run(limits.apply(d))
    assert kept.quotas == got.quotas, "a failed read keeps the last limits"
    r.now += RETRY
    asyncio.run(limits.apply(d))
    assert r.calls == 3
    assert [k for k, _ in r.notes] == ["quota.read", "quota.read_failed"], "reported once"


def test_quota_source_file_reads_nothing() -> None:
    r = Reads()
    d = parse_desired(FILE.replace("quota_source: cloud", "quota_source: file"))
    assert asyncio.run(r.limits().apply(d)) is d
    assert r.calls == 0


def test_compute_engines_quota_infos_become_its_limits() -> None:
    """Compute Engine's TPU limits (``compute.googleapis.com``): the on-demand one names its
    family in ``tpu_family``, the spot one in its id; both per region; another API's ids and
    a family the catalogue does not know are left out."""
    family = "TPUS-PER-TPU-FAMILY-per-project-region"
    spot = "PREEMPTIBLE-TPU-TPU7X-per-project-region"
    infos = [
        info(
            family,
            ({"region": "us-central1", "tpu_family": "CT6E"}, "64"),
            ({"region": "us-central1", "tpu_family": "tpu7x"}, "128"),
            ({"region": "us-central1", "tpu_family": "CT9Z"}, "8"),
        ),
        info(spot, ({"region": "us-central1"}, "256")),
        info(V6E, ({"zone": "europe-west4-a"}, "64")),
    ]
    assert limits_from_infos(infos, "compute") == [
        QuotaSpec("v6e", "on-demand", "region", "us-central1", 64, "cloud", family, "compute"),
        QuotaSpec("tpu7x", "on-demand", "region", "us-central1", 128, "cloud", family, "compute"),
        QuotaSpec("tpu7x", "spot", "region", "us-central1", 256, "cloud", spot, "compute"),
    ]
    assert limits_from_infos(infos) == [
        QuotaSpec("v6e", "spot", "zone", "europe-west4-a", 64, "cloud", V6E)
    ], "the TPU API's read takes its own ids only"


def test_compute_engines_limits_are_read_only_when_the_file_uses_it() -> None:
    from reconciler.runtime.quota_limits import apis_used

    tpu_only = parse_desired(FILE)
    assert apis_used(tpu_only) == ("tpu",)
    compute = parse_desired(
        FILE.replace(
            "slots: []",
            "slots:\n  - {name: a, zone: us-central1-a, accelerator: tpu7x-8, want: held}",
        )
    )
    assert apis_used(compute) == ("tpu", "compute")
