"""The emulator's multislice queued resources, driven over HTTP as the REST adapter and gcloud
drive them: N nodes named ``<prefix>-i``, N units of capacity, one lifecycle."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from reconciler.adapters.tpu_api_parse import QRState, node_from_api
from reconciler.model.observed import NodeState
from tests.unit.test_emulator import BASE, ZONE, Api, create_body
from tests.unit.test_emulator import api as api  # the same fixture: a frozen emulator


def multislice(name: str, count: Any = 2, prefix: str | None = None, **kw: Any) -> dict[str, Any]:
    body = create_body(name, "v4-32", **kw)
    spec = body["tpu"]["nodeSpec"][0]
    del spec["nodeId"]
    spec["multisliceParams"] = {"nodeCount": count, **({"nodeIdPrefix": prefix} if prefix else {})}
    return body


def post(api: Api, name: str, body: dict[str, Any]) -> httpx.Response:
    return api.http.post(
        f"{BASE}/{ZONE}/queuedResources", params={"queuedResourceId": name}, json=body
    )


def test_n_nodes_with_their_own_workers_live_and_die_with_the_queued_resource(api: Api) -> None:
    assert post(api, "ms", multislice("ms", 2, prefix="np")).status_code == 200
    api.emu.advance(10)
    assert api.state("ms") is QRState.ACTIVE
    qr = api.get(f"{ZONE}/queuedResources/ms").json()
    assert qr["tpu"]["nodeSpec"][0]["multisliceParams"] == {"nodeCount": 2, "nodeIdPrefix": "np"}
    nodes = [node_from_api(api.get(f"{ZONE}/nodes/np-{i}").json()) for i in range(2)]
    assert all(n.state is NodeState.READY and n.multislice_node for n in nodes)
    assert all(n.request and n.request.endswith("/ms") for n in nodes)
    assert nodes[0].ips() + nodes[1].ips() == tuple(f"127.0.0.{i}" for i in range(2, 10))
    assert api.get(f"{ZONE}/nodes/ms").status_code == 404

    assert api.delete("ms", force=True).status_code == 200
    assert api.get(f"{ZONE}/nodes/np-1").json()["state"] == "DELETING"
    api.emu.advance(3)
    assert [api.get(f"{ZONE}/nodes/np-{i}").status_code for i in range(2)] == [404, 404]


def test_the_prefix_defaults_to_the_queued_resource_id(api: Api) -> None:
    post(api, "ms", multislice("ms", 3))
    api.emu.advance(10)
    assert [api.get(f"{ZONE}/nodes/ms-{i}").status_code for i in range(3)] == [200] * 3


def test_it_waits_for_a_unit_of_capacity_per_slice(api: Api) -> None:
    api.emu.set_capacity(ZONE, "v4-32", 1)
    post(api, "ms", multislice("ms", 2))
    api.emu.advance(10)
    assert api.state("ms") is QRState.WAITING_FOR_RESOURCES
    api.emu.set_capacity(ZONE, "v4-32", 2)
    assert api.state("ms") is QRState.PROVISIONING


def test_preempting_one_slice_suspends_the_queued_resource(api: Api) -> None:
    api.emu.add_queued_resource(ZONE, "ms", "v4-32", state="ACTIVE", slices=2)
    api.emu.preempt(ZONE, "ms-1")
    assert api.get(f"{ZONE}/nodes/ms-1").json()["state"] == "PREEMPTED"
    assert api.get(f"{ZONE}/nodes/ms-0").json()["state"] == "READY"
    api.emu.advance(10)
    assert api.state("ms") is QRState.SUSPENDED


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"count": 1}, "greater than 1"),
        ({"count": "two"}, "greater than 1"),
        ({"prefix": "Bad Prefix"}, "nodeIdPrefix"),
    ],
)
def test_malformed_multislice_params_are_refused(
    api: Api, change: dict[str, Any], message: str
) -> None:
    refused = post(api, "ms", multislice("ms", **change))
    assert refused.status_code == 400 and message in refused.json()["error"]["message"]


def test_a_node_id_beside_multislice_params_is_refused(api: Api) -> None:
    body = multislice("ms")
    body["tpu"]["nodeSpec"][0]["nodeId"] = "ms"
    refused = post(api, "ms", body)
    assert refused.status_code == 400 and "not both" in refused.json()["error"]["message"]


def test_v2alpha1_names_the_multislice_params_multinodeparams_v2_multisliceparams(api: Api) -> None:
    # as the two APIs' messages do, whatever version the QR was created through
    assert post(api, "ms", multislice("ms", 2)).status_code == 200
    v2 = api.get(f"{ZONE}/queuedResources/ms").json()["tpu"]["nodeSpec"][0]
    alpha_url = f"v2alpha1{BASE.removeprefix('v2')}/{ZONE}/queuedResources/ms"
    alpha = api.http.get(alpha_url).json()["tpu"]["nodeSpec"][0]
    assert (
        v2["multisliceParams"] == alpha["multiNodeParams"] == {"nodeCount": 2, "nodeIdPrefix": "ms"}
    )
    assert "multiNodeParams" not in v2 and "multisliceParams" not in alpha
