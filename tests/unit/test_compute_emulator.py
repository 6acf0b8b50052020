"""The emulated Compute Engine's instances and operations, driven over HTTP as the adapter
will drive them, with the clock frozen and moved by ``advance``. Every exchange is decoded by
the SDK's message classes when each test ends (the ``ce`` fixture)."""

from __future__ import annotations

import pytest

from tests.fixtures.compute import ZONE, ComputeApi, instance_body

INSTANCES = f"zones/{ZONE}/instances"
RID = "0b8e5a1e-7c1f-4d8e-9a57-3f1f8b2e6c01"


def test_an_insert_walks_provisioning_staging_running_and_its_operation_ends_then(
    ce: ComputeApi,
) -> None:
    op = ce.insert("a")
    assert (op["status"], op["operationType"], op["progress"]) == ("PENDING", "insert", 0)
    assert op["targetLink"].endswith(f"/projects/test-project/{INSTANCES}/a")
    assert ce.instance("a")["status"] == "PROVISIONING"
    ce.emu.advance(1)
    assert ce.instance("a")["status"] == "STAGING"
    assert ce.op(op)["status"] == "RUNNING"
    ce.emu.advance(1)
    vm = ce.instance("a")
    assert vm["status"] == "RUNNING"
    assert ce.op(op)["status"] == "DONE" and "error" not in ce.op(op)
    nic = vm["networkInterfaces"][0]
    assert (nic["networkIP"], nic["accessConfigs"][0]["natIP"]) == ("127.0.0.2", "127.0.0.3")
    assert vm["labels"] == {"tpu-reconciler": "owned"}
    assert vm["metadata"]["items"] == [{"key": "startup-script", "value": "#!/bin/bash\ntrue"}]
    assert vm["scheduling"]["provisioningModel"] == "SPOT"
    assert vm["machineType"].endswith(f"/{ZONE}/machineTypes/ct6e-standard-4t")


def test_an_instance_without_an_access_config_gets_no_nat_ip(ce: ComputeApi) -> None:
    ce.insert("a", networkInterfaces=[{"network": "global/networks/default"}])
    ce.emu.advance(5)
    nic = ce.instance("a")["networkInterfaces"][0]
    assert nic["networkIP"] == "127.0.0.2" and "accessConfigs" not in nic


def test_the_same_request_id_answers_with_the_same_operation(ce: ComputeApi) -> None:
    first = ce.ok(ce.post(INSTANCES, instance_body("a"), requestId=RID))
    again = ce.ok(ce.post(INSTANCES, instance_body("a"), requestId=RID))
    assert again["name"] == first["name"] and again["clientOperationId"] == RID
    assert len(ce.emu.compute.instances()) == 1
    refused = ce.post(INSTANCES, instance_body("b"), requestId="not-a-uuid")
    assert refused.status_code == 400 and "requestId" in refused.json()["error"]["message"]


@pytest.mark.parametrize(
    ("change", "status", "reason", "words"),
    [
        ({"machineType": f"zones/{ZONE}/machineTypes/ct5lp-hightpu-4t"}, 403, "forbidden",
         "This user agent is not allowed to use the machine type [ct5lp-hightpu-4t]."),
        ({"machineType": f"zones/{ZONE}/machineTypes/n9-giant"}, 400, "invalid",
         "Machine type with name 'n9-giant' does not exist"),
        ({"schedulng": {}}, 400, "invalid",
         "Unknown name \"schedulng\" at 'instance_resource': Cannot find field."),
        ({"scheduling": {"provisioningModel": "SPOTTY"}}, 400, "invalid",
         "'resource.scheduling.provisioningModel': 'SPOTTY'"),
        ({"scheduling": {"onHostMaintenance": "MIGRATE"}}, 400, "invalid", "live migration"),
        ({"params": {"requestValidForDuration": {"seconds": "60"}}}, 400, "invalid",
         "FLEX_START"),
        ({"disks": []}, 400, "invalid", "Boot disk must be specified."),
    ],
)  # fmt: skip
def test_bad_inserts_are_refused_in_googles_envelope(
    ce: ComputeApi, change: dict[str, object], status: int, reason: str, words: str
) -> None:
    refused = ce.post(INSTANCES, {**instance_body("a"), **change})
    assert refused.status_code == status
    error = refused.json()["error"]
    assert error["errors"][0]["reason"] == reason and error["errors"][0]["domain"] == "global"
    assert words in error["message"]
    assert ce.emu.compute.instances() == []


