"""End to end: control over the real controller against the emulator (20x clock, fast polls).

start_after holds the request in the cloud until its time; hold_for releases after it;
suspend stops every action and resume restarts them; an edit releasing three ACTIVE TPUs
deletes none until `tpu-reconciler confirm`, and then exactly those.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from reconciler.surfaces.cli import main as cli
from tests.fixtures.controller import Harness, desired_text

pytestmark = pytest.mark.integration

ZONE = "us-central2-b"


def slots(*entries: str) -> str:
    return "slots:\n" + "".join(entries)


def entry(name: str, want: str = "held", extra: str = "") -> str:
    return f"  - name: {name}\n    zone: {ZONE}\n    accelerator: v4-8\n    want: {want}\n" + extra


def deletes(h: Harness) -> list[str]:
    return sorted(r.path.rsplit("/", 1)[-1] for r in h.mutations() if r.method == "DELETE")


def creates(h: Harness) -> list[str]:
    return sorted(r.query["queuedResourceId"] for r in h.mutations() if r.method == "POST")


async def passes(h: Harness, n: int = 3) -> None:
    """Let the controller make ``n`` more passes (it writes the snapshot after each)."""
    for _ in range(n):
        seen = h.state.status.stat().st_mtime_ns if h.state.status.exists() else 0
        await h.until(
            "another pass",
            lambda s=seen: h.state.status.exists() and h.state.status.stat().st_mtime_ns != s,
        )


async def run_cli(h: Harness, *argv: str) -> int:
    base = ["--file", str(h.path), "--state-dir", str(h.state.root), "-q"]
    return await asyncio.to_thread(cli, [*base, *argv])


def events(h: Harness, kind: str) -> list[dict[str, object]]:
    lines = h.state.events.read_text().splitlines()
    return [e for e in map(json.loads, lines) if e.get("kind") == kind]


async def test_start_after_is_not_granted_before_its_time(running: Harness) -> None:
    h = running
    h.write(desired_text(slots(entry("later", extra="    start_after: 40s\n"))))
    await h.until("queued", lambda: h.qr(ZONE, "later") is not None)
    (sent,) = [r for r in h.mutations() if r.method == "POST"]
    assert sent.body["queueingPolicy"] == {"validAfterDuration": "40s"}
    seen = sent.at  # the create's emulated moment (not when this test got round to looking)
    won = None
    while won is None:
        if h.state_of(ZONE, "later") in ("PROVISIONING", "ACTIVE"):
            won = h.emulator.now()
        assert h.emulator.now() - seen < 120, "never granted"
        await asyncio.sleep(0.02)
    # created at `seen`: granted no earlier than 40 emulated seconds after it
    # (without the window it would be PROVISIONING ~3 s after the create)
    assert won - seen >= 38
    assert creates(h) == ["later"]


async def test_hold_for_releases_after_it_and_not_again(running: Harness) -> None:
    h = running
    h.write(desired_text(slots(entry("short", extra="    hold_for: 1h\n"))))
    await h.until("ACTIVE", lambda: h.state_of(ZONE, "short") == "ACTIVE")
    await passes(h, 3)
    assert deletes(h) == []  # held: its hour has not passed on the controller's clock
    h.clock_offset += 3600.0  # the hour passes without the test waiting for it
    await h.until("released", lambda: deletes(h) == ["short"], timeout=30)
    await h.until("gone", lambda: h.qr(ZONE, "short") is None)
    await passes(h, 2)
    assert creates(h) == ["short"]  # stays released: not queued again
    row = next(s for s in h.snapshot()["slots"] if s["name"] == "short")
    assert row["want"] == "released"
    (released,) = events(h, "slot.released")
    assert released["rule"] == "hold_for"


async def test_suspend_stops_every_action_and_resume_restarts_them(running: Harness) -> None:
    h = running
    h.write(desired_text(slots(entry("kept"), entry("dropped"))))
    await h.until(
        "both ACTIVE", lambda: all(h.state_of(ZONE, n) == "ACTIVE" for n in ("kept", "dropped"))
    )
    assert await run_cli(h, "suspend") == 0
    await h.until("snapshot says SUSPENDED", lambda: h.snapshot().get("suspended") is True)
    text = h.path.read_text()
    h.write(
        text.replace("    want: held\n", "    want: released\n", 2).replace(
            "  - name: dropped",
            "  - name: new\n    zone: us-central2-b\n    accelerator: v4-8\n"
            "    want: held\n  - name: dropped",
        )
    )
    await passes(h, 3)
    assert h.snapshot()["suspended"] is True
    held = {(a["kind"], a["slot"]) for a in h.snapshot()["plan"]["held"]}
    assert held == {("delete", "kept"), ("delete", "dropped"), ("create", "new")}
    assert deletes(h) == [] and creates(h) == ["dropped", "kept"]  # nothing done meanwhile
    assert await run_cli(h, "resume") == 0
    await h.until("acting again", lambda: deletes(h) == ["dropped", "kept"] and "new" in creates(h))
    assert not h.snapshot().get("suspended")


async def test_an_edit_releasing_three_active_tpus_waits_for_confirm(running: Harness) -> None:
    h = running
    names = ("one", "two", "three", "four")
    h.write(desired_text(slots(*(entry(n) for n in names))))
    await h.until("all ACTIVE", lambda: all(h.state_of(ZONE, n) == "ACTIVE" for n in names))
    # one edit: three released, and a new slot added (the rest of the plan proceeds)
    body = slots(*(entry(n, "released") for n in names[:3]), entry("four"), entry("five"))
    h.write(desired_text(body))
    await h.until("five queued", lambda: "five" in creates(h))
    await passes(h, 3)
    assert deletes(h) == []
    guard = h.snapshot()["plan"]["guard"]
    assert sorted(d.split("/")[1].split("@")[0] for d in guard["deletes"]) == [
        "one",
        "three",
        "two",
    ]
    assert guard["command"].startswith("tpu-reconciler confirm ")
    assert await run_cli(h, "confirm", "0000000000000000") == 1  # not the set shown
    assert deletes(h) == []
    assert await run_cli(h, "confirm", guard["fingerprint"]) == 0
    confirm_file = h.state.root / "confirm.json"
    assert confirm_file.stat().st_mode & 0o777 == 0o600
    await h.until("exactly those deleted", lambda: deletes(h) == ["one", "three", "two"])
    await passes(h, 3)
    assert deletes(h) == ["one", "three", "two"]
    assert h.state_of(ZONE, "four") == "ACTIVE"
    # Carried out, the confirmation is spent: it can never let a later mass delete through.
    await h.until("confirmation cleared", lambda: not confirm_file.exists())


async def test_an_old_confirmation_never_lets_a_later_mass_delete_through(
    running: Harness,
) -> None:
    """Suspend, release three ACTIVE TPUs, confirm, change your mind (hold all, resume); later
    release the same three by mistake: the guard holds them again."""
    h = running
    names = ("one", "two", "three")
    held = desired_text(slots(*(entry(n) for n in names)))
    h.write(held)
    await h.until("all ACTIVE", lambda: all(h.state_of(ZONE, n) == "ACTIVE" for n in names))
    assert await run_cli(h, "suspend") == 0
    released = h.path.read_text().replace("want: held", "want: released")
    h.write(released)
    await h.until("guard shown", lambda: bool((h.snapshot().get("plan") or {}).get("guard")))
    guard = h.snapshot()["plan"]["guard"]
    assert await run_cli(h, "confirm", guard["fingerprint"]) == 0
    h.write(held)  # a change of mind: hold them all again ...
    await passes(h, 2)
    assert await run_cli(h, "resume") == 0  # ... and act again
    await h.until("confirmation superseded", lambda: not (h.state.root / "confirm.json").exists())
    h.write(h.path.read_text().replace("want: held", "want: released"))  # the mistake
    await h.until("guard shown again", lambda: bool((h.snapshot().get("plan") or {}).get("guard")))
    await passes(h, 3)
    assert deletes(h) == []
    assert all(h.state_of(ZONE, n) == "ACTIVE" for n in names)
