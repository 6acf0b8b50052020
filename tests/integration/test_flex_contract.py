"""Flex-start and node signals on the wire: the create bodies both backends send decode
strictly into the installed SDK's v2alpha1 ``QueuedResource`` (the real ``gcloud alpha`` sends
one against the emulator), what the emulator renders decodes into v2alpha1 (flex-start's
``runDuration``) and v2 (a node's ``symptoms`` and ``upcomingMaintenance``), and a zone that
does not offer flex-start refuses the create with the cloud's message, a permanent error."""

from __future__ import annotations

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
from reconciler.errors import PermanentCloudError
from reconciler.model.requests import CreateRequest
from tests.integration.test_api_shapes import unrecognized
from tests.support.tools import require_tool

pytestmark = pytest.mark.integration

ZONE = "us-east5-b"
PROJECT = "test-project"


def flex_request(name: str, zone: str = ZONE) -> CreateRequest:
    return CreateRequest(
        name=name,
        zone=zone,
        accelerator="v6e-8",
        image="v2-alpha-tpuv6e",
        mode="flex-start",
        max_run_seconds=6 * 3600,
        labels={"managed-by": "tpu-reconciler"},
        valid_until_seconds=3600,
    )


@pytest.fixture(scope="module")
def sdk() -> Iterator[tuple[ModuleType, ModuleType]]:
    """(v2, v2alpha1) generated message modules of the installed gcloud SDK."""
    gcloud = require_tool("gcloud")
    root = subprocess.run(
        [gcloud, "info", "--format=value(installation.sdk_root)"],
        capture_output=True, text=True, check=True, timeout=120, stdin=subprocess.DEVNULL,
    ).stdout.strip()  # fmt: skip
    saved = list(sys.path)
    sys.path[:0] = [str(Path(root) / "lib"), str(Path(root) / "lib" / "third_party")]
    try:
        from googlecloudsdk.generated_clients.apis.tpu.v2 import tpu_v2_messages
        from googlecloudsdk.generated_clients.apis.tpu.v2alpha1 import tpu_v2alpha1_messages

        yield tpu_v2_messages, tpu_v2alpha1_messages
    finally:
        sys.path[:] = saved


def decode(messages: ModuleType, kind: str, body: Any) -> Any:
    import json

    from apitools.base.py import encoding

    text = json.dumps(body)
    message = encoding.JsonToMessage(getattr(messages, kind), text)
    extra = unrecognized(message)
    assert not extra, f"{kind} fields {messages.__name__} does not define: {extra}\n{text}"
    return message


def flex_creates(emulator: Emulator) -> list[tuple[str, Any]]:
    return [
        (r.path, r.body)
        for r in emulator.requests()
        if r.key == "POST queuedResources.create" and r.status == 200
    ]


def check_flex_body(alpha: ModuleType, path: str, body: Any) -> None:
    assert path.startswith("/v2alpha1/"), path
    qr = decode(alpha, "QueuedResource", body)
    assert qr.provisioningModel == alpha.QueuedResource.ProvisioningModelValueValuesEnum.FLEX_START
    assert qr.runDuration.maxRunDuration == "21600s"
    assert qr.spot is None and qr.guaranteed is None
    assert qr.tpu.nodeSpec[0].node.acceleratorType == "v6e-8"


