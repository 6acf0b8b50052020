"""Flex-start end to end: the real controller against the emulator, whose flex-start runs end
at their deadline (VMs deleted, QR SUSPENDED). The slot then reads ``expired`` and nothing is
queued again; with ``renew: true`` each ended run is replaced once. A node's health signals
are shown and never acted on."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from tests.fixtures.controller import Harness, desired_text

pytestmark = pytest.mark.integration

ZONE = "us-east5-b"
FLEX = """\
slots:
  - name: flex
    zone: us-east5-b
    accelerator: v6e-8
    mode: flex-start
    max_run_duration: 60s
    want: held
"""


def _slot(h: Harness) -> dict[str, object]:
    """The slot's row of the controller's last snapshot ({} before there is one)."""
    if not h.state.status.exists():
        return {}
    return next((s for s in h.snapshot()["slots"] if s["name"] == "flex"), {})


async def test_a_flex_start_run_ends_expired_and_is_not_queued_again(running: Harness) -> None:
    h = running
    h.write(desired_text(FLEX))
    await h.until("flex ACTIVE", lambda: h.state_of(ZONE, "flex") == "ACTIVE", timeout=60)
    await h.until("the end time shown", lambda: bool(_slot(h).get("ends_at")), timeout=30)
    await h.until(
        "the run ended and the slot reads expired",
        lambda: h.state_of(ZONE, "flex") == "SUSPENDED" and _slot(h).get("expired") is True,
        timeout=60,
    )
    assert h.emulator.node(ZONE, "flex") is None  # the VMs are gone
    await asyncio.sleep(3)  # many fast passes: none may re-queue or delete it
    creates = [r for r in h.mutations() if r.method == "POST"]
    assert len(creates) == 1 and creates[0].path.startswith("/v2alpha1/")
    assert [r.method for r in h.mutations()] == ["POST"]
    assert h.state_of(ZONE, "flex") == "SUSPENDED"
    assert _slot(h)["expired"] is True


async def test_renew_queues_one_new_run_per_end(running: Harness) -> None:
    h = running
    h.write(desired_text(FLEX.replace("    want: held\n", "    renew: true\n    want: held\n")))
    await h.until("flex ACTIVE", lambda: h.state_of(ZONE, "flex") == "ACTIVE", timeout=60)
    first = h.qr(ZONE, "flex")
    assert first is not None
    await h.until(
        "a second run ACTIVE",
        lambda: (
            (qr := h.qr(ZONE, "flex")) is not None
            and qr.get("createTime") != first.get("createTime")
            and h.state_of(ZONE, "flex") == "ACTIVE"
        ),
        timeout=60,
    )
    methods = [r.method for r in h.mutations()]
    assert methods[:3] == ["POST", "DELETE", "POST"]
    # every create after the first follows the delete of an ended run: never two in a row
    assert all(not (a == b == "POST") for a, b in itertools.pairwise(methods)), methods


async def test_node_signals_are_shown_and_never_acted_on(running: Harness) -> None:
    h = running
    h.write(desired_text(FLEX.replace("60s", "1h")))
    await h.until("flex ACTIVE", lambda: h.state_of(ZONE, "flex") == "ACTIVE", timeout=60)
    h.emulator.set_node_health(
        ZONE,
        "flex",
        health="UNHEALTHY_TENSORFLOW",
        symptoms=[{"symptomType": "HBM_OUT_OF_MEMORY", "workerId": "1"}],
        maintenance={"type": "SCHEDULED", "windowStartTime": "2026-12-02T08:00:00Z"},
    )
    await h.until("the signals shown", lambda: bool(_slot(h).get("health_note")), timeout=30)
    row = _slot(h)
    assert row["symptoms"] == [
        {"kind": "HBM_OUT_OF_MEMORY", "worker": "1", "details": "", "create_time": None}
    ]
    assert str(row["health_note"]).startswith("HBM_OUT_OF_MEMORY on worker 1; health ")
    events = (h.state.root / "events.jsonl").read_text()
    assert '"node.health"' in events
    await asyncio.sleep(2)
    assert [r.method for r in h.mutations()] == ["POST"]


async def test_a_zone_without_flex_start_is_a_permanent_error_in_the_clouds_words(
    running: Harness,
) -> None:
    h = running
    h.emulator.reject_flex_start(ZONE, "v6e-8")
    h.write(desired_text(FLEX, poll_interval="0.2s"))
    words = 'FLEX_START provisioning model is not supported for accelerator type "v6e-8"'
    await h.until("the refusal shown", lambda: words in str(_slot(h).get("last_error")), timeout=30)
    blocked = h.snapshot()["plan"]["blocked"]
    assert [b["slot"] for b in blocked] == ["flex"] and words in blocked[0]["why"]
    await asyncio.sleep(2)  # ten passes: a permanent refusal is not sent again
    assert len([r for r in h.emulator.requests() if r.key == "POST queuedResources.create"]) == 1