def test_a_reservation_bound_instance_draws_on_its_reservation_not_the_zone(
    ce: ComputeApi,
) -> None:
    ce.emu.compute.set_capacity(ZONE, "ct5p-hightpu-4t", 0)
    affinity = {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["mine"],
    }
    reserved = {"provisioningModel": "RESERVATION_BOUND", "instanceTerminationAction": "DELETE"}
    refused = ce.post(INSTANCES, instance_body("r", "ct5p-hightpu-4t", scheduling=reserved))
    assert refused.status_code == 400 and "SPECIFIC_RESERVATION" in refused.text
    ce.insert("r", machine="ct5p-hightpu-4t", scheduling=reserved, reservationAffinity=affinity)
    ce.emu.advance(2)
    vm = ce.instance("r")
    assert vm["status"] == "RUNNING" and vm["reservationAffinity"] == affinity
    assert vm["scheduling"]["provisioningModel"] == "RESERVATION_BOUND"


def test_conflicts_and_absences(ce: ComputeApi) -> None:
    ce.insert("a")
    dup = ce.post(INSTANCES, instance_body("a"))
    assert dup.status_code == 409
    assert dup.json()["error"]["errors"][0] == {
        "domain": "global",
        "reason": "alreadyExists",
        "message": f"The resource 'projects/test-project/{INSTANCES}/a' already exists",
    }
    for answer in (ce.get(f"{INSTANCES}/nope"), ce.delete(f"{INSTANCES}/nope")):
        assert answer.status_code == 404
        assert answer.json()["error"]["message"] == (
            f"The resource 'projects/test-project/{INSTANCES}/nope' was not found"
        )
    assert ce.get(f"zones/{ZONE}/operations/operation-0").status_code == 404


def test_delete_stop_start_and_set_metadata(ce: ComputeApi) -> None:
    ce.insert("a", model="STANDARD")
    ce.emu.advance(2)
    stop = ce.ok(ce.post(f"{INSTANCES}/a/stop"))
    assert ce.instance("a")["status"] == "STOPPING"
    ce.emu.advance(1)
    vm = ce.instance("a")
    assert vm["status"] == "TERMINATED" and "lastStopTimestamp" in vm
    assert "natIP" not in vm["networkInterfaces"][0]["accessConfigs"][0]
    assert ce.op(stop)["status"] == "DONE"
    start = ce.ok(ce.post(f"{INSTANCES}/a/start"))
    ce.emu.advance(2)
    assert ce.instance("a")["status"] == "RUNNING" and ce.op(start)["status"] == "DONE"

    stale = ce.post(f"{INSTANCES}/a/setMetadata", {"fingerprint": "AAAA", "items": []})
    assert stale.status_code == 412
    assert stale.json()["error"]["errors"][0]["reason"] == "conditionNotMet"
    fp = ce.instance("a")["metadata"]["fingerprint"]
    items = [{"key": "tpu-worker-id", "value": "0"}]
    ce.ok(ce.post(f"{INSTANCES}/a/setMetadata", {"fingerprint": fp, "items": items}))
    assert ce.instance("a")["metadata"]["items"] == items
    assert ce.instance("a")["metadata"]["fingerprint"] != fp

    deleted = ce.ok(ce.delete(f"{INSTANCES}/a"))
    assert ce.instance("a")["status"] == "STOPPING"
    ce.emu.advance(1)
    assert ce.get(f"{INSTANCES}/a").status_code == 404
    assert ce.op(deleted)["status"] == "DONE" and "error" not in ce.op(deleted)


def test_a_stockout_fails_the_insert_operation_and_capacity_released_later_serves(
    ce: ComputeApi,
) -> None:
    ce.emu.compute.set_capacity(ZONE, "ct6e-standard-4t", 0)
    op = ce.insert("a")
    assert ce.get(f"{INSTANCES}/a").status_code == 404
    ce.emu.advance(1)
    done = ce.op(op)
    assert done["status"] == "DONE" and done["httpErrorStatusCode"] == 503
    assert done["error"]["errors"] == [
        {
            "code": "ZONE_RESOURCE_POOL_EXHAUSTED",
            "message": f"The zone 'projects/test-project/zones/{ZONE}' does not have enough "
            "resources available to fulfill the request. Try a different zone, or try again "
            "later.",
        }
    ]
    ce.emu.compute.set_capacity(ZONE, "ct6e-standard-4t", 1)
    ce.insert("a")
    ce.emu.advance(2)
    assert ce.instance("a")["status"] == "RUNNING"
    assert ce.emu.compute.capacity_used(ZONE, "ct6e-standard-4t") == 1


