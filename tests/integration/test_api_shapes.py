"""Shapes as the API defines them: every request body the project sends and every response the
emulator renders, decoded with the installed gcloud SDK's generated TPU v2 message classes
(apitools ``encoding.JsonToMessage``). A field the messages do not define fails the test.

Request bodies are taken from the emulator's request log, as both backends really sent them
(the REST adapter, and the real gcloud CLI pointed at the emulator). A new ``CreateRequest``
field is covered by adding a case to ``CREATE_CASES`` (e.g. queueing windows: one case per
window form).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from reconciler.adapters.gcloud import GcloudCloud
from reconciler.adapters.rest import RestCloud
from reconciler.emulator import Emulator
from reconciler.model.requests import CreateRequest
from tests.support.tools import require_tool

pytestmark = pytest.mark.integration

ZONE = "us-central2-b"
PROJECT = "test-project"

#: name -> CreateRequest fields beyond the basics. Each mode, network and subnet, internal IPs,
#: labels, the queueing policy: add a case when CreateRequest gains a field.
CREATE_CASES: dict[str, dict[str, Any]] = {
    "spot-labels-valid-until": {
        "mode": "spot",
        "labels": {"managed-by": "tpu-reconciler", "team": "ml"},
        "valid_until_seconds": 3600,
    },
    "on-demand-network-subnet-internal": {
        "mode": "on-demand",
        "network": "my-vpc",
        "subnetwork": "my-subnet",
        "internal_ips": True,
    },
    "reserved": {"mode": "reserved", "network": "projects/test-project/global/networks/v"},
    # queueing windows (start_at / start_after, alone and with valid_until: validInterval)
    "start-after": {"mode": "spot", "valid_after_seconds": 7200},
    "start-at": {"mode": "spot", "valid_after_time": 1_900_000_000.0},
    "start-at-until": {
        "mode": "on-demand",
        "valid_after_time": 1_900_000_000.0,
        "valid_until_seconds": 6 * 3600,
    },
    "start-after-until": {
        "mode": "spot",
        "valid_after_seconds": 600,
        "valid_until_seconds": 3600,
    },
    # multislice (slices: 2): multisliceParams instead of a nodeId
    "multislice": {"mode": "spot", "slices": 2},
    # setup.at_boot: the node's metadata carries the startup script (gcloud: from a file)
    "at-boot": {"mode": "spot", "startup_script": "#!/bin/bash\n# boot, with 'quotes', $x\n"},
}
#: the QueueingPolicy fields each window case must set (the API's oneof: one of them)
WINDOW_FIELDS: dict[str, str] = {
    "spot-labels-valid-until": "validUntilDuration",
    "start-after": "validAfterDuration",
    "start-at": "validAfterTime",
    "start-at-until": "validInterval",
    "start-after-until": "validInterval",
}


def _request(case: str) -> CreateRequest:
    name = f"c{list(CREATE_CASES).index(case)}-{case}"[:40].rstrip("-")
    return CreateRequest(
        name=name,
        zone=ZONE,
        accelerator="v4-8",
        image="tpu-ubuntu2204-base",
        **CREATE_CASES[case],
    )


@pytest.fixture(scope="module")
def messages() -> Iterator[ModuleType]:
    gcloud = require_tool("gcloud")
    root = subprocess.run(
        [gcloud, "info", "--format=value(installation.sdk_root)"],
        capture_output=True, text=True, check=True, timeout=120, stdin=subprocess.DEVNULL,
    ).stdout.strip()  # fmt: skip
    paths = [str(Path(root) / "lib"), str(Path(root) / "lib" / "third_party")]
    saved = list(sys.path)
    sys.path[:0] = paths
    try:
        from googlecloudsdk.generated_clients.apis.tpu.v2 import tpu_v2_messages

        yield tpu_v2_messages
    finally:
        sys.path[:] = saved


def unrecognized(message: Any, path: str = "") -> list[str]:
    """Every field anywhere in ``message`` that its class does not define."""
    found = [f"{path}{name}" for name in message.all_unrecognized_fields()]
    for field in message.all_fields():
        value = message.get_assigned_value(field.name)
        values = value if isinstance(value, list) else [value]
        for i, item in enumerate(values):
            if hasattr(item, "all_unrecognized_fields"):
                where = f"{path}{field.name}{f'[{i}]' if field.repeated else ''}."
                found += unrecognized(item, where)
    return found


def decode(messages: ModuleType, kind: str, body: Any) -> Any:
    from apitools.base.py import encoding

    text = body if isinstance(body, str) else json.dumps(body)
    message = encoding.JsonToMessage(getattr(messages, kind), text)
    extra = unrecognized(message)
    assert not extra, f"{kind} fields the v2 API does not define: {extra}\n{text[:2000]}"
    return message


def create_bodies(emulator: Emulator) -> dict[str, Any]:
    return {
        r.query["queuedResourceId"]: r.body
        for r in emulator.requests()
        if r.key == "POST queuedResources.create"
    }


# --- requests ----------------------------------------------------------------------------------


async def test_rest_request_bodies_are_v2_messages(
    messages: ModuleType, emulator: Emulator, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("t\n")
    env = {"CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": str(token)}
    async with RestCloud(PROJECT, endpoint=emulator.url, env=env) as cloud:
        for case in CREATE_CASES:
            await cloud.create_request(_request(case))
        emulator.add_queued_resource(ZONE, "ga", state="ACTIVE")
        await cloud.guest_attributes(ZONE, "ga", "guest-agent/")
        await _new_boot_script(cloud, emulator)
    bodies = create_bodies(emulator)
    assert len(bodies) == len(CREATE_CASES)
    for case in CREATE_CASES:
        qr = decode(messages, "QueuedResource", bodies[_request(case).name])
        node = qr.tpu.nodeSpec[0].node
        assert node.acceleratorType == "v4-8"
        if CREATE_CASES[case].get("internal_ips"):
            assert node.networkConfig.enableExternalIps is False
        if CREATE_CASES[case]["mode"] == "spot":
            assert qr.spot is not None
        assert _window_fields(qr) == ([WINDOW_FIELDS[case]] if case in WINDOW_FIELDS else [])
        _check_node_spec(qr, _request(case))
    (guest,) = [r for r in emulator.requests() if r.key == "POST nodes.getGuestAttributes"]
    decode(messages, "GetGuestAttributesRequest", guest.body)
    patch = [r for r in emulator.requests() if r.key == "PATCH nodes.patch"][-1]  # ours
    assert patch.query == {"updateMask": "metadata"}
    decode(messages, "Node", patch.body)


async def _new_boot_script(cloud: RestCloud | GcloudCloud, emulator: Emulator) -> None:
    """A live node's startup script replaced: the keys others set there stay."""
    http = httpx.Client(trust_env=False)
    url = f"{emulator.url}v2/projects/{PROJECT}/locations/{ZONE}/nodes/ga?updateMask=metadata"
    keys = {"metadata": {"ssh-keys": "alice:ssh-ed25519 AAAA alice", "startup-script": "old"}}
    assert http.patch(url, json=keys).status_code == 200
    await cloud.set_boot_script("tpu", ZONE, "ga", "#!/bin/bash\necho new\n")
    node = emulator.node(ZONE, "ga")
    assert node is not None and node["metadata"] == {
        "ssh-keys": "alice:ssh-ed25519 AAAA alice",
        "startup-script": "#!/bin/bash\necho new\n",
        "enable-guest-attributes": "TRUE",
    }
    http.close()


