"""MCP tools that wait for the controller, against a real one: three processes, no fakes.

The emulator runs in the test; the controller is ``python -m reconciler ... run`` (it takes the
controller lock, so the views can name its pid); the MCP server is another process driven by the
SDK's own stdio client. Both see the same desired.yaml and state directory. The tools only edit
the file: every state asserted here was reached by the controller acting on the emulator.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, suppress
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession

from tests.fixtures.controller import Harness, desired_text
from tests.integration.test_mcp_server import call
from tests.integration.test_mcp_server import session as mcp_session
from tests.support.cli import CLI_ARGV

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]

# alpha's zone has capacity (the emulator's default); starved's zone gets none.
SLOTS = """\
slots:
  - name: alpha
    zone: us-central2-b
    accelerator: v4-8
    want: released
  - name: starved
    zone: europe-west4-a
    accelerator: v6e-8
    want: released
"""


@pytest.fixture
async def controller(harness: Harness, tmp_path: Path) -> AsyncIterator[subprocess.Popen[bytes]]:
    """The production controller as its own process, on the harness's file and state dir,
    once it has written its first snapshot."""
    harness.emulator.set_capacity("europe-west4-a", "v6e-8", 0)
    harness.write(desired_text(SLOTS))
    argv = [*CLI_ARGV, "-f", str(harness.path), "--state-dir", str(harness.state.root)]
    with (tmp_path / "controller.log").open("ab") as log:
        proc = subprocess.Popen(
            [*argv, "run"],
            cwd=REPO,
            env=harness.env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        await harness.until("the controller's first snapshot", harness.state.status.exists)
        yield proc
    finally:
        proc.terminate()
        with suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=15)
        proc.kill()  # a no-op once it has exited
        proc.wait()


def session(h: Harness, tmp_path: Path) -> AbstractAsyncContextManager[ClientSession]:
    """The MCP server on the controller's file and state dir; opened inside each test body."""
    paths = ("--file", str(h.path), "--state-dir", str(h.state.root))
    return mcp_session(tmp_path, "reconciler.surfaces.mcp_server", *paths)


def row(doc: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in doc["slots"] if s["name"] == name)
    return found


async def test_queue_waits_until_active_then_cancel_until_not_queued(
    harness: Harness, controller: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    h = harness
    async with session(h, tmp_path) as s:
        listed = await call(s, "list_slots")
        assert listed["desired_valid"] is True, listed["desired_errors"]
        snap = listed["snapshot"]
        assert snap["present"] is True
        assert snap["controller"] == {"running": True, "pid": controller.pid}
        assert 0 <= snap["age_seconds"] < 10
        assert row(listed, "alpha")["observed"]["state"] == "NOT_QUEUED"

        doc = await call(s, "queue_slot", name="alpha", operation_id="q-alpha", wait_seconds=20)
        wait = doc["wait"]
        assert wait["reached"] is True and wait["waited_seconds"] < 20, wait
        # Capacity won is the documented target (docs/mcp.md): PROVISIONING or ACTIVE, and the
        # result says which one the controller's snapshot showed.
        [(name, reached)] = [(o["name"], o["state"]) for o in wait["observed"]]
        assert name == "alpha" and reached in ("PROVISIONING", "ACTIVE"), wait
        assert h.state_of("us-central2-b", "alpha") in ("PROVISIONING", "ACTIVE")

        # list_slots follows the controller's snapshots until the node is up.
        deadline = time.monotonic() + 20
        while (observed := row(listed := await call(s, "list_slots"), "alpha")["observed"])[
            "state"
        ] != "ACTIVE":
            assert time.monotonic() < deadline, observed
            await asyncio.sleep(0.2)
        assert observed["ips"] and observed["decided_want"] == "held", observed
        assert h.state_of("us-central2-b", "alpha") == "ACTIVE"
        snap = listed["snapshot"]
        assert snap["generated_at"] >= wait["snapshot_generated_at"]
        assert 0 <= snap["age_seconds"] < 10 and snap["desired_digest"] == doc["digest"]

        doc = await call(s, "cancel_slot", name="alpha", operation_id="c-alpha", confirm=True,
                         wait_seconds=20)  # fmt: skip
        wait = doc["wait"]
        assert wait["reached"] is True, wait
        assert [(o["name"], o["state"]) for o in wait["observed"]] == [("alpha", "NOT_QUEUED")]
        assert h.qr("us-central2-b", "alpha") is None
    deletes = [r.path.rsplit("/", 1)[-1] for r in h.mutations() if r.method == "DELETE"]
    assert deletes == ["alpha"]


async def test_a_wait_that_cannot_be_met_returns_the_state_at_the_timeout(
    harness: Harness, controller: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    h = harness
    async with session(h, tmp_path) as s:
        doc = await call(s, "queue_slot", name="starved", operation_id="q-st", wait_seconds=3)
        wait = doc["wait"]
        assert wait["reached"] is False and 3 <= wait["waited_seconds"] < 7, wait
        assert "not reached" in wait["note"]
        assert [(o["name"], o["state"]) for o in wait["observed"]] == [
            ("starved", "WAITING_FOR_RESOURCES")
        ], wait
        assert doc["status"] == "changed"  # the edit stands; the controller keeps working on it
        assert h.state_of("europe-west4-a", "starved") == "WAITING_FOR_RESOURCES"
        listed = await call(s, "list_slots")
        assert row(listed, "starved")["want"] == "held"
        assert row(listed, "starved")["observed"]["state"] == "WAITING_FOR_RESOURCES"
        assert listed["snapshot"]["controller"] == {"running": True, "pid": controller.pid}

        # A stopped controller leaves its last snapshot: still shown, ageing, no controller named.
        controller.send_signal(signal.SIGTERM)
        assert controller.wait(timeout=15) == 0
        first = (await call(s, "list_slots"))["snapshot"]
        await asyncio.sleep(1.2)
        later = await call(s, "list_slots")
    stopped = {"running": False, "pid": None}
    assert first["controller"] == later["snapshot"]["controller"] == stopped
    assert later["snapshot"]["generated_at"] == first["generated_at"]
    assert later["snapshot"]["age_seconds"] >= first["age_seconds"] + 1.0
    assert row(later, "starved")["observed"]["state"] == "WAITING_FOR_RESOURCES"
