"""A state directory that turns read-only under a running controller: every pass says so in one
line (no traceback), and a SIGTERM then stops it with the "don't restart" exit code (78, which
the systemd unit never restarts on) and one line saying what to fix."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from reconciler.exitcodes import EX_CONFIG
from tests.support.cli import CLI_ARGV
from tests.support.disks import read_only_dir

pytestmark = pytest.mark.integration


def test_sigterm_while_the_state_dir_is_read_only(
    tmp_path: Path, gcloud_env: dict[str, str]
) -> None:
    path = tmp_path / "desired.yaml"
    path.write_text(
        "project: test-project\nsettings: {backend: rest, poll_interval: 0.3s}\n"
        "slots:\n  - {name: a-1, zone: us-central2-b, accelerator: v4-8, want: held}\n"
    )
    state = tmp_path / "state"
    state.mkdir()
    controller = subprocess.Popen(
        [*CLI_ARGV, "-f", str(path), "--state-dir", str(state), "run"],
        env=gcloud_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not (state / "status.json").exists():
            assert controller.poll() is None, controller.communicate()[1]
            assert time.monotonic() < deadline, "the controller never wrote its status"
            time.sleep(0.1)
        with read_only_dir(state):
            time.sleep(2.0)  # a few passes fail to write their snapshot
            controller.send_signal(signal.SIGTERM)
            _, stderr = controller.communicate(timeout=60)
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.wait()
    assert "Traceback" not in stderr, stderr
    assert controller.returncode == EX_CONFIG, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("error: stopped without saving its state") and "writable" in last
