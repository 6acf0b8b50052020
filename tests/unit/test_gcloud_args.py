"""gcloud argument lists: the exact commands, and nothing unvalidated reaches them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from reconciler.adapters import _gcloud_args as args
from reconciler.errors import UnsafeName
from reconciler.model.requests import CreateRequest

REQ = CreateRequest(
    name="spot-v48-usc2b-1",
    zone="us-central2-b",
    accelerator="v4-8",
    image="tpu-ubuntu2204-base",
    mode="spot",
)


def test_list() -> None:
    assert args.list_args("queued-resources", "us-central2-b") == [
        "compute",
        "tpus",
        "queued-resources",
        "list",
        "--zone=us-central2-b",
    ]
    assert args.list_args("tpu-vm", "-") == ["compute", "tpus", "tpu-vm", "list", "--zone=-"]
    with pytest.raises(UnsafeName):
        args.list_args("tpu-vm", "--zone=x")


def test_create_minimal_and_full() -> None:
    assert args.create_args(replace(REQ, mode="on-demand")) == [
        "compute",
        "tpus",
        "queued-resources",
        "create",
        "spot-v48-usc2b-1",
        "--zone=us-central2-b",
        "--node-id=spot-v48-usc2b-1",
        "--accelerator-type=v4-8",
        "--runtime-version=tpu-ubuntu2204-base",
        "--async",
    ]
    full = replace(
        REQ,
        network="net-a",
        subnetwork="projects/p/regions/us-central2/subnetworks/sub-a",
        internal_ips=True,
        valid_until_seconds=3600,
        labels={"slot": "spot-v48-usc2b-1", "managed-by": "tpu-reconciler"},
    )
    assert args.create_args(full)[9:] == [
        "--spot",
        "--network=net-a",
        "--subnetwork=projects/p/regions/us-central2/subnetworks/sub-a",
        "--internal-ips",
        "--valid-until-duration=3600s",
        "--labels=managed-by=tpu-reconciler,slot=spot-v48-usc2b-1",
        "--async",
    ]
    assert "--reserved" in args.create_args(replace(REQ, mode="reserved"))


@pytest.mark.parametrize(
    "change",
    [
        {"name": "-rf"},
        {"name": "A"},
        {"zone": "us-central2-b;rm"},
        {"accelerator": "v4-8 --x"},
        {"image": "--flag"},
        {"mode": "cheap"},
        {"network": "-n"},
        {"subnetwork": "a b"},
        {"valid_until_seconds": 0},
        {"valid_until_seconds": True},
        {"labels": {"Bad": "v"}},
        {"labels": {"k": "a,b=c"}},
        {"labels": {"k": "UPPER"}},
    ],
)
def test_create_refuses_unsafe_values(change: dict[str, Any]) -> None:
    with pytest.raises(UnsafeName):
        args.create_args(replace(REQ, **change))


def test_delete_and_describe() -> None:
    assert args.delete_args("us-central2-b", "a", force=True)[3:] == [
        "delete",
        "a",
        "--zone=us-central2-b",
        "--force",
        "--async",
    ]
    assert "--force" not in args.delete_args("us-central2-b", "a", force=False)
    assert args.describe_args("us-central2-b", "a")[3:] == ["describe", "a", "--zone=us-central2-b"]
    with pytest.raises(UnsafeName):
        args.delete_args("us-central2-b", "--all", force=True)
    with pytest.raises(UnsafeName):
        args.describe_args("nowhere", "a")


def test_guest_attributes() -> None:
    base = ["compute", "tpus", "tpu-vm", "get-guest-attributes", "n", "--zone=us-central2-b"]
    assert args.guest_attributes_args("us-central2-b", "n", None) == base
    assert args.guest_attributes_args("us-central2-b", "n", "") == base
    assert args.guest_attributes_args("us-central2-b", "n", "tailscale/") == [
        *base,
        "--query-path=tailscale/",
    ]
    assert args.guest_attributes_args("us-central2-b", "n", "guest-agent/external-ip")[-1] == (
        "--query-path=guest-agent/external-ip"
    )
    for bad in ("-x/", "a b/", "ns", "../etc/"):
        with pytest.raises(UnsafeName):
            args.guest_attributes_args("us-central2-b", "n", bad)
