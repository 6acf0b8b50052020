"""The real gcloud's Compute Engine commands against the emulator: ``instances list``,
``describe`` and ``delete`` (which waits on the operation with ``operations.wait``).

``CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE`` is the emulator's bare URL, as ``gcloud_env``
sets it; gcloud appends ``compute/v1/`` itself. Four gcloud invocations (~0.7 s of CPU each);
every exchange they made is decoded with the SDK's message classes.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.emulator import Emulator
from tests.fixtures.compute import FAST, POOL
from tests.fixtures.emulator import gcloud_env_for
from tests.support.compute_sdk import decode_all
from tests.support.tools import require_tool

pytestmark = pytest.mark.integration


def gcloud(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require_tool("gcloud"), "compute", "instances", *args],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.fixture
def emu(make_emulator: Callable[..., Emulator]) -> Emulator:
    # a running clock (20x): gcloud's delete waits for its operation to be DONE
    emu = make_emulator(FAST, speed=20, ip_pool=POOL, record_responses=True)
    emu.compute.add_instance("us-central1-c", "slot-a", "ct6e-standard-4t", external_ip=True,
                             labels={"tpu-reconciler": "owned"})  # fmt: skip
    emu.compute.add_instance("europe-west4-a", "legacy", "tpu7x-standard-1t", model="STANDARD")
    emu.compute.add_instance("us-central1-c", "stopped", "ct6e-standard-1t", status="TERMINATED")
    return emu


def test_list_describe_and_delete_through_gcloud(emu: Emulator, tmp_path: Path) -> None:
    env = gcloud_env_for(emu, tmp_path)
    listed = gcloud(env, "list", "--format=json")
    assert listed.returncode == 0, listed.stderr
    rows = {i["name"]: i for i in json.loads(listed.stdout)}
    assert {n: (i["zone"].rsplit("/", 1)[1], i["status"]) for n, i in rows.items()} == {
        "slot-a": ("us-central1-c", "RUNNING"),
        "legacy": ("europe-west4-a", "RUNNING"),
        "stopped": ("us-central1-c", "TERMINATED"),
    }
    assert emu.request_counts()["GET compute.instances.aggregatedList"] == 1

    described = gcloud(env, "describe", "slot-a", "--zone=us-central1-c", "--format=json")
    assert described.returncode == 0, described.stderr
    vm = json.loads(described.stdout)
    nic = vm["networkInterfaces"][0]
    assert nic["networkIP"].startswith("127.0.0.") and nic["accessConfigs"][0]["natIP"]
    assert vm["labels"] == {"tpu-reconciler": "owned"}
    assert vm["scheduling"]["provisioningModel"] == "SPOT"

    deleted = gcloud(env, "delete", "slot-a", "--zone=us-central1-c", "--quiet")
    assert deleted.returncode == 0, deleted.stderr
    assert "Deleted [" in deleted.stderr
    assert emu.compute.instance("us-central1-c", "slot-a") is None
    counts = emu.request_counts()
    assert counts["DELETE compute.instances.delete"] == 1
    assert counts["POST compute.zoneOperations.wait"] >= 1

    missing = gcloud(env, "describe", "slot-a", "--zone=us-central1-c")
    assert missing.returncode == 1
    assert "was not found" in missing.stderr
    assert decode_all(emu.requests()) == sum(counts.values()) + 1
