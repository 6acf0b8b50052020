"""The REST backend's pure pieces: create body, endpoint, Retry-After, guest attributes."""

from __future__ import annotations

import email.utils
import json
import time
from types import MappingProxyType

import pytest

from reconciler.adapters.auth import QuotaHint
from reconciler.adapters.rest import (
    DEFAULT_ENDPOINT,
    RestCloud,
    check_endpoint,
    flatten_guest_attributes,
    retry_after,
)
from reconciler.adapters.tpu_api_body import create_body
from reconciler.errors import PermanentCloudError, UnsafeName
from reconciler.model.requests import CreateRequest

# What `gcloud compute tpus queued-resources create a --node-id=a --spot --zone=us-central2-b
# --accelerator-type=v4-8 --runtime-version=x --network=n --subnetwork=s
# --valid-until-duration=6h --labels=managed-by=tpu-reconciler --async` sent to the emulator
# (Google Cloud SDK 528.0.0, GA track, API v2; the request body as recorded).
MEASURED_SPOT = json.loads(
    '{"queueingPolicy": {"validUntilDuration": "21600s"}, "spot": {}, "tpu": {"nodeSpec": '
    '[{"node": {"acceleratorType": "v4-8", "labels": {"managed-by": "tpu-reconciler"}, '
    '"metadata": {}, "networkConfig": {"enableExternalIps": true, "network": "n", '
    '"subnetwork": "s"}, "runtimeVersion": "x", "serviceAccount": {}}, "nodeId": "a", '
    '"parent": "projects/test-project/locations/us-central2-b"}]}}'
)
# The same with --reserved instead of --spot: no spot, and any reservation of the project.
MEASURED_RESERVATION = "projects/test-project/locations/us-central2-b/reservations/-"


def request(**over: object) -> CreateRequest:
    fields: dict[str, object] = {
        "name": "a",
        "zone": "us-central2-b",
        "accelerator": "v4-8",
        "image": "x",
        "mode": "spot",
        "network": "n",
        "subnetwork": "s",
        "valid_until_seconds": 21600,
        "labels": MappingProxyType({"managed-by": "tpu-reconciler"}),
    }
    fields.update(over)
    return CreateRequest(**fields)  # type: ignore[arg-type]


def test_spot_body_is_what_gcloud_sends() -> None:
    assert create_body("test-project", request()) == MEASURED_SPOT


def test_on_demand_has_no_spot_and_reserved_names_any_reservation() -> None:
    on_demand = create_body("test-project", request(mode="on-demand"))
    assert "spot" not in on_demand and "reservationName" not in on_demand
    reserved = create_body("test-project", request(mode="reserved"))
    assert "spot" not in reserved
    assert reserved["reservationName"] == MEASURED_RESERVATION


def test_optional_parts_are_left_out_and_internal_ips_turn_external_off() -> None:
    body = create_body(
        "proj-123",
        request(network=None, subnetwork=None, valid_until_seconds=None, internal_ips=True),
    )
    assert "queueingPolicy" not in body
    assert body["tpu"]["nodeSpec"][0]["node"]["networkConfig"] == {"enableExternalIps": False}


def test_labels_are_the_requests_own_and_left_out_when_there_are_none() -> None:
    body = create_body("test-project", request(labels=MappingProxyType({"team": "ml", "a": "b"})))
    assert body["tpu"]["nodeSpec"][0]["node"]["labels"] == {"a": "b", "team": "ml"}
    bare = create_body("test-project", request(labels=MappingProxyType({})))
    assert "labels" not in bare["tpu"]["nodeSpec"][0]["node"]


@pytest.mark.parametrize(
    "over",
    [
        {"name": "-rf"},
        {"name": "a/../b"},
        {"zone": "us-central2-b/../x"},
        {"accelerator": "v4-8;rm"},
        {"image": "x y"},
        {"network": "n?x=1"},
        {"mode": "free"},
        {"valid_until_seconds": 0},
        {"labels": MappingProxyType({"Bad": "x"})},
        {"labels": MappingProxyType({"ok": "has space"})},
    ],
)
def test_unsafe_values_never_reach_the_api(over: dict[str, object]) -> None:
    with pytest.raises(UnsafeName):
        create_body("test-project", request(**over))


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("https://tpu.googleapis.com/", "https://tpu.googleapis.com/"),
        ("https://tpu.googleapis.com", "https://tpu.googleapis.com/"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/"),
        ("http://localhost:9/prefix", "http://localhost:9/prefix/"),
        ("http://[::1]:9/", "http://[::1]:9/"),
    ],
)
def test_endpoint_normalised(given: str, expected: str) -> None:
    assert check_endpoint(given) == expected


@pytest.mark.parametrize(
    "bad", ["ftp://x/", "tpu.googleapis.com", "http://example.com/", "https://x/?a=1", ""]
)
def test_endpoint_refused(bad: str) -> None:
    with pytest.raises(PermanentCloudError):
        check_endpoint(bad)


def test_endpoint_from_the_gcloud_override_variable() -> None:
    env = {"CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU": "http://127.0.0.1:1234/"}
    cloud = RestCloud("proj-123", env=env, token_provider=_NoToken())
    assert cloud.endpoint == "http://127.0.0.1:1234/"
    assert RestCloud("proj-123", env={}, token_provider=_NoToken()).endpoint == DEFAULT_ENDPOINT
    explicit = RestCloud(
        "proj-123", endpoint="http://127.0.0.1:9/", env=env, token_provider=_NoToken()
    )
    assert explicit.endpoint == "http://127.0.0.1:9/"


def test_project_is_validated() -> None:
    with pytest.raises(UnsafeName):
        RestCloud("../other", env={}, token_provider=_NoToken())


def test_retry_after_seconds_and_dates() -> None:
    assert retry_after(None) is None
    assert retry_after("") is None
    assert retry_after("120") == 120.0
    assert retry_after("soon") is None
    later = email.utils.formatdate(time.time() + 90, usegmt=True)
    value = retry_after(later)
    assert value is not None and 80 <= value <= 91
    assert retry_after(email.utils.formatdate(time.time() - 90, usegmt=True)) == 0.0


def test_guest_attributes_flattened_like_gcloud() -> None:
    answer = {
        "guestAttributes": [
            {
                "queryPath": "a/",
                "queryValue": {"items": [{"namespace": "a", "key": "k", "value": "0"}]},
            },
            {"queryPath": "a/", "queryValue": {}},
            {
                "queryPath": "a/",
                "queryValue": {"items": [{"namespace": "a", "key": "k", "value": "2"}]},
            },
        ]
    }
    assert flatten_guest_attributes(answer) == [
        {"worker_id": 0, "namespace": "a", "key": "k", "value": "0"},
        {"worker_id": 2, "namespace": "a", "key": "k", "value": "2"},
    ]
    assert flatten_guest_attributes({}) == []


@pytest.mark.parametrize(
    "answer",
    [
        {"guestAttributes": "x"},
        {"guestAttributes": [1]},
        {"guestAttributes": [{"queryValue": {"items": "x"}}]},
        {"guestAttributes": [{"queryValue": "x"}]},
    ],
)
def test_malformed_guest_attributes_raise_value_error(answer: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        flatten_guest_attributes(answer)


class _NoToken:
    quota = QuotaHint()

    async def token(self) -> str:
        raise AssertionError("no request expected")

    def invalidate(self) -> None:
        raise AssertionError("no request expected")
