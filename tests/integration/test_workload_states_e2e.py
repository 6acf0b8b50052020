"""Workload states around a race and a release, through the public surface: the real CLI in
subprocesses (``run``, ``release``, ``status --json``, ``history --json``) against the
emulator, whose nodes are real sshd workers.

A race group (count 1) of two candidates with a workload: "a" wins (capacity at once), "b"
never gets any. "b"'s workload reads ``not started: lost the race`` — never ``pending`` then
``interrupted``. A plain slot "solo" runs its workload and is released with ``release``: the
attempt ends ``released``, and the capacity history records it as released with its run time.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.setup_world import ZONE, SetupWorld
from tests.integration.test_workload_controller import kill_workloads
from tests.support.cli import CLI_ARGV, clean_env, run_cli

pytestmark = pytest.mark.integration

LOOP = "[sh, -c, 'while :; do echo tick; sleep 0.2; done']"
OTHER = "europe-west4-a"  # no capacity: "b" waits there until it loses


def slot(name: str, zone: str, want: str = "", accelerator: str = "v4-8") -> str:
    return (
        f"  - {{name: {name}, zone: {zone}, accelerator: {accelerator},{want}\n"
        f"     setup: {{bootstrap: false}}, workload: {{command: {LOOP}, stop_grace: 1s}}}}\n"
    )


def body() -> str:
    return (
        "slots:\n"
        + slot("a", ZONE)
        + slot("b", OTHER, accelerator="v6e-8")
        + slot("solo", ZONE, " want: held,")
        + "race_groups:\n  - {name: g, count: 1, slots: [a, b]}\n"
    )


def status(world: SetupWorld, argv: list[str]) -> dict[str, Any]:
    done = run_cli(*argv, "status", "--json", env=clean_env(world.harness.env))
    doc: dict[str, Any] = json.loads(done.stdout)
    return {s["name"]: s for s in doc["slots"]}


def workload(world: SetupWorld, name: str) -> dict[str, Any]:
    row = next((s for s in world.snapshot()["slots"] if s["name"] == name), {})
    return row.get("workload") or {}


async def test_a_race_loser_is_not_started_and_a_release_ends_an_attempt_released(
    setup_world: Callable[[int], SetupWorld], tmp_path: Path
) -> None:
    world = setup_world(2)
    world.harness.emulator.set_capacity(OTHER, "v6e-8", 0)
    world.write(world.desired(body()))
    base = ["-f", str(world.harness.path), "--state-dir", str(world.state.root)]
    err = (tmp_path / "run.err").open("w")
    proc = subprocess.Popen(
        [*CLI_ARGV, *base, "run"], env=clean_env(world.harness.env), stdin=subprocess.DEVNULL,
        stderr=err,
    )  # fmt: skip
    try:
        for name in ("a", "solo"):
            await world.until(
                f"{name}'s workload running",
                lambda name=name: workload(world, name).get("state") == "running",
                timeout=60,
            )
        await world.until("b lost", lambda: workload(world, "b").get("state") == "not-started")
        rows = status(world, base)
        assert rows["b"]["workload"]["detail"] == "lost the race"
        assert rows["b"]["workload"]["summary"] == "not started: lost the race"
        assert rows["a"]["api"] == "tpu"

        done = run_cli(*base, "release", "solo", "--yes", env=clean_env(world.harness.env))
        assert done.returncode == 0, done.stderr
        await world.until(
            "solo released", lambda: workload(world, "solo").get("state") == "released", timeout=40
        )
        assert status(world, base)["solo"]["workload"]["detail"] == "want: released"
        await asyncio.sleep(1.5)  # the recorder's batch
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        err.close()
        for _ in range(3):
            kill_workloads(world)
            await asyncio.sleep(0.2)
    said = {(e["slot"], e.get("after")) for e in world.events("workload.state") if e["slot"] in "b"}
    assert ("b", "not-started") in said and ("b", "interrupted") not in said
    assert not [e for e in world.events("workload.state", slot="solo", after="interrupted")]
    history = json.loads(
        run_cli(*base, "history", "--json", env=clean_env(world.harness.env)).stdout
    )
    (solo,) = [a for a in history["attempts"] if a["slot"] == "solo"]
    assert solo["cause"] == "released: want: released"
    assert solo["ran_seconds"] is not None and solo["ran_seconds"] > 0
    assert not [a for a in history["attempts"] if a["slot"] == "b"], "b never ran: no attempt"
