"""The emulator's copy of the Compute Engine field names is the SDK's (a drift test), and it
refuses a body the real API would: an unknown name at any depth, a value of the wrong kind, an
enum value the API does not have."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from google.cloud.compute_v1 import types as sdk

from reconciler.emulator._compute_errors import ComputeError
from reconciler.emulator._compute_schema import check, fields

ROOT = Path(__file__).resolve().parents[2]


def test_the_generated_field_names_are_the_installed_sdks() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_compute_fields.py"), "--check"],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("regional", "zonal"),
    [
        (sdk.RegionInstanceGroupManagersCreateInstancesRequest,
         sdk.InstanceGroupManagersCreateInstancesRequest),
        (sdk.RegionInstanceGroupManagersDeleteInstancesRequest,
         sdk.InstanceGroupManagersDeleteInstancesRequest),
    ],
)  # fmt: skip
def test_regional_request_bodies_have_the_zonal_fields(regional: object, zonal: object) -> None:
    def names(message: object) -> set[str]:
        return {f.json_name for f in message.pb().DESCRIPTOR.fields}  # type: ignore[attr-defined]

    assert names(regional) == names(zonal)
    assert names(zonal) == set(fields(zonal.__name__))  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"scheduling": {"maxRunDuration": {"second": 1}}},
         "Unknown name \"second\" at 'instance_resource.scheduling.max_run_duration'"),
        ({"networkInterfaces": [{"accessConfigs": [{"natIp": "1.2.3.4"}]}]},
         "at 'instance_resource.network_interfaces[0].access_configs[0]'"),
        ({"canIpForward": "yes"}, "'instance_resource.can_ip_forward' (TYPE_BOOL), \"yes\""),
        ({"disks": {"boot": True}}, "'instance_resource.disks' (a list)"),
        ({"labels": {"a": 1}}, "'instance_resource.labels' (map<string, string>)"),
        ({"scheduling": {"instanceTerminationAction": "delete"}},
         "Invalid value for field 'resource.scheduling.instanceTerminationAction': 'delete'."),
    ],
)  # fmt: skip
def test_bodies_google_would_refuse_are_refused(body: dict[str, object], words: str) -> None:
    with pytest.raises(ComputeError) as refused:
        check(body, "Instance", "instance_resource")
    assert refused.value.code == 400 and words in refused.value.message


def test_a_full_body_of_every_kind_passes() -> None:
    body = {
        "name": "a", "canIpForward": False, "labels": {"k": "v"},
        "disks": [{"boot": True, "diskSizeGb": "200", "initializeParams": {"diskSizeGb": 200}}],
        "scheduling": {"provisioningModel": "FLEX_START", "maxRunDuration": {"seconds": "60"},
                       "nodeAffinities": [], "availabilityDomain": 1},
        "params": {"requestValidForDuration": {"seconds": 60, "nanos": 0}},
        "networkInterfaces": [{"accessConfigs": [{"natIP": "1.2.3.4", "type": "ONE_TO_ONE_NAT"}]}],
        "metadata": {"items": [{"key": "k", "value": "v"}]}, "description": None,
    }  # fmt: skip
    check(body, "Instance", "instance_resource")
    sdk.Instance.from_json(json.dumps(body), ignore_unknown_fields=False)
