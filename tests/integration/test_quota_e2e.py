"""End to end: chip quotas, the real controller against the emulator enforcing them the way
the cloud does (429 RESOURCE_EXHAUSTED naming the quota; every QR counted until deleted).

1. A file wanting 3 x v6e-8 under a 16-chip quota it declares holds 2 and waits on the third
   without one refused create; `quota` and `status` say why.
2. Without the file's quota the third create is refused once, shown with the cloud's words,
   and not sent again pass after pass; releasing a slot lowers the use and lets it go.
3. The Cloud Quotas API's quotaInfos, read through the emulator: as limits, and in a
   controller with ``settings.quota_source: cloud`` (the third waits, nothing is refused).
4. The real gcloud's wording of the refusal is read as the same quota.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from typing import Any

import pytest

from reconciler.adapters.cloud_quotas import ENDPOINT_ENV, read_limits
from reconciler.adapters.gcloud import GcloudCloud
from reconciler.emulator import Emulator
from reconciler.errors import QuotaExceeded
from reconciler.model.desired import QuotaSpec
from reconciler.model.requests import CreateRequest
from reconciler.surfaces.cli import main as cli
from tests.fixtures.controller import Harness, desired_text
from tests.integration.test_mcp_server import call, session
from tests.support.tools import require_tool

pytestmark = pytest.mark.integration

ZONE = "europe-west4-a"
WAIT = "waiting for quota: 16/16 spot v6e chips in europe-west4-a"
QUOTA_ID = "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI"


def wanted(quota: bool, released: str = "") -> str:
    slots = "".join(
        f"  - {{name: {n}, zone: {ZONE}, accelerator: v6e-8, mode: spot, "
        f"want: {'released' if n == released else 'held'}}}\n"
        for n in ("v6e-a", "v6e-b", "v6e-c")
    )
    quotas = f"quotas:\n  - {{family: v6e, mode: spot, zone: {ZONE}, chips: 16}}\n"
    return desired_text((quotas if quota else "") + "slots:\n" + slots, poll_interval="0.2s")


def creates(h: Harness, name: str | None = None) -> list[int]:
    """HTTP status of every create sent (of ``name`` only, when given)."""
    return [
        r.status
        for r in h.emulator.requests()
        if r.key == "POST queuedResources.create"
        and (name is None or r.query.get("queuedResourceId") == name)
    ]


def slot(h: Harness, name: str) -> dict[str, Any]:
    """The slot's row in the controller's snapshot ({} before the first one is written)."""
    if not h.state.status.exists():
        return {}
    return next((s for s in h.snapshot()["slots"] if s["name"] == name), {})


async def run_cli(h: Harness, *argv: str) -> str:
    out = io.StringIO()
    base = ["--file", str(h.path), "--state-dir", str(h.state.root), "-q"]

    def call() -> int:
        with contextlib.redirect_stdout(out):
            return cli([*base, *argv])

    assert await asyncio.to_thread(call) == 0
    return out.getvalue()


async def passes(h: Harness, seconds: float) -> None:
    await asyncio.sleep(seconds)


async def test_the_file_quota_holds_two_and_waits_on_the_third(running: Harness) -> None:
    h = running
    h.emulator.set_quota("v6e", "spot", 16, zone=ZONE)
    h.write(wanted(quota=True))
    await h.until(
        "two ACTIVE",
        lambda: [h.state_of(ZONE, n) for n in ("v6e-a", "v6e-b")] == ["ACTIVE", "ACTIVE"],
    )
    await h.until(
        "the third shown waiting",
        lambda: (slot(h, "v6e-c").get("quota") or {}).get("message") == WAIT,
    )
    await passes(h, 2.0)  # ten more passes at 0.2 s: still nothing sent for it
    assert h.qr(ZONE, "v6e-c") is None
    assert creates(h) == [200, 200], "no refused create, none for the third"
    assert slot(h, "v6e-c")["quota"] == {
        "state": "waiting",
        "message": WAIT,
        "quota_id": None,
        "limit": 16,
        "place": ZONE,
        "api": "tpu",
        "needs": 8,
    }
    (limit,) = h.snapshot()["quotas"]
    assert (limit["used"], limit["chips"], limit["waiting"]) == (16, 16, ["v6e-c"])
    text = await run_cli(h, "quota")
    assert "v6e-c" in text and "16" in text and "zone europe-west4-a" in text
    doc = json.loads(await run_cli(h, "quota", "--json"))
    assert [(w["slot"], w["message"]) for w in doc["waiting"]] == [("v6e-c", WAIT)]
    assert WAIT in await run_cli(h, "status")
    async with session(h.path.parent, "reconciler.surfaces.mcp_server", "--file", str(h.path),
                       "--state-dir", str(h.state.root)) as s:  # fmt: skip
        mcp = await call(s, "quotas")
        assert [(w["slot"], w["message"]) for w in mcp["waiting"]] == [("v6e-c", WAIT)]
        assert mcp["quotas"][0]["waiting"] == ["v6e-c"]
        listed = await call(s, "list_slots")
        (third,) = [x for x in listed["slots"] if x["name"] == "v6e-c"]
        assert third["observed"]["quota"]["message"] == WAIT
    assert f"waiting  create v6e-c: {WAIT}" in await run_cli(h, "plan")


async def test_a_refused_create_is_shown_and_not_retried_until_use_drops(
    running: Harness,
) -> None:
    h = running
    h.emulator.set_quota("v6e", "spot", 16, zone=ZONE)
    h.write(wanted(quota=False))
    names = ("v6e-a", "v6e-b", "v6e-c")
    # the three creates go out together: whichever reaches the cloud third is the refused one
    await h.until("one create refused", lambda: 429 in creates(h))
    (refused,) = [n for n in names if 429 in creates(h, n)]
    kept = [n for n in names if n != refused]
    await h.until(
        "the refusal shown",
        lambda: (slot(h, refused).get("quota") or {}).get("state") == "refused",
    )
    shown = slot(h, refused)
    assert shown["quota"]["quota_id"] == QUOTA_ID
    assert shown["quota"]["limit"] == 16
    assert f"Quota '{QUOTA_ID}' exhausted. Limit: 16 in zone {ZONE}" in str(shown["last_error"])
    # 60 emulated seconds (3 s at 20x, 15 passes of 0.2 s): at most 3 creates for it,
    # where Google's rate-limit rule would have resent it every second or two
    await passes(h, 3.0)
    assert creates(h, refused) == [429]
    assert "refused by the cloud: " + refused + ": " in await run_cli(h, "quota")
    # a release lowers the chips counted under the quota: the create goes again, and fits
    h.write(wanted(quota=False, released=kept[0]))
    await h.until("the refused one ACTIVE", lambda: h.state_of(ZONE, refused) == "ACTIVE")
    assert creates(h, refused) == [429, 200]


def cloud_quotas(h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Cloud Quotas API is the emulator's, which limits spot v6e to 16 chips in ZONE."""
    monkeypatch.setenv(ENDPOINT_ENV, h.emulator.url)
    h.emulator.set_quota("v6e", "spot", 16, zone=ZONE)


