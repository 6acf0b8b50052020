"""The real gcloud against the emulator: what users and the gcloud backend will see.

Six gcloud invocations in all (each costs ~0.7 s of CPU); the clock is frozen and moved with
``advance`` so nothing waits on emulated time.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.adapters.tpu_api_parse import QRState, request_from_api
from reconciler.emulator import Emulator, Fault, Scenario
from tests.fixtures.emulator import gcloud_env_for
from tests.support.tools import require_tool

pytestmark = pytest.mark.integration

ZONE = "us-central2-b"
SCENARIO = """
page_size: 2          # three QRs: gcloud must follow nextPageToken
timings: {accept: 1, provision: 2, activate: 5, delete: 3}
queued_resources:
  - {name: spot-a, zone: us-central2-b, accelerator: v4-32, state: ACTIVE,
     labels: {managed-by: tpu-reconciler}}
  - {name: waiting-b, zone: europe-west4-a, accelerator: v6e-8}
  - {name: od-c, zone: us-east5-a, accelerator: v5litepod-16, mode: on-demand, state: FAILED}
"""


def gcloud(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require_tool("gcloud"), "compute", "tpus", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def frozen(make_emulator: Callable[..., Emulator]) -> Emulator:
    return make_emulator(Scenario.from_yaml(SCENARIO), speed=0)


@pytest.fixture
def env(frozen: Emulator, tmp_path: Path) -> dict[str, str]:
    return gcloud_env_for(frozen, tmp_path)


def test_list_all_zones_shows_what_the_scenario_created(
    frozen: Emulator, env: dict[str, str]
) -> None:
    frozen.advance(1)
    done = gcloud(env, "queued-resources", "list", "--zone=-", "--format=json")
    assert done.returncode == 0, done.stderr
    qrs = {q.name: q for q in map(request_from_api, json.loads(done.stdout))}
    assert {name: (q.zone, q.api_state, q.mode) for name, q in qrs.items()} == {
        "spot-a": (ZONE, QRState.ACTIVE, "spot"),
        "waiting-b": ("europe-west4-a", QRState.ACCEPTED, "spot"),
        "od-c": ("us-east5-a", QRState.FAILED, "on-demand"),
    }
    assert qrs["spot-a"].managed
    assert qrs["od-c"].error is not None and qrs["od-c"].error.code == 8
    assert frozen.request_counts()["GET queuedResources.list"] == 2  # two pages


def test_create_describe_and_force_delete(frozen: Emulator, env: dict[str, str]) -> None:
    created = gcloud(
        env, "queued-resources", "create", "mine", f"--zone={ZONE}", "--node-id=mine",
        "--accelerator-type=v4-8", "--runtime-version=tpu-ubuntu2204-base", "--spot",
        "--labels=managed-by=tpu-reconciler", "--valid-until-duration=6h", "--async",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    (post,) = [r for r in frozen.requests() if r.method == "POST"]
    assert post.query["queuedResourceId"] == "mine"
    assert post.body["spot"] == {}
    assert post.body["queueingPolicy"] == {"validUntilDuration": "21600s"}

    frozen.advance(8)
    described = gcloud(
        env, "queued-resources", "describe", "mine", f"--zone={ZONE}", "--format=json"
    )
    assert described.returncode == 0, described.stderr
    qr = request_from_api(json.loads(described.stdout))
    assert (qr.api_state, qr.accelerator, qr.managed) == (QRState.ACTIVE, "v4-8", True)

    deleted = gcloud(
        env, "queued-resources", "delete", "mine", f"--zone={ZONE}", "--force", "--quiet", "--async"
    )
    assert deleted.returncode == 0, deleted.stderr
    (delete,) = [r for r in frozen.requests() if r.method == "DELETE"]
    assert delete.query["force"].lower() == "true"
    gone = frozen.queued_resource(ZONE, "mine")
    assert gone is not None and gone["state"]["state"] == "DELETING"
    frozen.advance(3)
    assert frozen.queued_resource(ZONE, "mine") is None
    assert frozen.node(ZONE, "mine") is None


def test_an_injected_already_exists_is_gclouds_error_with_exit_1(
    emulator: Emulator, gcloud_env: dict[str, str]
) -> None:
    emulator.inject_fault(Fault(status="ALREADY_EXISTS", method="POST"))
    refused = gcloud(
        gcloud_env, "queued-resources", "create", "dup", f"--zone={ZONE}", "--node-id=dup",
        "--accelerator-type=v4-8", "--runtime-version=tpu-ubuntu2204-base", "--async",
    )  # fmt: skip
    assert refused.returncode == 1
    assert "(gcloud.compute.tpus.queued-resources.create) ALREADY_EXISTS:" in refused.stderr
    assert emulator.queued_resource(ZONE, "dup") is None


async def test_os_login_describe_profile_is_answered_by_the_emulator(
    frozen: Emulator, env: dict[str, str], tmp_path: Path
) -> None:
    """The adapter's own lookup, through the real gcloud and its OS Login endpoint override:
    the emulator answers (nothing goes to oslogin.googleapis.com) with its primary user."""
    from reconciler.adapters import oslogin

    user = await oslogin.lookup(gcloud=require_tool("gcloud"), env=env, timeout=60)
    assert user == "demo_user"
    [request] = [r for r in frozen.requests() if r.key == "GET users.getLoginProfile"]
    assert request.path == f"/v1/users/{env['CLOUDSDK_CORE_ACCOUNT']}/loginProfile"
