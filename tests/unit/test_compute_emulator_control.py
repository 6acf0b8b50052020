"""The Compute Engine controls from another process (``EmulatorClient.compute`` over
``/_emulator/compute/``), the scenario's Compute Engine sections, and the environment that
points gcloud's Compute Engine calls at the emulator."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.emulator import (
    ComputeClient,
    ComputeControls,
    Emulator,
    EmulatorClient,
    Fault,
    Scenario,
    ScenarioError,
)
from reconciler.emulator._compute_control import ROUTES
from tests.fixtures.compute import POOL, REGION, ZONE, ComputeApi


def test_the_client_drives_the_same_controls_over_http(ce: ComputeApi) -> None:
    client = EmulatorClient(ce.emu.url).compute
    client.set_capacity(ZONE, "ct6e-standard-1t", 1)
    added = client.add_instance(ZONE, "legacy", "ct6e-standard-1t", labels={"team": "x"},
                                external_ip=True, action="STOP")  # fmt: skip
    assert added["status"] == "RUNNING" and added["labels"] == {"team": "x"}
    assert client.capacity_used(ZONE, "ct6e-standard-1t") == 1
    assert client.instance(ZONE, "legacy") == ce.instance("legacy")
    op = client.preempt(ZONE, "legacy")
    assert op["operationType"] == "compute.instances.preempted"
    ce.emu.advance(1)
    assert client.instance(ZONE, "legacy")["status"] == "TERMINATED"  # type: ignore[index]
    assert client.capacity_used(ZONE, "ct6e-standard-1t") == 0
    assert [o["operationType"] for o in client.operations()] == ["compute.instances.preempted"]
    with pytest.raises(LookupError, match="was not found"):
        client.preempt(ZONE, "nope")
    with pytest.raises(ValueError, match="family"):
        client.set_quota("v4", "standard", REGION, 1)
    with pytest.raises(ValueError, match="does not exist"):
        client.set_capacity(ZONE, "n9-giant", 1)
    with pytest.raises(LookupError):
        client.fail_bulk(REGION, "no-such-group")
    client.set_operation_delay(0)
    assert set(client.state()) == {"instances", "groups", "policies", "templates"}


def test_the_client_sees_groups_members_and_flex_controls(ce: ComputeApi) -> None:
    client = EmulatorClient(ce.emu.url).compute
    ce.ok(ce.post("global/instanceTemplates", {"name": "t", "properties": {
        "machineType": "ct6e-standard-4t", "disks": [{"boot": True}],
        "scheduling": {"provisioningModel": "SPOT"}}}))  # fmt: skip
    mig = {"name": "g", "instanceTemplate": "global/instanceTemplates/t", "targetSize": 2}
    ce.ok(ce.post(f"zones/{ZONE}/instanceGroupManagers", mig))
    ce.emu.advance(2)
    assert client.group(ZONE, "g")["targetSize"] == 2  # type: ignore[index]
    assert [m["instanceStatus"] for m in client.members(ZONE, "g")] == ["RUNNING"] * 2
    client.preempt_member(ZONE, "g", 0)  # REPAIR (the default): made again
    ce.emu.advance(4)
    assert [m["instanceStatus"] for m in client.members(ZONE, "g")] == ["RUNNING"] * 2
    assert len(client.templates()) == 1 and client.policies() == []

    client.set_capacity(ZONE, "tpu7x-standard-4t", 0)
    client.add_instance(ZONE, "f", "tpu7x-standard-4t", model="FLEX_START", status="PENDING")
    client.grant_flex(ZONE, "f")
    ce.emu.advance(2)
    client.end_run(ZONE, "f")
    with pytest.raises(ValueError, match="not PENDING"):
        client.lapse_flex(ZONE, "f")


def test_scenarios_set_compute_timings_and_capacity(make_emulator: Callable[..., Emulator]) -> None:
    scenario = Scenario.from_yaml(
        "compute_timings: {provision: 10, stage: 10}\n"
        "compute_capacity:\n"
        f"  - {{zone: {ZONE}, machine_type: ct5p-hightpu-4t, count: 0}}\n"
        f"  - {{at: 60, zone: {ZONE}, machine_type: ct5p-hightpu-4t, count: 1}}\n"
    )
    emu = make_emulator(scenario, speed=0, ip_pool=POOL)
    api = ComputeApi(emu)
    flex = {"provisioningModel": "FLEX_START", "maxRunDuration": {"seconds": "600"}}
    api.insert("p", machine="ct5p-hightpu-4t", scheduling=flex)
    emu.advance(59)
    assert api.instance("p")["status"] == "PENDING"
    emu.advance(1)
    assert api.instance("p")["status"] == "PROVISIONING"
    emu.advance(20)
    assert api.instance("p")["status"] == "RUNNING"
    api.http.close()
    with pytest.raises(ScenarioError, match="machine_type must be one of"):
        Scenario.from_yaml(f"compute_capacity: [{{zone: {ZONE}, machine_type: ct5lp-hightpu-4t}}]")


def test_gcloud_env_points_compute_engine_at_the_emulator(ce: ComputeApi) -> None:
    env = ce.emu.gcloud_env("/tmp/cfg", "/tmp/token")
    assert env["CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE"] == ce.emu.url
    assert ce.emu.compute_url == f"{ce.emu.url}compute/v1/"


def test_an_injected_fault_on_a_compute_route_answers_in_computes_envelope(ce: ComputeApi) -> None:
    ce.emu.inject_fault(Fault(status=503, method="GET", path=r"/aggregated/instances$"))
    refused = ce.get("aggregated/instances")
    assert refused.status_code == 503
    assert refused.json()["error"]["errors"][0]["reason"] == "backendError"
    assert ce.ok(ce.get("aggregated/instances"))["items"] == {}
    assert ce.emu.request_counts()["GET compute.instances.aggregatedList"] == 2


def test_every_control_is_documented_and_the_client_has_every_method() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "emulator.md").read_text(encoding="utf-8")
    for _method, path in ROUTES:
        assert f"compute/{path}" in doc, path
    public = {n for n in vars(ComputeControls) if not n.startswith("_")}
    assert public - {"project"} <= {n for n in vars(ComputeClient) if not n.startswith("_")}
    for name in public - {"project"}:
        assert f"`{name}(" in doc or f"`{name}`" in doc or f", `{name}(" in doc, name