@pytest.mark.parametrize(
    ("model", "pool", "quota", "metric", "dimensions"),
    [
        ("STANDARD", "standard", "TPUS_PER_TPU_FAMILY",
         "compute.googleapis.com/tpus_per_tpu_family",
         {"region": "us-central1", "tpu_family": "CT6E"}),
        ("SPOT", "preemptible", "PREEMPTIBLE_TPU_V6E",
         "compute.googleapis.com/preemptible_tpu_v6e", {"region": "us-central1"}),
    ],
)  # fmt: skip
def test_quota_counts_every_instance_of_the_family_and_pool(
    ce: ComputeApi, model: str, pool: str, quota: str, metric: str, dimensions: dict[str, str]
) -> None:
    ce.emu.compute.set_quota("v6e", pool, "us-central1", 8)
    ce.insert("a", model=model)
    ce.insert("b", zone="us-central1-a", model=model)
    refused = ce.insert("c", model=model)
    ce.emu.advance(2)
    done = ce.op(refused)
    assert done["httpErrorStatusCode"] == 403
    [error] = done["error"]["errors"]
    assert error["code"] == "QUOTA_EXCEEDED"
    assert error["message"] == f"Quota '{quota}' exceeded. Limit: 8.0 in region us-central1."
    info = error["errorDetails"][0]["quotaInfo"]
    assert (info["metricName"], info["limit"], info["dimensions"]) == (metric, 8.0, dimensions)
    assert ce.get(f"{INSTANCES}/c").status_code == 404
    other = "preemptible" if pool == "standard" else "standard"
    ce.emu.compute.set_quota("v6e", other, "us-central1", 0)  # the other pool does not count
    ce.ok(ce.delete(f"{INSTANCES}/a"))
    ce.emu.advance(2)
    ce.insert("c", model=model)
    ce.emu.advance(2)
    assert ce.instance("c")["status"] == "RUNNING"


@pytest.mark.parametrize(("action", "after"), [("STOP", "TERMINATED"), ("DELETE", None)])
def test_spot_preemption_records_an_operation_then_applies_the_termination_action(
    ce: ComputeApi, action: str, after: str | None
) -> None:
    ce.insert("a", scheduling={"instanceTerminationAction": action})
    ce.emu.advance(2)
    op = ce.emu.compute.preempt(ZONE, "a")
    assert (op["operationType"], op["user"], op["status"]) == (
        "compute.instances.preempted", "system", "DONE"
    )  # fmt: skip
    assert ce.instance("a")["status"] == "STOPPING"
    ce.emu.advance(1)
    answer = ce.get(f"{INSTANCES}/a")
    if after is None:
        assert answer.status_code == 404
    else:
        assert answer.json()["status"] == after
    found = ce.ok(ce.get(f"zones/{ZONE}/operations",
                         filter='operationType = "compute.instances.preempted"'))  # fmt: skip
    assert [o["targetLink"].rsplit("/", 1)[1] for o in found["items"]] == ["a"]
    ce.insert("b", model="STANDARD")
    ce.emu.advance(2)
    with pytest.raises(ValueError, match="not SPOT"):
        ce.emu.compute.preempt(ZONE, "b")


def test_flex_start_waits_pending_then_runs_its_duration_then_is_deleted(ce: ComputeApi) -> None:
    ce.emu.compute.set_capacity(ZONE, "tpu7x-standard-4t", 0)
    flex = {
        "provisioningModel": "FLEX_START",
        "maxRunDuration": {"seconds": "3600"},
        "instanceTerminationAction": "DELETE",
    }
    params = {"requestValidForDuration": {"seconds": "7200"}}
    op = ce.insert("f", machine="tpu7x-standard-4t", scheduling=flex, params=params)
    ce.emu.advance(600)
    assert ce.instance("f")["status"] == "PENDING"
    assert ce.op(op)["status"] == "RUNNING"
    ce.emu.compute.set_capacity(ZONE, "tpu7x-standard-4t", 1)
    ce.emu.advance(2)
    vm = ce.instance("f")
    assert vm["status"] == "RUNNING" and ce.op(op)["status"] == "DONE"
    assert "terminationTimestamp" in vm["resourceStatus"]["scheduling"]
    ce.emu.advance(3599)
    assert ce.instance("f")["status"] == "RUNNING"
    ce.emu.advance(1)
    assert ce.instance("f")["status"] == "STOPPING"
    ce.emu.advance(1)
    assert ce.get(f"{INSTANCES}/f").status_code == 404


