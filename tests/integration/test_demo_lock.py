"""``demo --keep`` takes the same controller lock as ``run``: while it acts, ``status`` says a
controller is running and a second ``run`` on the same files is refused. Ctrl-C stops it and
removes its temporary directory, saying so."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.cli import CLI_ARGV, clean_env, run_cli

pytestmark = pytest.mark.integration


def test_demo_keep_holds_the_controller_lock() -> None:
    env = {k: v for k, v in clean_env().items() if not k.startswith("CLOUDSDK_")}
    demo = subprocess.Popen(
        [*CLI_ARGV, "demo", "--keep"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        text=True, env=env, start_new_session=True,
    )  # fmt: skip
    exports: dict[str, str] = {}
    try:
        assert demo.stdout is not None
        deadline = time.monotonic() + 90
        for line in demo.stdout:
            if m := re.match(r"\s+export (\w+)=(.*)$", line):
                exports[m[1]] = m[2]
            if "tpu-reconciler status" in line:
                break
            assert time.monotonic() < deadline, "demo never reached --keep"
        assert "TPU_RECONCILER_STATE_DIR" in exports
        shell = {**env, **exports}
        status = run_cli("status", env=shell)
        assert f"pid {demo.pid}" in status.stdout or str(demo.pid) in status.stdout, status.stdout
        assert "not running" not in status.stdout
        second = run_cli("run", env=shell)
        assert second.returncode != 0
        assert "already running" in second.stderr
    finally:
        os.killpg(demo.pid, signal.SIGINT)
        rest, _ = demo.communicate(timeout=30)
    work = Path(exports["TPU_RECONCILER_STATE_DIR"]).parent
    assert not work.exists(), f"Ctrl-C left {work} behind"
    assert f"removed {work}" in rest, rest
    assert "Traceback" not in rest, rest
