"""The foreground ``run`` in a terminal: the desired file's problems on stderr as they happen
(missing, invalid with ``file:line:col``, valid again), one line each however many passes go
by, and no library chatter without ``-v`` — with two single-worker slots running a workload
on real sshd workers, whose probes open SSH channels every pass.

The real CLI in a subprocess against the emulator, whose nodes get the sshd addresses.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fixtures.setup_world import ZONE, SetupWorld
from tests.integration.test_workload_controller import kill_workloads
from tests.support.cli import CLI_ARGV, clean_env

pytestmark = pytest.mark.integration

LOOP = "[sh, -c, 'while :; do echo tick; sleep 0.2; done']"


def _slots() -> str:
    return "slots:\n" + "".join(
        f"  - {{name: {name}, zone: {ZONE}, accelerator: v4-8, want: held,\n"
        f"     setup: {{bootstrap: false}}, workload: {{command: {LOOP}, stop_grace: 1s}}}}\n"
        for name in ("one", "two")
    )


async def test_run_says_what_is_wrong_with_the_file_and_keeps_libraries_quiet(
    setup_world: Callable[[int], SetupWorld], tmp_path: Path
) -> None:
    world = setup_world(2)
    good = world.desired(_slots())
    world.write(good)
    path = world.harness.path
    err_path = tmp_path / "run.err"

    def said() -> list[str]:
        return err_path.read_text().splitlines()

    def saying(text: str) -> Callable[[], bool]:
        return lambda: any(text in line for line in said())

    argv = [*CLI_ARGV, "-f", str(path), "--state-dir", str(world.state.root), "run"]
    with err_path.open("w") as err:
        proc = subprocess.Popen(
            argv, env=clean_env(world.harness.env), stdin=subprocess.DEVNULL, stderr=err
        )
    try:
        for name in ("one", "two"):
            await world.until(
                f"{name}'s workload running",
                lambda name=name: world.slot(name)["workload"]["state"] == "running",
                timeout=60,
            )
        await asyncio.sleep(3)  # a few passes, each probing both workers over SSH

        path.write_text(good.replace("    zone:", "    zonee:").replace("want: held", "wnat: held"))
        await world.until("the invalid file said", saying("is invalid"))
        await asyncio.sleep(2.5)  # more passes on the same invalid file: no repeat
        path.write_text(good)
        await world.until("valid again said", saying("is valid again"))
        path.unlink()
        await world.until("the missing file said", saying("is missing"))
        path.write_text(good)
        await world.until("valid again, twice", lambda: len(
            [line for line in said() if "is valid again" in line]) == 2)  # fmt: skip
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=30)
        for _ in range(3):
            kill_workloads(world)
            await asyncio.sleep(0.2)
    lines = said()
    assert code == 0, lines
    invalid = [line for line in lines if "is invalid" in line]
    assert len(invalid) == 1, lines
    assert f"{path}:" in invalid[0] and "unknown key 'wnat'" in invalid[0]
    assert "(+1 more: tpu-reconciler validate lists them)" in invalid[0]
    assert "the last valid intent stays in force" in invalid[0]
    assert [line for line in lines if "is missing" in line] == [
        f"tpu-reconciler: {path} is missing (the last valid intent stays in force); waiting "
        "for it (tpu-reconciler init)"
    ]
    assert f"tpu-reconciler: {path} is valid again (2 slots): acting on it" in lines
    chatter = [line for line in lines if "asyncssh" in line or "httpx" in line]
    assert chatter == [], chatter[:5]
    assert len(lines) < 10, lines


def test_library_loggers_speak_only_with_verbose() -> None:
    from reconciler.surfaces.cli._run_report import quiet_libraries

    try:
        quiet_libraries(0)
        assert logging.getLogger("asyncssh.sftp").getEffectiveLevel() == logging.WARNING
        assert logging.getLogger("httpx").getEffectiveLevel() == logging.WARNING
        quiet_libraries(1)
        assert logging.getLogger("asyncssh").level == logging.NOTSET
    finally:
        quiet_libraries(1)