async def test_the_cloud_quotas_route_is_read_through_the_emulator(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = harness
    cloud_quotas(h, monkeypatch)
    h.emulator.set_quota("v4", "spot", 100, region="us-central2")
    assert await read_limits("test-project") == (
        QuotaSpec(
            "v4",
            "spot",
            "region",
            "us-central2",
            100,
            "cloud",
            "TPUV4PreemptiblePerProjectPerRegionForTPUAPI",
        ),
        QuotaSpec("v6e", "spot", "zone", ZONE, 16, "cloud", QUOTA_ID),
    )
    (sent,) = [r for r in h.emulator.requests() if r.key == "GET quotaInfos.list"]
    assert sent.user_project == "test-project", "billed like the TPU API's requests"


async def test_compute_engines_limits_are_read_through_the_emulator(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compute Engine's TPU quotas (``services/compute.googleapis.com/quotaInfos``) read as
    that API's limits, beside the TPU API's, in one ``read_limits``."""
    h = harness
    cloud_quotas(h, monkeypatch)
    h.emulator.compute.set_quota("v6e", "standard", "us-central1", 64)
    h.emulator.compute.set_quota("tpu7x", "preemptible", "us-central1", 128)
    family, spot = (
        "TPUS-PER-TPU-FAMILY-per-project-region",
        "PREEMPTIBLE-TPU-TPU7X-per-project-region",
    )
    assert await read_limits("test-project", apis=("tpu", "compute")) == (
        QuotaSpec("v6e", "spot", "zone", ZONE, 16, "cloud", QUOTA_ID),
        QuotaSpec("tpu7x", "spot", "region", "us-central1", 128, "cloud", spot, "compute"),
        QuotaSpec("v6e", "on-demand", "region", "us-central1", 64, "cloud", family, "compute"),
    )
    assert await read_limits("test-project") == (
        QuotaSpec("v6e", "spot", "zone", ZONE, 16, "cloud", QUOTA_ID),
    ), "the TPU API's only unless asked"
    keys = [r.key for r in h.emulator.requests() if "quotainfos" in r.key.lower()]
    assert keys == ["GET quotaInfos.list", "GET computeQuotaInfos.list", "GET quotaInfos.list"]


async def test_quota_source_cloud_waits_on_the_clouds_limit(
    running: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = running
    cloud_quotas(h, monkeypatch)
    h.write(wanted(quota=False).replace("settings:\n", "settings:\n  quota_source: cloud\n", 1))
    await h.until(
        "the third shown waiting",
        lambda: (slot(h, "v6e-c").get("quota") or {}).get("message") == WAIT,
    )
    await passes(h, 1.0)
    assert sorted(creates(h)) == [200, 200], "no refused create"
    (limit,) = h.snapshot()["quotas"]
    assert (limit["source"], limit["quota_id"], limit["waiting"]) == ("cloud", QUOTA_ID, ["v6e-c"])
    assert f"cloud ({QUOTA_ID})" in await run_cli(h, "quota")


async def test_the_gcloud_backend_reads_a_quota_refusal_too(
    emulator: Emulator, gcloud_env: dict[str, str]
) -> None:
    """gcloud words the 429 its own way; the quota it names is read all the same."""
    emulator.set_quota("v6e", "spot", 8, zone=ZONE)
    cloud = GcloudCloud("test-project", gcloud=require_tool("gcloud"), env=gcloud_env)

    def request(name: str) -> CreateRequest:
        return CreateRequest(name, ZONE, "v6e-8", "v2-alpha-tpuv6e", "spot")

    await cloud.create_request(request("v6e-a"))
    with pytest.raises(QuotaExceeded) as refused:
        await cloud.create_request(request("v6e-b"))
    assert (refused.value.quota_id, refused.value.limit, refused.value.place) == (QUOTA_ID, 8, ZONE)
