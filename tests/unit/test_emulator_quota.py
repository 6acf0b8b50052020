"""The emulator enforces chip quotas the way the cloud does: every QR of the project counts
(whatever its state) until deleted, per family, mode and zone or region; a create past a
limit is answered 429 RESOURCE_EXHAUSTED with the quota's id and limit; the control API sets
limits; the Cloud Quotas route lists them."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest

from reconciler.emulator import Emulator, EmulatorClient
from tests.unit.test_emulator import create_body

ZONE = "europe-west4-a"
QRS = "v2/projects/test-project/locations/{zone}/queuedResources"
INFOS = "v1/projects/test-project/locations/global/services/tpu.googleapis.com/quotaInfos"


@pytest.fixture
def served(make_emulator: Callable[..., Emulator]) -> Iterator[tuple[Emulator, httpx.Client]]:
    """A frozen-clock emulator and a client of its API."""
    emu = make_emulator(speed=0)
    with httpx.Client(base_url=emu.url, timeout=10) as client:
        yield emu, client


def create(
    http: httpx.Client, name: str, zone: str = ZONE, acc: str = "v6e-8", **extra: object
) -> httpx.Response:
    body = create_body(name, acc, **extra)
    body["tpu"]["nodeSpec"][0]["parent"] = f"projects/test-project/locations/{zone}"
    return http.post(QRS.format(zone=zone), params={"queuedResourceId": name}, json=body)


@pytest.mark.parametrize("state", ["ACTIVE", "SUSPENDED", "FAILED", "WAITING_FOR_RESOURCES", None])
def test_a_qr_in_any_state_counts_until_deleted(
    served: tuple[Emulator, httpx.Client], state: str | None
) -> None:
    emu, http = served
    emu.set_quota("v6e", "spot", 16, zone=ZONE)
    emu.add_queued_resource(ZONE, "old", "v6e-8", state=state)
    assert create(http, "a").status_code == 200
    refused = create(http, "b")
    assert refused.status_code == 429
    assert refused.json()["error"] == {
        "code": 429,
        "message": "Quota 'TPUV6EPreemptiblePerProjectPerZoneForTPUAPI' exhausted. "
        "Limit: 16 in zone europe-west4-a.",
        "status": "RESOURCE_EXHAUSTED",
    }
    assert emu.queued_resource(ZONE, "b") is None
    http.delete(f"{QRS.format(zone=ZONE)}/old", params={"force": "true"})
    emu.advance(60)
    assert create(http, "b").status_code == 200


def test_a_region_limit_counts_its_zones_and_other_modes_do_not(
    served: tuple[Emulator, httpx.Client],
) -> None:
    emu, http = served
    emu.set_quota("v6e", "spot", 8, region="europe-west4")
    assert create(http, "a").status_code == 200
    assert create(http, "b", zone="europe-west4-b").status_code == 429
    assert "Limit: 8 in region europe-west4." in create(http, "b", zone="europe-west4-b").text
    body = create_body("c", "v6e-8")
    body.pop("spot")
    on_demand = http.post(QRS.format(zone=ZONE), params={"queuedResourceId": "c"}, json=body)
    assert on_demand.status_code == 200, "on-demand has its own quota"
    assert create(http, "d", zone="us-east1-d").status_code == 200


def test_the_control_api_sets_limits_and_cloud_quotas_lists_them(
    served: tuple[Emulator, httpx.Client],
) -> None:
    emu, http = served
    client = EmulatorClient(emu.url)
    client.set_quota("v6e", "spot", 64, zone=ZONE)
    client.set_quota("v4", "spot", 100, region="us-central2")
    infos = http.get(INFOS).json()["quotaInfos"]
    assert [(i["quotaId"], i["dimensions"], i["dimensionsInfos"]) for i in infos] == [
        (
            "TPUV4PreemptiblePerProjectPerRegionForTPUAPI",
            ["region"],
            [
                {
                    "dimensions": {"region": "us-central2"},
                    "details": {"value": "100"},
                    "applicableLocations": ["us-central2"],
                }
            ],
        ),
        (
            "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI",
            ["zone"],
            [
                {
                    "dimensions": {"zone": ZONE},
                    "details": {"value": "64"},
                    "applicableLocations": [ZONE],
                }
            ],
        ),
    ]
    client.set_quota("v6e", "spot", None, zone=ZONE)
    client.set_quota("v4", "spot", None, region="us-central2")
    assert http.get(INFOS).json() == {}
    with pytest.raises(Exception, match="exactly one of zone and region"):
        client.set_quota("v6e", "spot", 8)