async def test_rest_sends_a_v2alpha1_flex_start_create(
    sdk: tuple[ModuleType, ModuleType], emulator: Emulator, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("t\n")
    env = {"CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": str(token)}
    async with RestCloud(PROJECT, endpoint=emulator.url, env=env, alpha_reads=True) as cloud:
        await cloud.create_request(flex_request("flex-rest"))
        emulator.advance(60)
        seen = await cloud.observe(None)
    ((path, body),) = flex_creates(emulator)
    check_flex_body(sdk[1], path, body)
    (qr,) = seen.requests
    assert qr.mode == "flex-start" and qr.termination_time is not None
    lists = [r.path for r in emulator.requests() if r.key.endswith(".list")]
    assert sorted(lists) == [  # one observation is still two list requests
        f"/v2/projects/{PROJECT}/locations/-/nodes",
        f"/v2alpha1/projects/{PROJECT}/locations/-/queuedResources",
    ]


async def test_gcloud_alpha_sends_a_v2alpha1_flex_start_create(
    sdk: tuple[ModuleType, ModuleType], emulator: Emulator, gcloud_env: dict[str, str]
) -> None:
    gcloud = require_tool("gcloud")
    cloud = GcloudCloud(PROJECT, gcloud=gcloud, env=gcloud_env, alpha_reads=True)
    try:
        submitted = await cloud.create_request(flex_request("flex-gcloud"))
        assert submitted.operation
        emulator.advance(60)
        seen = await cloud.observe([ZONE])
    finally:
        await cloud.aclose()
    ((path, body),) = flex_creates(emulator)
    check_flex_body(sdk[1], path, body)
    (qr,) = seen.requests
    assert qr.mode == "flex-start" and qr.termination_time is not None


@pytest.mark.parametrize("backend", ["rest", "gcloud"])
async def test_a_zone_without_flex_start_refuses_it_permanently(
    backend: str, emulator: Emulator, gcloud_env: dict[str, str], tmp_path: Path
) -> None:
    emulator.reject_flex_start(ZONE, "v6e-8")
    cloud: RestCloud | GcloudCloud
    if backend == "rest":
        token = tmp_path / "token"
        token.write_text("t\n")
        env = {"CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": str(token)}
        cloud = RestCloud(PROJECT, endpoint=emulator.url, env=env)
    else:
        cloud = GcloudCloud(PROJECT, gcloud=require_tool("gcloud"), env=gcloud_env)
    try:
        with pytest.raises(PermanentCloudError) as refused:
            await cloud.create_request(flex_request("flex-no"))
    finally:
        await cloud.aclose()
    assert 'FLEX_START provisioning model is not supported for accelerator type "v6e-8"' in str(
        refused.value
    )
    assert f'in location "{ZONE}"' in str(refused.value)


def test_the_emulator_renders_flex_runs_and_node_signals_as_the_sdk_defines_them(
    sdk: tuple[ModuleType, ModuleType], emulator: Emulator
) -> None:
    v2, alpha = sdk
    body = {
        "provisioningModel": "FLEX_START",
        "runDuration": {"maxRunDuration": "3600s"},
        "tpu": {"nodeSpec": [{"parent": f"projects/{PROJECT}/locations/{ZONE}", "nodeId": "f",
                "node": {"acceleratorType": "v6e-8", "runtimeVersion": "v2-alpha-tpuv6e"}}]},
    }  # fmt: skip
    with httpx.Client(trust_env=False) as http:

        def call(method: str, version: str, path: str, **kw: Any) -> Any:
            url = f"{emulator.url}{version}/projects/{PROJECT}/locations/{path}"
            answer = http.request(method, url, **kw)
            assert answer.status_code == 200, answer.text
            return answer.json()

        refused = http.post(
            f"{emulator.url}v2/projects/{PROJECT}/locations/{ZONE}/queuedResources",
            params={"queuedResourceId": "f"},
            json=body,
        )
        assert refused.status_code == 400 and "provisioningModel" in refused.text
        call("POST", "v2alpha1", f"{ZONE}/queuedResources", params={"queuedResourceId": "f"},
             json=body)  # fmt: skip
        emulator.advance(60)
        emulator.set_node_health(
            ZONE,
            "f",
            health="UNHEALTHY_TENSORFLOW",
            symptoms=[{"symptomType": "HBM_OUT_OF_MEMORY", "workerId": "0", "details": "x",
                       "createTime": "2026-12-01T10:00:00Z"}],
            maintenance={"type": "SCHEDULED", "maintenanceStatus": "PENDING",
                         "windowStartTime": "2026-12-02T08:00:00Z", "canReschedule": True},
        )  # fmt: skip
        listed = decode(
            alpha, "ListQueuedResourcesResponse", call("GET", "v2alpha1", "-/queuedResources")
        )
        (qr,) = listed.queuedResources
        assert qr.runDuration.terminationTime and qr.runDuration.maxRunDuration == "3600s"
        decode(v2, "ListQueuedResourcesResponse", call("GET", "v2", "-/queuedResources"))
        nodes = decode(v2, "ListNodesResponse", call("GET", "v2", "-/nodes"))
        (node,) = nodes.nodes
        assert node.symptoms[0].symptomType.name == "HBM_OUT_OF_MEMORY"
        assert node.upcomingMaintenance.canReschedule is True
        emulator.advance(3600)  # the run ends: VMs deleted, QR SUSPENDED
        (ended,) = call("GET", "v2alpha1", "-/queuedResources")["queuedResources"]
        assert ended["state"]["state"] == "SUSPENDED"
        assert ended["state"]["stateInitiator"] == "SERVICE"
        assert "nodes" not in call("GET", "v2", "-/nodes")
