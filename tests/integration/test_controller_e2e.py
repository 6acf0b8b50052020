"""End to end: the real controller against the emulator, the way a user drives it — by editing
desired.yaml and watching the cloud follow.

Most run on the REST backend (fast, no gcloud needed); one runs the same story through the real
gcloud CLI. Each asserts what the user relies on, including what must *not* happen.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.fixtures.controller import Harness, desired_text
from tests.support.cli import CLI_ARGV
from tests.support.tools import require_tool

pytestmark = pytest.mark.integration

HELD = """\
slots:
  - name: alpha
    zone: us-central2-b
    accelerator: v4-8
    want: held
"""

RACE = """\
slots:
  - name: cand-a
    zone: europe-west4-a
    accelerator: v6e-8
  - name: cand-b
    zone: us-east1-d
    accelerator: v6e-8
race_groups:
  - name: any-v6e
    count: 1
    slots: [cand-a, cand-b]
"""


async def test_saving_the_file_creates_the_queued_resource(running: Harness) -> None:
    h = running
    await h.until("first pass", lambda: h.state.status.exists())
    assert h.mutations() == []  # an empty file wants nothing
    h.write(desired_text(HELD))
    await h.until("alpha queued", lambda: h.qr("us-central2-b", "alpha") is not None)
    qr = h.qr("us-central2-b", "alpha")
    assert qr is not None
    node = qr["tpu"]["nodeSpec"][0]["node"]
    assert node["labels"] == {"managed-by": "tpu-reconciler"}
    assert node["acceleratorType"] == "v4-8"
    assert "spot" in qr  # defaults.mode
    await h.until("alpha ACTIVE", lambda: h.state_of("us-central2-b", "alpha") == "ACTIVE")
    await h.until(
        "snapshot shows ACTIVE",
        lambda: any(s["name"] == "alpha" and s["state"] == "ACTIVE" for s in h.snapshot()["slots"]),
    )
    creates = [r for r in h.mutations() if r.method == "POST"]
    assert len(creates) == 1  # level-triggered passes never create twice


async def test_race_ends_with_one_winner_and_the_rest_deleted(running: Harness) -> None:
    h = running
    h.emulator.set_capacity("europe-west4-a", "v6e-8", 0)
    h.emulator.set_capacity("us-east1-d", "v6e-8", 1)
    h.write(desired_text(RACE))
    await h.until("both candidates queued", lambda: len(h.mutations()) >= 2)
    await h.until(
        "cand-b wins and cand-a is cancelled",
        lambda: (
            h.state_of("us-east1-d", "cand-b") == "ACTIVE"
            and h.qr("europe-west4-a", "cand-a") is None
        ),
    )
    deletes = [r for r in h.mutations() if r.method == "DELETE"]
    assert [r.path.rsplit("/", 1)[-1] for r in deletes] == ["cand-a"]
    race = h.snapshot()["race_groups"][0]
    await h.until("snapshot shows the winner", lambda: h.snapshot()["race_groups"][0]["winners"])
    race = h.snapshot()["race_groups"][0]
    assert race["winners"] == ["cand-b"]


async def test_lost_winner_reopens_the_race(running: Harness) -> None:
    h = running
    h.emulator.set_capacity("europe-west4-a", "v6e-8", 0)
    h.write(desired_text(RACE))
    await h.until(
        "cand-b wins",
        lambda: (
            h.state_of("us-east1-d", "cand-b") == "ACTIVE"
            and h.qr("europe-west4-a", "cand-a") is None
        ),
    )
    h.emulator.set_capacity("europe-west4-a", "v6e-8", 1)
    h.emulator.preempt("us-east1-d", "cand-b")
    # The race reopens: cand-a is queued again, and whoever wins first keeps it.
    await h.until("cand-a re-queued", lambda: h.qr("europe-west4-a", "cand-a") is not None)
    await h.until(
        "exactly one winner again",
        lambda: (
            sum(
                h.state_of(z, n) == "ACTIVE"
                for z, n in (("europe-west4-a", "cand-a"), ("us-east1-d", "cand-b"))
            )
            == 1
            and (h.qr("europe-west4-a", "cand-a") is None or h.qr("us-east1-d", "cand-b") is None)
        ),
        timeout=40,
    )


async def test_preempted_slot_is_requeued(running: Harness) -> None:
    h = running
    h.write(desired_text(HELD))
    await h.until("alpha ACTIVE", lambda: h.state_of("us-central2-b", "alpha") == "ACTIVE")
    first = h.qr("us-central2-b", "alpha")
    assert first is not None
    h.emulator.preempt("us-central2-b", "alpha")
    await h.until(
        "alpha re-created and ACTIVE",
        lambda: (
            (qr := h.qr("us-central2-b", "alpha")) is not None
            and qr.get("createTime") != first.get("createTime")
            and h.state_of("us-central2-b", "alpha") == "ACTIVE"
        ),
    )
    kinds = [r.method for r in h.mutations()]
    assert kinds == ["POST", "DELETE", "POST"]


async def test_truncated_file_changes_nothing_and_status_shows_the_error(
    running: Harness,
) -> None:
    h = running
    text = desired_text(HELD + RACE.replace("slots:\n", ""))
    h.emulator.set_capacity("europe-west4-a", "v6e-8", 0)
    h.write(text)
    await h.until(
        "steady: alpha and cand-b ACTIVE, cand-a cancelled",
        lambda: (
            h.state_of("us-central2-b", "alpha") == "ACTIVE"
            and h.state_of("us-east1-d", "cand-b") == "ACTIVE"
            and h.qr("europe-west4-a", "cand-a") is None
        ),
    )
    before = len(h.mutations())
    # Half-written save: the race group and a slot's want are cut off mid-way.
    h.write(text[: text.index("race_groups:") + len("race_groups:\n  - name: any")])
    await h.until("status shows the file invalid", lambda: not h.snapshot()["desired"]["valid"])
    errors = h.snapshot()["desired"]["errors"]
    assert errors and errors[0].startswith(str(h.path) + ":")
    h.write("")  # and then an empty file
    await asyncio.sleep(1.5)  # several fast polls
    assert len(h.mutations()) == before
    assert h.qr("us-central2-b", "alpha") is not None
    assert h.qr("us-east1-d", "cand-b") is not None
    h.write(text)
    await h.until("valid again", lambda: h.snapshot()["desired"]["valid"])
    assert len(h.mutations()) == before


async def test_removed_slot_is_left_alone_and_shown_unmanaged(running: Harness) -> None:
    h = running
    two = HELD + "  - name: beta\n    zone: us-central2-b\n    accelerator: v4-8\n    want: held\n"
    h.write(desired_text(two))
    await h.until(
        "both ACTIVE",
        lambda: (
            h.state_of("us-central2-b", "alpha") == "ACTIVE"
            and h.state_of("us-central2-b", "beta") == "ACTIVE"
        ),
    )
    h.write(desired_text(HELD))
    await h.until(
        "beta shown unmanaged",
        lambda: any(
            s["name"] == "beta" and s["managed"] is False and s["want"] is None
            for s in h.snapshot()["slots"]
        ),
    )
    await asyncio.sleep(1.0)
    assert h.state_of("us-central2-b", "beta") == "ACTIVE"
    assert not [r for r in h.mutations() if r.method == "DELETE"]


async def test_want_released_deletes(running: Harness) -> None:
    h = running
    h.write(desired_text(HELD))
    await h.until("alpha ACTIVE", lambda: h.state_of("us-central2-b", "alpha") == "ACTIVE")
    h.write(desired_text(HELD.replace("want: held", "want: released")))
    await h.until("alpha deleted", lambda: h.qr("us-central2-b", "alpha") is None)
    deletes = [r for r in h.mutations() if r.method == "DELETE"]
    assert len(deletes) == 1
    assert deletes[0].query.get("force") in ("true", "True")  # it had a node


def _run_argv(h: Harness) -> list[str]:
    """``tpu-reconciler -f FILE --state-dir DIR run``, as a user starts it."""
    return [*CLI_ARGV, "-f", str(h.path), "--state-dir", str(h.state.root), "run"]


def _run_controller(h: Harness, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        _run_argv(h),
        env=h.env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("ab"),
        start_new_session=True,
    )


def _seen_active(h: Harness) -> bool:
    if not h.state.status.exists():
        return False
    rows = h.snapshot().get("slots", [])
    return any(r.get("name") == "alpha" and r.get("state") == "ACTIVE" for r in rows)


async def test_kill_9_then_restart_creates_no_duplicate(harness: Harness, tmp_path: Path) -> None:
    h = harness
    h.write(desired_text(HELD))
    log = tmp_path / "controller.log"
    proc = _run_controller(h, log)
    try:
        await h.until("create sent", lambda: bool(h.mutations()), timeout=30)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        proc = _run_controller(h, log)
        await h.until(
            "alpha ACTIVE", lambda: h.state_of("us-central2-b", "alpha") == "ACTIVE", timeout=30
        )
        # Only the restarted controller can have written a snapshot showing it ACTIVE: it is
        # past its start (signal handlers installed) and has acted on what it saw.
        await h.until("the restarted controller saw it ACTIVE", lambda: _seen_active(h), timeout=30)
        await asyncio.sleep(1.0)
        creates = [r for r in h.mutations() if r.method == "POST"]
        accepted = [r for r in creates if r.status < 300]
        assert len(accepted) == 1, log.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("controller did not stop on SIGTERM")
    assert proc.returncode == 0, log.read_text()


async def test_second_controller_refuses_naming_the_first(harness: Harness, tmp_path: Path) -> None:
    h = harness
    h.write(desired_text(HELD))
    proc = _run_controller(h, tmp_path / "first.log")
    try:
        await h.until("first controller wrote a snapshot", h.state.status.exists, timeout=30)
        second = subprocess.run(
            _run_argv(h),
            env=h.env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert second.returncode == 75  # EX_TEMPFAIL: systemd may retry, within its limit
        assert str(proc.pid) in second.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)


async def test_gcloud_backend_end_to_end(running: Harness) -> None:
    require_tool("gcloud")
    h = running
    h.emulator.set_capacity("europe-west4-a", "v6e-8", 0)
    h.write(desired_text(RACE, backend="gcloud"))
    start = time.monotonic()
    await h.until(
        "cand-b wins and cand-a is cancelled, through gcloud",
        lambda: (
            h.state_of("us-east1-d", "cand-b") == "ACTIVE"
            and h.qr("europe-west4-a", "cand-a") is None
        ),
        timeout=90,
    )
    assert time.monotonic() - start < 90
    assert h.snapshot()["backend"] == "gcloud"
