"""Long-running operations end to end: the real controller against an emulator whose create
and delete operations finish *later* with an error, as the real API reports capacity and
validation failures after its first reply.

What a user relies on: a create whose operation failed for good is not resent every pass, and
``status`` says why in the cloud's own words; a transient operation failure backs off and
then succeeds; a delete whose operation failed is tried again, not forgotten.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.fixtures.controller import Harness, desired_text

pytestmark = pytest.mark.integration

ZONE = "us-central2-b"
HELD = f"""\
slots:
  - name: alpha
    zone: {ZONE}
    accelerator: v4-8
    want: held
"""
REFUSED = "Accelerator type v4-8 is not supported with runtime version tpu-ubuntu2204-base"


def desired(body: str) -> str:
    # Nothing moves while no QR exists (a create refused, or one whose operation runs): the
    # steady poll is then the pace, so it is the fast one here as well.
    return desired_text(body, poll_interval="0.2s")


def passes(h: Harness) -> int:
    """Observations so far: one QR list per pass (REST lists all zones at once)."""
    return h.emulator.request_counts()["GET queuedResources.list"]


def creates(h: Harness) -> int:
    return h.emulator.request_counts()["POST queuedResources.create"]


def slot_row(h: Harness, name: str) -> dict[str, Any] | None:
    if not h.state.status.exists():
        return None
    rows = [r for r in h.snapshot().get("slots", []) if r.get("name") == name]
    return rows[0] if rows else None


def last_error(h: Harness) -> str:
    row = slot_row(h, "alpha")
    return str((row or {}).get("last_error") or "")


def events(h: Harness, kind: str) -> list[dict[str, Any]]:
    path = h.state.events
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in lines if e.get("kind") == kind]


async def test_a_create_whose_operation_fails_for_good_is_not_resent(harness: Harness) -> None:
    h = harness
    h.emulator.fail_operations(
        verb="create", name="alpha", status="INVALID_ARGUMENT", message=REFUSED, after=1.0,
        count=1,
    )  # fmt: skip
    h.write(desired(HELD))
    async with _running(h):
        await h.until("the refusal in status", lambda: REFUSED in last_error(h), timeout=20)
        assert creates(h) == 1
        seen = passes(h)
        # 15 passes (0.2 s each) that could have resent it
        await h.until("15 more passes", lambda: passes(h) >= seen + 15, timeout=20)
        assert creates(h) == 1, "a permanently failed create must not be resent every pass"
        assert h.qr(ZONE, "alpha") is None
        # read (once more if the first look came before it finished), classified, then
        # blocked until the intent or the world changes
        assert h.emulator.request_counts()["GET operations.get"] <= 2
        assert "INVALID_ARGUMENT" in last_error(h)
        failed = events(h, "operation.failed")
        assert failed and REFUSED in failed[0]["error"]

        # a changed intent (another accelerator) is a new decision: a new create is sent
        h.write(desired(HELD.replace("v4-8", "v4-16")))
        await h.until("created after the edit", lambda: h.qr(ZONE, "alpha") is not None)
        assert creates(h) == 2


async def test_transient_operation_failures_back_off_then_succeed(harness: Harness) -> None:
    h = harness
    h.emulator.fail_operations(
        verb="create", name="alpha", status="UNAVAILABLE", message="try later", after=0.5, count=2
    )
    h.write(desired(HELD))
    async with _running(h):
        await h.until("alpha created", lambda: h.qr(ZONE, "alpha") is not None, timeout=30)
    assert creates(h) == 3  # two operations failed transiently, the third one held
    assert len(events(h, "operation.failed")) == 2


async def test_a_delete_whose_operation_fails_is_tried_again(harness: Harness) -> None:
    h = harness
    h.emulator.add_queued_resource(ZONE, "alpha", "v4-8", state="ACTIVE")
    h.emulator.fail_operations(
        verb="delete",
        name="alpha",
        status="UNAVAILABLE",
        message="backend busy",
        after=0.5,
        count=1,
    )
    h.write(desired(HELD.replace("want: held", "want: released")))
    async with _running(h):
        await h.until("alpha deleted", lambda: h.qr(ZONE, "alpha") is None, timeout=30)
    deletes = h.emulator.request_counts()["DELETE queuedResources.delete"]
    assert deletes == 2
    failed = events(h, "operation.failed")
    assert failed and "backend busy" in failed[0]["error"]


class _running:
    """The production controller on ``h`` for the length of a ``with`` block."""

    def __init__(self, h: Harness) -> None:
        self.h = h
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Harness:
        from reconciler.runtime.backends import make_cloud
        from reconciler.runtime.controller import Controller
        from reconciler.runtime.desired_loader import DesiredLoader
        from reconciler.runtime.events import EventLog

        h = self.h
        h.controller = Controller(
            store=DesiredLoader(h.path, h.env),
            state=h.state,
            cloud_factory=lambda d: make_cloud(d, h.env),
            events=EventLog(h.state),
        )
        self.task = asyncio.create_task(h.controller.run(self.stop))
        return h

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, timeout=20)
