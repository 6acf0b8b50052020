"""Bootstrap through the real controller: an emulated v4-32 whose four workers are real sshd.

The controller decides when to bootstrap (once per node instance and setup generation), runs
the scripts over SSH on every worker and records the result in memory.json / status.json. The
scripts leave markers on this machine's disk, so each test counts what really ran.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest

from tests.fixtures.setup_world import ZONE, SetupWorld

pytestmark = pytest.mark.integration

IPS = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]

SCRIPT = """\
#!/bin/sh
w="$TPU_RECONCILER_WORKER"
echo "setup on worker $w"
echo run >> {marks}/ran-$w
if [ "$w" = 2 ] && [ -f {marks}/fail-2 ]; then
    echo "boom: cannot install on worker 2" >&2
    exit 1
fi
echo ok >> {marks}/done-$w
"""


def v4_32(world: SetupWorld, generation: int = 0, poll_interval: str = "1s") -> str:
    world.harness.path.with_name("setup.sh").write_text(SCRIPT.format(marks=world.marks))
    return world.desired(
        "slots:\n"
        "  - name: alpha\n"
        f"    zone: {ZONE}\n"
        "    accelerator: v4-32\n"
        "    want: held\n"
        f"    setup: {{generation: {generation}}}\n",
        settings="setup_scripts: [setup.sh]",
        defaults="{bootstrap: true, tmux: false}",
        poll_interval=poll_interval,
    )


def bootstrapped(world: SetupWorld, generation: int = 0) -> Callable[[], bool]:
    def check() -> bool:
        setup = world.slot("alpha")["setup"]
        return bool(setup["generation"] == generation and setup["bootstrap"] == "done")

    return check


def passes(world: SetupWorld) -> int:
    """Observations so far: one QR list per pass (REST lists all zones at once)."""
    return world.harness.emulator.request_counts()["GET queuedResources.list"]


async def steady_passes(world: SetupWorld, n: int) -> None:
    """Wait until ``n`` more passes have looked at the world (and could have acted)."""
    seen = passes(world)
    await world.until(f"{n} more passes", lambda: passes(world) >= seen + n, timeout=20)


def started(world: SetupWorld) -> int:
    return len(world.events("action.started", slot="alpha", action="bootstrap"))


async def bootstrapped_v4_32(
    setup_world: Callable[[int], SetupWorld],
    *,
    fail_worker_2: bool = False,
    poll_interval: str = "1s",
) -> SetupWorld:
    """A v4-32 on four sshd, held by a running controller until its first bootstrap ended
    (done; or failed, with the script failing on worker 2)."""
    world = setup_world(4)
    if fail_worker_2:
        (world.marks / "fail-2").touch()
    world.write(v4_32(world, poll_interval=poll_interval))
    await world.start()
    end = "failed" if fail_worker_2 else "done"
    await world.until(
        f"bootstrap {end}", lambda: world.slot("alpha")["setup"]["bootstrap"] == end, timeout=30
    )
    return world


async def test_bootstrap_runs_once_per_generation_and_not_after_a_restart(
    setup_world: Callable[[int], SetupWorld],
) -> None:
    # Steady passes are what may not decide anything new here: poll them every 0.2 s (the
    # fast interval) and count them, instead of sleeping through a few 1 s polls.
    world = await bootstrapped_v4_32(setup_world, poll_interval="0.2s")
    slot = world.slot("alpha")
    instance = slot["instance"]
    assert slot["ips"] == IPS
    assert world.markers("done") == [1, 1, 1, 1]
    assert world.memory()["slots"]["alpha"]["setup"]["bootstrap"] == f"{instance}#0"

    await steady_passes(world, 3)  # steady passes decide nothing new (was 2.5 s of 1 s polls)
    assert world.markers("ran") == [1, 1, 1, 1]
    assert started(world) == 1

    await world.restart()  # a new controller on the same state dir
    first = world.snapshot()
    assert first["in_flight"] == []
    assert [a for a in first["plan"]["actions"] if a["kind"] == "bootstrap"] == []
    await steady_passes(world, 3)  # was 2.0 s of 1 s polls
    assert world.markers("ran") == [1, 1, 1, 1]
    assert started(world) == 1
    assert world.slot("alpha")["setup"]["bootstrap"] == "done"

    world.write(v4_32(world, generation=1, poll_interval="0.2s"))
    await world.until("generation 1 bootstrapped", bootstrapped(world, 1), timeout=30)
    assert world.markers("done") == [2, 2, 2, 2]
    assert world.slot("alpha")["instance"] == instance  # same node, re-run on request
    assert world.memory()["slots"]["alpha"]["setup"]["bootstrap"] == f"{instance}#1"
    await steady_passes(world, 3)  # was 1.5 s of 1 s polls
    assert world.markers("ran") == [2, 2, 2, 2]


async def test_bootstrap_runs_again_on_a_recreated_node(
    setup_world: Callable[[int], SetupWorld],
) -> None:
    world = await bootstrapped_v4_32(setup_world)
    first = world.slot("alpha")["instance"]
    assert world.markers("done") == [1, 1, 1, 1]

    world.harness.emulator.preempt(ZONE, "alpha")
    await world.until(
        "re-created node bootstrapped",
        lambda: world.slot("alpha")["instance"] not in (None, first) and bootstrapped(world)(),
        timeout=30,
    )
    second = world.slot("alpha")["instance"]
    assert world.slot("alpha")["ips"] == IPS
    assert world.markers("done") == [2, 2, 2, 2]
    assert world.memory()["slots"]["alpha"]["setup"]["bootstrap"] == f"{second}#0"
    # Host keys were pinned afresh for the new instance (trust on first use per instance).
    aliases = {line.split()[0] for line in world.state.known_hosts.read_text().splitlines()}
    assert len(aliases) == 8
    await asyncio.sleep(1.5)
    assert world.markers("ran") == [2, 2, 2, 2]


async def test_failing_worker_is_reported_and_retried_after_backoff(
    setup_world: Callable[[int], SetupWorld],
) -> None:
    world = await bootstrapped_v4_32(setup_world, fail_worker_2=True)
    detail = world.slot("alpha")["setup"]["detail"]
    assert "worker 2" in detail and "127.0.0.4" in detail, detail
    assert world.markers("done") == [1, 1, 0, 1]  # the others went on
    failed = world.events("action.failed", slot="alpha", action="bootstrap")
    assert len(failed) == 1 and failed[0]["retry"] == "transient"
    assert failed[0]["delay"] >= 25  # SetupFailed asks for 30 s
    deferred = [d for d in world.snapshot()["plan"]["deferred"] if d["kind"] == "bootstrap"]
    assert len(deferred) == 1 and deferred[0]["until"]

    await asyncio.sleep(2.5)  # passes during the backoff do not retry
    assert world.markers("ran")[2] == 1
    assert started(world) == 1

    (world.marks / "fail-2").unlink()
    world.clock_offset = 35.0  # the controller's clock passes the backoff
    await world.until("retry succeeded", bootstrapped(world), timeout=20)
    assert started(world) == 2
    assert world.markers("done")[2] == 1
    assert world.slot("alpha")["setup"]["detail"] is None
    assert "alpha" not in json.dumps(world.memory()["errors"])


async def test_status_shows_the_failing_workers_log_tail(
    setup_world: Callable[[int], SetupWorld],
) -> None:
    world = await bootstrapped_v4_32(setup_world, fail_worker_2=True)
    slot = world.slot("alpha")
    shown = json.dumps({"last_error": slot["last_error"], "setup": slot["setup"]})
    assert "boom: cannot install on worker 2" in shown
