"""A state directory on a full disk (a real tmpfs of a few pages, filled): ``status`` says the
disk is full and names it instead of "start the controller" (which is running: it holds its
lock), and ``doctor`` names the disk in a failing ``state_disk`` check with the fix.

Mounting needs root (CI runs as root; locally the test is skipped without it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.adapters.statedir import StateDir
from reconciler.runtime.lock import ControllerLock
from tests.support.cli import clean_env, run_cli
from tests.support.disks import fill, small_disk

pytestmark = pytest.mark.integration


def test_status_and_doctor_name_a_full_state_disk(
    tmp_path: Path, gcloud_env: dict[str, str]
) -> None:
    desired = tmp_path / "desired.yaml"
    desired.write_text(
        "project: test-project\n"
        "slots:\n  - {name: a-1, zone: us-central2-b, accelerator: v4-8, want: held}\n"
    )
    with small_disk(tmp_path / "state", 256) as disk:
        state = StateDir(disk)
        with ControllerLock(state):  # the controller runs, and cannot write its snapshot
            fill(disk)
            base = ("-f", str(desired), "--state-dir", str(disk))
            env = clean_env({**gcloud_env, "COLUMNS": "200"})  # the emulator behind the API
            status = run_cli(*base, "status", env=env)
            assert status.returncode == 0, status.stderr
            assert "start the controller" not in status.stdout
            assert f"no snapshot: the disk tmpfs at {disk} is full (" in status.stdout
            assert "cannot write one there; free space" in status.stdout

            done = run_cli(*base, "doctor", "--json", env=env, timeout=90)
            checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
            check = checks["state_disk"]
            assert check["status"] == "fail", check
            assert check["detail"].startswith(f"{disk}: the disk tmpfs at {disk} is full (")
            assert "free space on that disk" in check["hint"]
