"""The chip probe as it runs on a worker (``adapters/telemetry_probe.py``, a real process fed
request lines), and the bootstrap script ``setup.telemetry`` adds: holders found by their open
device file, SIGTERM then SIGKILL for one that ignores SIGTERM, metrics unknown without a
service, and the venv script's syntax and idempotence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.telemetry import setup_script
from tests.support.tools import require_tool

pytestmark = pytest.mark.integration

PROBE = str(files("reconciler.adapters").joinpath("telemetry_probe.py"))
STUBBORN = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
f = open(sys.argv[1])
print("ready", flush=True)
time.sleep(600)
"""


class Probe:
    def __init__(self, base: Path, *patterns: str) -> None:
        env = {**os.environ, "TPU_RUNTIME_METRICS_PORTS": "1"}  # nothing listens on port 1
        self.proc = subprocess.Popen(
            [sys.executable, PROBE, "serve", str(base), *patterns],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def ask(self, line: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer: dict[str, Any] = json.loads(self.proc.stdout.readline())
        return answer


@pytest.fixture
def device(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "accel0").write_text("")
    holder = subprocess.Popen(
        [sys.executable, "-c", STUBBORN, str(dev / "accel0")], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
    yield dev, holder
    if holder.poll() is None:
        holder.kill()
    holder.wait(5)


def test_a_holder_is_found_and_one_that_ignores_sigterm_is_killed_after_the_grace(
    tmp_path: Path, device: tuple[Path, subprocess.Popen[str]]
) -> None:
    dev, holder = device
    probe = Probe(tmp_path, f"{dev}/accel[0-9]*")
    try:
        seen = probe.ask("chips")
        assert seen["chips"] == [] and seen["metrics"]  # no service: unknown, and why
        (found,) = seen["holders"]
        assert found["pid"] == holder.pid and found["device"] == f"{dev}/accel0"
        assert found["command"].startswith("python") and found["age"] >= 0
        assert "slot" not in found  # not a workload's process
        assert probe.ask(f"kill 5000 {os.getpid()}") == {"stopped": [], "left": [holder.pid]}
        start = time.monotonic()
        answer = probe.ask(f"kill 300 {holder.pid}")
        took = time.monotonic() - start
        assert answer == {"stopped": [holder.pid], "left": []}
        assert 0.3 <= took < 5.0  # waited the grace, then SIGKILL
        assert holder.wait(5) == -9
        assert probe.ask("chips")["holders"] == []
        assert "error" in probe.ask("nonsense")  # a bad request does not end the channel
        assert probe.ask("chips")["holders"] == []
    finally:
        probe.proc.kill()
        probe.proc.wait(5)


def test_the_venv_script_is_valid_bash_and_does_nothing_when_the_client_is_there(
    tmp_path: Path,
) -> None:
    script = setup_script()
    for argv in (["bash", "-n"], [require_tool("shellcheck"), "-s", "bash"]):
        done = subprocess.run([*argv, str(script)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    python = tmp_path / ".tpu-reconciler" / "telemetry" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    done = subprocess.run(
        ["bash", str(script)],
        capture_output=True,
        text=True,
        env={"HOME": str(tmp_path), "PATH": os.environ["PATH"]},
    )
    assert done.returncode == 0, done.stderr
    assert "already installed" in done.stdout