async def test_gcloud_request_bodies_are_v2_messages(
    messages: ModuleType, emulator: Emulator, gcloud_env: dict[str, str]
) -> None:
    gcloud = require_tool("gcloud")
    cloud = GcloudCloud(PROJECT, gcloud=gcloud, env=gcloud_env)
    try:
        submitted = [await cloud.create_request(_request(c)) for c in CREATE_CASES]
        emulator.add_queued_resource(ZONE, "ga", state="ACTIVE")
        await _new_boot_script(cloud, emulator)  # through REST: gcloud cannot merge metadata
        # the operation gcloud printed can be read back (over REST: gcloud has no command)
        assert all(s.operation for s in submitted)
        status = await cloud.get_operation(str(submitted[0].operation))
        assert status is not None and status.name == submitted[0].operation
    finally:
        await cloud.aclose()
    bodies = create_bodies(emulator)
    assert len(bodies) == len(CREATE_CASES)
    for case in CREATE_CASES:
        qr = decode(messages, "QueuedResource", bodies[_request(case).name])
        assert _window_fields(qr) == ([WINDOW_FIELDS[case]] if case in WINDOW_FIELDS else [])
        _check_node_spec(qr, _request(case))


def _check_node_spec(qr: Any, request: CreateRequest) -> None:
    """One node named like the QR, or a multislice of ``node_count`` nodes ``<name>-i``; the
    startup script and guest attributes in its metadata when the request has one."""
    (spec,) = qr.tpu.nodeSpec
    metadata = spec.node.metadata
    items = {p.key: p.value for p in metadata.additionalProperties} if metadata else {}
    if request.startup_script is not None:
        assert items == {
            "startup-script": request.startup_script,
            "enable-guest-attributes": "TRUE",
        }
    else:
        assert items == {}
    if request.slices > 1:
        assert spec.nodeId is None
        assert (spec.multisliceParams.nodeCount, spec.multisliceParams.nodeIdPrefix) == (
            request.slices,
            request.name,
        )
    else:
        assert (spec.nodeId, spec.multisliceParams) == (request.name, None)


def _window_fields(qr: Any) -> list[str]:
    policy = qr.queueingPolicy
    if policy is None:
        return []
    return [f.name for f in policy.all_fields() if policy.get_assigned_value(f.name) is not None]


# --- responses ---------------------------------------------------------------------------------


