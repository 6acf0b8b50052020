"""Contract: the queueing window of a create, in every form the file can ask for, as the API
defines it and as gcloud sends it.

1. The REST body carries exactly the QueueingPolicy expected (that it decodes strictly with
   the installed SDK's generated v2 messages is checked by test_api_shapes.py's window cases).
2. The real gcloud, given our flags, sends the same QueueingPolicy as our REST body (gcloud
   folds a start and an end into ``validInterval`` itself, against its own clock).
3. The emulator grants nothing before the start.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest

from reconciler.adapters.gcloud import GcloudCloud
from reconciler.adapters.tpu_api_body import create_body
from reconciler.emulator import Emulator
from reconciler.model.requests import CreateRequest
from tests.support.tools import require_tool

pytestmark = pytest.mark.integration

PROJECT = "test-project"
ZONE = "us-central2-b"
NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
AT = NOW + 5 * 3600  # 2027-01-15T13:00:00Z


def span(start: str, end: str) -> dict[str, Any]:
    day = "2027-01-15T"
    return {"validInterval": {"startTime": f"{day}{start}.000Z", "endTime": f"{day}{end}.000Z"}}


@dataclass(frozen=True)
class Form:
    id: str
    window: dict[str, Any]
    policy: dict[str, Any]  # the REST body's queueingPolicy at NOW


FORMS = [
    Form("valid_until alone", {"valid_until_seconds": 3600}, {"validUntilDuration": "3600s"}),
    Form("start_after alone", {"valid_after_seconds": 7200}, {"validAfterDuration": "7200s"}),
    Form(
        "start_at alone", {"valid_after_time": AT}, {"validAfterTime": "2027-01-15T13:00:00.000Z"}
    ),
    Form(
        "start_at with valid_until: the interval",
        {"valid_after_time": AT, "valid_until_seconds": 6 * 3600},
        {
            "validInterval": {
                "startTime": "2027-01-15T13:00:00.000Z",
                "endTime": "2027-01-15T19:00:00.000Z",
            }
        },
    ),
    Form(
        "start_after with valid_until: the interval from now",
        {"valid_after_seconds": 600, "valid_until_seconds": 3600},
        {
            "validInterval": {
                "startTime": "2027-01-15T08:10:00.000Z",
                "endTime": "2027-01-15T09:10:00.000Z",
            }
        },
    ),
]


def request(name: str = "spot-v48-usc2b-1", **window: Any) -> CreateRequest:
    return CreateRequest(
        name=name,
        zone=ZONE,
        accelerator="v4-8",
        image="tpu-ubuntu2204-base",
        mode="spot",
        labels={"managed-by": "tpu-reconciler"},
        **window,
    )


def test_every_window_form_is_the_apis_own_field() -> None:
    """One QueueingPolicy field per form (the API's oneof); decoding them with the SDK's
    generated messages is ``tests/integration/test_api_shapes.py`` (its window cases)."""
    bodies = [create_body(PROJECT, request(**f.window), now=NOW) for f in FORMS]
    assert [b.get("queueingPolicy") for b in bodies] == [f.policy for f in FORMS]


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _times(policy: dict[str, Any]) -> dict[str, Any]:
    """Interval times as numbers: gcloud's clock and ours differ by the call's duration."""
    interval = policy.get("validInterval")
    if not interval:
        return policy
    return {"validInterval": {k: _stamp(v) for k, v in interval.items()}}


@pytest.mark.parametrize("form", FORMS[1:], ids=lambda f: f.id)
async def test_gcloud_sends_what_the_rest_body_says(
    emulator: Emulator, gcloud_env: dict[str, str], form: Form
) -> None:
    cloud = GcloudCloud(PROJECT, gcloud=require_tool("gcloud"), env=gcloud_env)
    window = dict(form.window)
    if "valid_after_time" in window:
        window["valid_after_time"] = float(int(time.time()) + 5 * 3600)  # future for gcloud too
    wanted = request(**window)
    before = time.time()
    await cloud.create_request(wanted)
    after = time.time()
    (sent,) = [r for r in emulator.requests() if r.key == "POST queuedResources.create"]
    ours = create_body(PROJECT, wanted, now=before)["queueingPolicy"]
    theirs = sent.body["queueingPolicy"]
    assert theirs.keys() == ours.keys()
    if "validInterval" in ours:
        a, b = _times(ours)["validInterval"], _times(theirs)["validInterval"]
        for key in ("startTime", "endTime"):
            assert a[key] - 1 <= b[key] <= a[key] + (after - before) + 1, key
    else:
        assert theirs == ours


def test_emulator_grants_nothing_before_the_start(make_emulator: Any) -> None:
    import httpx

    from reconciler.emulator import Scenario

    emu = make_emulator(
        Scenario.from_yaml("timings: {accept: 1, provision: 1, activate: 1, delete: 1}"),
        speed=0,
    )
    base = f"{emu.url.rstrip('/')}/v2/projects/{PROJECT}/locations/{ZONE}/queuedResources"
    bodies = {
        "after": create_body(PROJECT, request("after", valid_after_seconds=600)),
        "interval": create_body(
            PROJECT, request("interval", valid_after_seconds=600, valid_until_seconds=3600)
        ),
    }
    with httpx.Client(headers={"Authorization": "Bearer t"}) as http:
        for name, body in bodies.items():
            http.post(base, params={"queuedResourceId": name}, json=body).raise_for_status()

        def states() -> dict[str, str]:
            listed = http.get(base).json().get("queuedResources", [])
            return {q["name"].rsplit("/", 1)[-1]: q["state"]["state"] for q in listed}

        emu.advance(590)
        assert set(states().values()) <= {"ACCEPTED", "WAITING_FOR_RESOURCES"}
        emu.advance(20)
        assert set(states().values()) <= {"PROVISIONING", "ACTIVE"}


def test_emulator_fails_an_interval_not_granted_by_its_end(make_emulator: Any) -> None:
    import httpx

    from reconciler.emulator import Scenario

    emu = make_emulator(Scenario.from_yaml("timings: {accept: 1, provision: 1}"), speed=0)
    emu.set_capacity(ZONE, "v4-8", 0)
    base = f"{emu.url.rstrip('/')}/v2/projects/{PROJECT}/locations/{ZONE}/queuedResources"
    body = create_body(PROJECT, request("window", valid_after_seconds=600, valid_until_seconds=600))
    with httpx.Client(headers={"Authorization": "Bearer t"}) as http:
        http.post(base, params={"queuedResourceId": "window"}, json=body).raise_for_status()
        emu.advance(1190)
        assert http.get(f"{base}/window").json()["state"]["state"] == "WAITING_FOR_RESOURCES"
        emu.advance(20)
        assert http.get(f"{base}/window").json()["state"]["state"] == "FAILED"
