"""Scenario files: parsing, and a story played on the emulated clock."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from reconciler.emulator import Emulator, Scenario, ScenarioError

ZONE = "us-central2-b"

STORY = """
timings: {accept: 1, provision: 2, activate: 5, delete: 3}
capacity:
  - {zone: us-central2-b, accelerator: v4-8, count: 0}
  - {at: 2m, zone: us-central2-b, accelerator: v4-8, count: 1}
queued_resources:
  - {name: early, zone: us-central2-b, labels: {managed-by: tpu-reconciler}}
  - {at: 30s, name: late, zone: us-central2-b}
  - {name: other, zone: europe-west4-a, accelerator: v6e-8, mode: on-demand, state: ACTIVE}
preemptions:
  - {at: 10m, zone: us-central2-b, node: early}
faults:
  - {at: 5m, status: 503, method: GET, path: "/queuedResources$", count: 2}
"""


def state(emu: Emulator, name: str, zone: str = ZONE) -> str | None:
    qr = emu.queued_resource(zone, name)
    return None if qr is None else str(qr["state"]["state"])


def test_a_ten_minute_story_plays_on_the_emulated_clock(
    make_emulator: Callable[..., Emulator],
) -> None:
    emu = make_emulator(Scenario.from_yaml(STORY), speed=0)
    assert state(emu, "other", "europe-west4-a") == "ACTIVE"
    assert state(emu, "late") is None

    emu.advance(119)
    assert (state(emu, "early"), state(emu, "late")) == ("WAITING_FOR_RESOURCES",) * 2
    emu.advance(1)  # capacity arrives at 2m: the oldest waiter gets it
    assert (state(emu, "early"), state(emu, "late")) == ("PROVISIONING", "WAITING_FOR_RESOURCES")
    emu.advance(5)
    assert state(emu, "early") == "ACTIVE"

    emu.advance(300 - 125)  # faults armed at 5m
    listing = f"{emu.url}v2/projects/p/locations/-/queuedResources"
    assert [httpx.get(listing).status_code for _ in range(3)] == [503, 503, 200]

    emu.advance(300)  # preempted at 10m
    early = emu.queued_resource(ZONE, "early")
    assert early is not None
    assert early["state"] == {
        "state": "SUSPENDED",
        "suspendedData": {},
        "stateInitiator": "SERVICE",
    }
    node = emu.node(ZONE, "early")
    assert node is not None and node["state"] == "PREEMPTED"


def test_a_scenario_sets_speed_page_size_and_ip_pool(
    tmp_path: Path, make_emulator: Callable[..., Emulator]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("speed: 0\npage_size: 2\nip_pool: [127.0.0.9]\n", encoding="utf-8")
    emu = make_emulator(Scenario.load(path))
    assert emu.speed == 0
    assert emu.page_size == 2
    emu.add_queued_resource(ZONE, "a", state="ACTIVE")
    node = emu.node(ZONE, "a")
    assert node is not None
    assert node["networkEndpoints"][0]["accessConfig"]["externalIp"] == "127.0.0.9"
    assert make_emulator(Scenario.load(path), speed=3).speed == 3  # the argument wins


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("capacity: [{zone: us-central2-b}]", "capacity.0.accelerator"),
        ("timings: {accept: soon}", "timings.accept"),
        ("preemptions: [{zone: z, node: n, at: 1x}]", "preemptions.0.at"),
        ("bogus: 1", "bogus"),
        ("queued_resources: [{name: a, zone: Mars}]", "queued_resources.0.zone"),
        ("[1, 2]", "a mapping"),
        ("capacity: [", "not valid YAML"),
    ],
)
def test_a_bad_scenario_is_refused_saying_where(text: str, where: str) -> None:
    with pytest.raises(ScenarioError, match=r"<scenario>: .*") as err:
        Scenario.from_yaml(text)
    assert where in str(err.value)


def test_durations_in_a_scenario_accept_units() -> None:
    s = Scenario.from_yaml(
        "timings: {activate: 2m, delete: 0}\nunreachable: [{zone: us-east5-a, at: 1h}]"
    )
    assert s.timings.activate == 120
    assert s.timings.delete == 0
    assert s.unreachable[0].at == 3600


def test_the_documented_scenario_plays_as_described(
    make_emulator: Callable[..., Emulator],
) -> None:
    doc = (Path(__file__).parents[2] / "docs" / "emulator.md").read_text(encoding="utf-8")
    example = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    emu = make_emulator(Scenario.from_yaml(example), speed=0)
    assert emu.speed == 0 and emu.page_size == 25
    emu.advance(10 * 60)
    assert state(emu, "legacy") == "ACTIVE"
    assert state(emu, "spot-v6e64-ew4a-1", "europe-west4-a") == "SUSPENDED"  # preempted at 6m
