"""Through the public surface — the real CLI in subprocesses (``run``, ``validate``,
``quota``, ``plan``, ``status``) against the emulator enforcing quota as the cloud does:

1. A slot bigger than its quota can never fit: ``validate`` refuses it at its line with the
   numbers when the limit is the file's; with ``quota_source: cloud`` (validate could not
   know) ``quota``, ``plan`` and ``status`` say "never fits: needs 32, limit 16", not
   "waiting for quota: 0/16", and nothing is sent.
2. A create refused for quota (429) goes again when a higher limit is known: the file's new
   ``chips:`` while the controller runs, and the Cloud Quotas API's after a restart (memory
   keeps the limit it was refused at).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from reconciler.adapters.cloud_quotas import ENDPOINT_ENV
from reconciler.emulator import Fault
from tests.fixtures.controller import Harness, desired_text
from tests.support.cli import CLI_ARGV, clean_env, run_cli

pytestmark = pytest.mark.integration

ZONE = "europe-west4-a"
QUOTA_ID = "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI"


def slot(name: str, accelerator: str = "v6e-8") -> str:
    return (
        f"  - {{name: {name}, zone: {ZONE}, accelerator: {accelerator}, mode: spot, want: held}}\n"
    )


def file_quota(chips: int) -> str:
    return f"quotas:\n  - {{family: v6e, mode: spot, zone: {ZONE}, chips: {chips}}}\n"


def env(h: Harness) -> dict[str, str]:
    return clean_env({**h.env, ENDPOINT_ENV: h.emulator.url})


def cli(h: Harness, *argv: str) -> subprocess.CompletedProcess[str]:
    base = ("-f", str(h.path), "--state-dir", str(h.state.root))
    return run_cli(*base, *argv, env=env(h))


@contextmanager
def controller(h: Harness, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``tpu-reconciler run`` in the foreground, stopped with Ctrl-C at the end."""
    argv = [*CLI_ARGV, "-f", str(h.path), "--state-dir", str(h.state.root), "run"]
    with log.open("a") as err:
        proc = subprocess.Popen(argv, env=env(h), stdin=subprocess.DEVNULL, stderr=err)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)


def creates(h: Harness, name: str) -> list[int]:
    return [
        r.status
        for r in h.emulator.requests()
        if r.key == "POST queuedResources.create" and r.query.get("queuedResourceId") == name
    ]


def quota_of(h: Harness, name: str) -> dict[str, object]:
    if not h.state.status.exists():
        return {}
    row = next((s for s in h.snapshot()["slots"] if s["name"] == name), {})
    return row.get("quota") or {}


def test_validate_refuses_a_slot_bigger_than_the_files_quota(harness: Harness) -> None:
    h = harness
    body = file_quota(16) + "slots:\n" + slot("big", "v6e-32")
    h.write(desired_text(body))
    done = cli(h, "validate")
    assert done.returncode != 0
    line = next(line for line in done.stderr.splitlines() if "never fit" in line)
    assert line.startswith(f"{h.path}:")
    assert "slot 'big' can never fit: a v6e-32 is 32 chips, more than quotas[0] allows" in line
    assert "(16 spot v6e chips in europe-west4-a)" in line


async def test_a_slot_bigger_than_the_clouds_limit_says_never_fits(
    harness: Harness, tmp_path: Path
) -> None:
    h = harness
    h.emulator.set_quota("v6e", "spot", 16, zone=ZONE)
    body = "slots:\n" + slot("big", "v6e-32") + slot("small")
    h.write(desired_text(body).replace("settings:\n", "settings:\n  quota_source: cloud\n", 1))
    assert cli(h, "validate").returncode == 0, "validate cannot know the cloud's limit"
    with controller(h, tmp_path / "run.err"):
        await h.until("small ACTIVE", lambda: h.state_of(ZONE, "small") == "ACTIVE")
        await h.until(
            "big said never to fit", lambda: quota_of(h, "big").get("state") == "never-fits"
        )
    never = "never fits: needs 32, limit 16 spot v6e chips in europe-west4-a"
    assert quota_of(h, "big")["message"] == never
    assert creates(h, "big") == [], "nothing sent for it"
    text = cli(h, "quota").stdout
    assert f"big: {never}" in text and "waiting for quota" not in text
    doc = json.loads(cli(h, "quota", "--json").stdout)
    assert [(w["slot"], w["needs"], w["limit"]) for w in doc["never_fits"]] == [("big", 32, 16)]
    assert doc["quotas"][0]["api"] == "tpu"
    assert never in cli(h, "status").stdout
    assert never in cli(h, "plan").stdout


async def test_a_refused_create_goes_again_when_its_limit_rises(
    harness: Harness, tmp_path: Path
) -> None:
    """The file's limit raised while running; then, refused again at the new limit, the
    Cloud Quotas API's higher limit after a restart."""
    h = harness
    h.emulator.set_quota("v6e", "spot", 8, zone=ZONE)
    two = "slots:\n" + slot("a") + slot("b")
    h.write(desired_text(two, poll_interval="0.2s"))
    log = tmp_path / "run.err"
    with controller(h, log):
        # the two creates go out together: whichever reaches the cloud second is refused
        await h.until("one ACTIVE", lambda: "ACTIVE" in (h.state_of(ZONE, "a"),
                                                         h.state_of(ZONE, "b")))  # fmt: skip
        other = "b" if h.state_of(ZONE, "a") == "ACTIVE" else "a"
        await h.until("the other refused", lambda: quota_of(h, other).get("state") == "refused")
        await asyncio.sleep(2.0)  # ten passes: the same use, no higher limit known: not resent
        assert creates(h, other) == [429]
        # a granted increase, said in the file: the create goes again at once, and fits
        h.emulator.set_quota("v6e", "spot", 16, zone=ZONE)
        h.write(desired_text(file_quota(16) + two, poll_interval="0.2s"))
        await h.until("the other ACTIVE", lambda: h.state_of(ZONE, other) == "ACTIVE")
        assert creates(h, other) == [429, 200]

        # a third, refused at 16 while the Cloud Quotas API cannot be read
        h.emulator.inject_fault(Fault(status=503, method="GET", path="quotaInfos", count=1000))
        three = two + slot("c")
        cloud = desired_text(three, poll_interval="0.2s").replace(
            "settings:\n", "settings:\n  quota_source: cloud\n", 1
        )
        h.write(cloud)
        await h.until("c refused", lambda: quota_of(h, "c").get("state") == "refused")
    assert creates(h, "c") == [429]
    h.emulator.clear_faults()
    h.emulator.set_quota("v6e", "spot", 24, zone=ZONE)  # granted while no controller ran
    with controller(h, log):
        await h.until("c ACTIVE", lambda: h.state_of(ZONE, "c") == "ACTIVE")
    assert creates(h, "c") == [429, 200]