def test_every_response_the_emulator_renders_is_a_v2_message(
    messages: ModuleType, emulator: Emulator
) -> None:
    for state in ("ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING", "ACTIVE", "SUSPENDED"):
        emulator.add_queued_resource(ZONE, state.lower().replace("_", "-"), state=state)
    emulator.add_queued_resource(ZONE, "failed", state="FAILED")
    emulator.add_queued_resource("europe-west4-a", "creating")
    emulator.set_unreachable("us-east1-d")
    base = f"{emulator.url}v2/projects/{PROJECT}/locations"
    with httpx.Client(trust_env=False) as http:

        def get(path: str, **kw: Any) -> Any:
            answer = http.get(f"{base}/{path}", **kw)
            assert answer.status_code == 200, answer.text
            return answer.json()

        def send(method: str, path: str, **kw: Any) -> Any:
            answer = http.request(method, f"{base}/{path}", **kw)
            assert answer.status_code == 200, answer.text
            return answer.json()

        listed = decode(messages, "ListQueuedResourcesResponse", get("-/queuedResources"))
        assert len(listed.queuedResources) == 7 and listed.unreachable
        decode(messages, "ListQueuedResourcesResponse", get("-/queuedResources?pageSize=2"))
        decode(messages, "QueuedResource", get(f"{ZONE}/queuedResources/failed"))
        nodes = decode(messages, "ListNodesResponse", get("-/nodes"))
        assert nodes.nodes
        decode(messages, "Node", get(f"{ZONE}/nodes/active"))
        emulator.set_guest_attribute(ZONE, "active", "setup", "g0 done")  # a worker's report
        decode(
            messages,
            "GetGuestAttributesResponse",
            send("POST", f"{ZONE}/nodes/active:getGuestAttributes", json={}),
        )
        update = {"metadata": {"startup-script": "#!/bin/bash\n", "ssh-keys": "u:ssh-ed25519 k"}}
        decode(messages, "Node", update)  # the body ``nodes.patch`` takes
        patched = send("PATCH", f"{ZONE}/nodes/active?updateMask=metadata", json=update)
        decode(messages, "Operation", patched)
        assert decode(messages, "Node", get(f"{ZONE}/nodes/active")).metadata is not None
        body = {"tpu": {"nodeSpec": [{"parent": f"projects/{PROJECT}/locations/{ZONE}",
                "nodeId": "fresh", "node": {"acceleratorType": "v4-8",
                "runtimeVersion": "tpu-ubuntu2204-base"}}]}}  # fmt: skip
        created = send("POST", f"{ZONE}/queuedResources?queuedResourceId=fresh", json=body)
        decode(messages, "Operation", created)
        deleting = send("DELETE", f"{ZONE}/queuedResources/active?force=true")
        decode(messages, "Operation", deleting)
        emulator.fail_operations(verb="create", name="doomed", status="INVALID_ARGUMENT")
        doomed = send("POST", f"{ZONE}/queuedResources?queuedResourceId=doomed",
                      json={**body, "tpu": {"nodeSpec": [{**body["tpu"]["nodeSpec"][0],
                                                          "nodeId": "doomed"}]}})  # fmt: skip
        emulator.advance(10)
        for op in (created, deleting, doomed):
            done = decode(messages, "Operation", get(op["name"].split("/locations/", 1)[1]))
            assert done.done
        assert get(doomed["name"].split("/locations/", 1)[1])["error"]["code"] == 3


def test_a_multislice_queued_resource_and_its_nodes_are_v2_messages(
    messages: ModuleType, emulator: Emulator
) -> None:
    emulator.add_queued_resource(ZONE, "ms", "v4-32", state="ACTIVE", slices=2)
    base = f"{emulator.url}v2/projects/{PROJECT}/locations"
    with httpx.Client(trust_env=False) as http:
        qr = decode(
            messages, "QueuedResource", http.get(f"{base}/{ZONE}/queuedResources/ms").json()
        )
        listed = decode(messages, "ListNodesResponse", http.get(f"{base}/-/nodes").json())
    (spec,) = qr.tpu.nodeSpec
    assert (spec.multisliceParams.nodeCount, spec.multisliceParams.nodeIdPrefix) == (2, "ms")
    nodes = sorted(listed.nodes, key=lambda n: n.name)
    assert [n.name.rsplit("/", 1)[1] for n in nodes] == ["ms-0", "ms-1"]
    assert all(n.multisliceNode and n.queuedResource.endswith("/queuedResources/ms") for n in nodes)
    ips = [[e.ipAddress for e in n.networkEndpoints] for n in nodes]
    assert [len(i) for i in ips] == [4, 4] and not set(ips[0]) & set(ips[1])


def test_the_check_itself_fails_on_a_field_the_api_does_not_define(messages: ModuleType) -> None:
    bad = {"spot": {}, "tpu": {"nodeSpec": [{"node": {"acceleratorType": "v4-8", "reserved": 1}}]}}
    with pytest.raises(AssertionError, match=r"tpu\.nodeSpec\[0\]\.node\.reserved"):
        decode(messages, "QueuedResource", bad)
    with pytest.raises(AssertionError, match=r"guaranteed\.reserved"):
        decode(messages, "QueuedResource", {"guaranteed": {"reserved": True}})