def test_a_flex_start_request_that_lapses_fails_its_insert(ce: ComputeApi) -> None:
    ce.emu.compute.set_capacity(ZONE, "ct6e-standard-8t", 0)
    flex = {"provisioningModel": "FLEX_START", "maxRunDuration": {"seconds": "600"}}
    params = {"requestValidForDuration": {"seconds": "60"}}
    op = ce.insert("f", machine="ct6e-standard-8t", scheduling=flex, params=params)
    ce.emu.advance(59)
    assert ce.instance("f")["status"] == "PENDING"
    ce.emu.advance(1)
    assert ce.get(f"{INSTANCES}/f").status_code == 404
    assert ce.op(op)["error"]["errors"][0]["code"] == "ZONE_RESOURCE_POOL_EXHAUSTED"

    granted = ce.insert("g", machine="ct6e-standard-8t", scheduling=flex)
    lapsed = ce.insert("h", machine="ct6e-standard-8t", scheduling=flex)
    ce.emu.compute.grant_flex(ZONE, "g")
    ce.emu.compute.lapse_flex(ZONE, "h")
    ce.emu.advance(2)
    assert ce.instance("g")["status"] == "RUNNING" and ce.op(granted)["status"] == "DONE"
    assert ce.op(lapsed)["error"]["errors"][0]["code"] == "ZONE_RESOURCE_POOL_EXHAUSTED"
    ce.emu.compute.end_run(ZONE, "g")  # its action is DELETE
    assert ce.instance("g")["status"] == "STOPPING"
    ce.emu.advance(1)
    assert ce.get(f"{INSTANCES}/g").status_code == 404


def test_aggregated_list_pages_across_zones_and_warns_for_empty_scopes(ce: ComputeApi) -> None:
    ce.emu.compute.set_capacity("us-east5-a", "ct6e-standard-1t", None)  # a zone with nothing
    for zone, name in (("us-central1-a", "x"), (ZONE, "a"), (ZONE, "b"), ("europe-west4-a", "e")):
        ce.insert(name, zone=zone, labels={"owner": "me" if name != "b" else "you"})
    seen, token, pages = [], None, 0
    while True:
        page = ce.ok(ce.get("aggregated/instances", maxResults=2,
                            **({"pageToken": token} if token else {})))  # fmt: skip
        pages += 1
        assert set(page["items"]) == {"zones/us-central1-a", f"zones/{ZONE}",
                                      "zones/europe-west4-a", "zones/us-east5-a"}  # fmt: skip
        for scope, entry in page["items"].items():
            if "instances" in entry:
                seen += [(scope, i["name"]) for i in entry["instances"]]
            else:
                assert entry["warning"]["code"] == "NO_RESULTS_ON_PAGE"
        token = page.get("nextPageToken")
        if not token:
            break
    assert pages == 2
    assert seen == [("zones/europe-west4-a", "e"), ("zones/us-central1-a", "x"),
                    (f"zones/{ZONE}", "a"), (f"zones/{ZONE}", "b")]  # fmt: skip
    mine = ce.ok(ce.get("aggregated/instances", filter="labels.owner = me"))
    names = [i["name"] for e in mine["items"].values() for i in e.get("instances", [])]
    assert names == ["e", "x", "a"]
    assert ce.get("aggregated/instances", filter="labels.owner ~ me").status_code == 400
    zonal = ce.ok(ce.get(INSTANCES, filter="(name eq a.*) OR (name eq b)"))
    assert [i["name"] for i in zonal["items"]] == ["a", "b"]


def test_injected_failures_and_slow_operations(ce: ComputeApi) -> None:
    ce.emu.compute.fail_operations(name="doomed-.*", code="UNSUPPORTED_OPERATION",
                                   message="no", after=2, count=1)  # fmt: skip
    op = ce.insert("doomed-1")
    ce.emu.advance(1)
    assert ce.op(op)["status"] == "RUNNING"
    ce.emu.advance(1)
    assert ce.op(op)["error"]["errors"] == [{"code": "UNSUPPORTED_OPERATION", "message": "no"}]
    assert ce.get(f"{INSTANCES}/doomed-1").status_code == 404
    ce.insert("doomed-2")  # the rule was for one request
    ce.emu.compute.set_operation_delay(30)
    slow = ce.insert("slow")
    ce.emu.advance(5)
    assert ce.instance("slow")["status"] == "RUNNING"
    assert ce.op(slow)["status"] == "RUNNING"
    ce.emu.advance(30)
    assert ce.op(slow)["status"] == "DONE"
