"""The spine commands as a user runs them: the real CLI in a subprocess against the emulator.

validate / plan / apply / status: exit codes, what is printed where, the confirmation rule
for deleting running TPUs, and that status after an apply shows the world it left.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from reconciler.emulator import Emulator, Fault
from reconciler.exitcodes import EX_INTERRUPTED
from tests.fixtures.controller import desired_text
from tests.fixtures.emulator import gcloud_env_for
from tests.support.cli import Cli, clean_env

pytestmark = pytest.mark.integration

HELD = """\
slots:
  - name: alpha
    zone: us-central2-b
    accelerator: v4-8
    want: held
"""


class SpineCli(Cli):
    """The CLI against one emulator, with ``--file`` and ``--state-dir`` from the environment."""

    def __init__(self, emu: Emulator, tmp_path: Path) -> None:
        self.emu = emu
        self.file = tmp_path / "desired.yaml"
        env = gcloud_env_for(emu, tmp_path)
        env["TPU_RECONCILER_STATE_DIR"] = str(tmp_path / "state")
        env["TPU_RECONCILER_FILE"] = str(self.file)
        super().__init__(env=env)


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[SpineCli]:
    with Emulator(speed=20.0) as emu:
        yield SpineCli(emu, tmp_path)


def test_validate_reports_file_line_col_on_stderr_and_exit_1(cli: SpineCli) -> None:
    cli.file.write_text(desired_text(HELD.replace("want: held", "wnat: held")))
    out = cli("validate")
    assert out.returncode == 1
    assert f"{cli.file}:" in out.stderr and "unknown key 'wnat'" in out.stderr
    assert "did you mean 'want'" in out.stderr and out.stdout == ""
    cli.file.write_text(desired_text(HELD))
    ok = cli("validate")
    assert ok.returncode == 0 and ok.stdout == f"{cli.file}: valid (1 slot, 0 race groups)\n"


def test_validate_resolved_prints_what_the_controller_sees(tmp_path: Path) -> None:
    path = tmp_path / "desired.yaml"
    path.write_text(
        "project: my-project-123\n"
        "generate:\n  - zones: [us-east1-d, europe-west4-a]\n    accelerators: {v6e-8: 1}\n"
        "race_groups:\n  - {name: any, slots: [spot-v6e8-use1d-1, spot-v6e8-ew4a-1]}\n"
    )
    env = clean_env({"TPU_RECONCILER_POLL_INTERVAL": "10"})
    out = Cli("-f", str(path), env=env)("validate", "--resolved")
    assert out.returncode == 0, out.stderr
    assert "poll_interval: 10s  # from $TPU_RECONCILER_POLL_INTERVAL" in out.stdout
    doc = YAML(typ="safe").load(out.stdout)
    assert doc["project"] == "my-project-123"
    assert doc["settings"]["history_retention"] == "365d"
    assert [(s["name"], s["race_group"], s["generated"]) for s in doc["slots"]] == [
        ("spot-v6e8-use1d-1", "any", True),
        ("spot-v6e8-ew4a-1", "any", True),
    ]
    assert doc["slots"][0]["runtime_version"] == "v2-alpha-tpuv6e"
    assert doc["race_groups"] == [
        {"name": "any", "count": 1, "slots": ["spot-v6e8-use1d-1", "spot-v6e8-ew4a-1"]}
    ]
    path.write_text("project: my-project-123\nslots:\n  - {name: a, zone: us-central2-b}\n")
    bad = Cli("-f", str(path), env=env)("validate", "--resolved")
    assert bad.returncode == 1 and bad.stdout == ""
    assert f"{path}:3:12: this slot needs accelerator (like v6e-8)" in bad.stderr


def test_plan_shows_terraform_style_and_detailed_exit_code(cli: SpineCli) -> None:
    cli.file.write_text(desired_text(HELD))
    out = cli("plan", "--detailed-exitcode")
    assert out.returncode == 2, out.stderr
    assert "+ create    alpha" in out.stdout
    assert out.stdout.rstrip().endswith("Plan: 1 to add, 0 to change, 0 to destroy.")
    doc = json.loads(cli("plan", "--json").stdout)
    assert doc["schema_version"] == "tpu-reconciler.plan.v1"
    assert [a["symbol"] + a["kind"] for a in doc["actions"]] == ["+create"]
    assert cli.emu.request_counts().get("POST queuedResources.create", 0) == 0  # plan acts not


def _interrupted_apply(cli: SpineCli, fault: Fault, until: str) -> subprocess.CompletedProcess[str]:
    """``apply``, Ctrl-C once it holds the state directory's lock and its stdout shows
    ``until``, while ``fault`` holds the emulator's answer."""
    cli.emu.inject_fault(fault)
    lock = Path(cli.env["TPU_RECONCILER_STATE_DIR"]) / "controller.lock"
    lock.unlink(missing_ok=True)
    proc = subprocess.Popen(
        cli.argv("apply", "--yes"), env=cli.env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    shown = ""
    while until and until not in shown:
        line = proc.stdout.readline()
        assert line, "apply ended before " + until
        shown += line
    deadline = time.monotonic() + 30
    while not lock.exists() and time.monotonic() < deadline:  # apply has begun
        time.sleep(0.05)
    time.sleep(0.5)  # the request is on its way (the fault holds its answer)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, shown + out, err)


def test_ctrl_c_during_apply_says_whether_the_create_went_out(cli: SpineCli) -> None:
    cli.file.write_text(desired_text(HELD))
    # Interrupted while the create is on its way: it arrives, and apply says so.
    slow_create = Fault(status=None, method="POST", path="queuedResources", latency=2.0)
    sent = _interrupted_apply(cli, slow_create, "Plan: 1 to add")
    assert sent.returncode == EX_INTERRUPTED, sent
    assert "tpu-reconciler: create alpha: sent, and the cloud accepted it" in sent.stderr
    assert cli.emu.queued_resource("us-central2-b", "alpha") is not None
    # Interrupted while it still looks (the list is slow): nothing is sent, and it says so.
    cli.file.write_text(desired_text(HELD.replace("alpha", "beta")))
    slow_list = Fault(status=None, method="GET", path="queuedResources", latency=3.0)
    before = _interrupted_apply(cli, slow_list, "")
    assert before.returncode == EX_INTERRUPTED, before
    assert before.stderr.strip().splitlines() == [
        "tpu-reconciler: interrupted before anything was sent: nothing changed in the cloud"
    ]
    assert cli.emu.queued_resource("us-central2-b", "beta") is None


def test_apply_creates_then_refuses_destructive_without_yes(cli: SpineCli) -> None:
    cli.file.write_text(desired_text(HELD))
    created = cli("apply", "--wait", "--timeout", "30")
    assert created.returncode == 0, created.stderr
    assert cli.emu.queued_resource("us-central2-b", "alpha") is not None
    status = json.loads(cli("status", "--json").stdout)
    (alpha,) = [s for s in status["slots"] if s["name"] == "alpha"]
    assert alpha["state"] == "ACTIVE" and status["controller"]["running"] is False

    again = cli("plan")
    assert again.returncode == 0 and again.stdout.strip() == "No changes."

    cli.file.write_text(desired_text(HELD.replace("want: held", "want: released")))
    refused = cli("apply")  # stdin is not a terminal: nobody can say yes
    assert refused.returncode == 1
    assert "[destructive]" in refused.stdout and "--yes" in refused.stderr
    assert cli.emu.queued_resource("us-central2-b", "alpha") is not None

    deleted = cli("apply", "--yes", "--wait", "--timeout", "30")
    assert deleted.returncode == 0, deleted.stderr
    assert cli.emu.queued_resource("us-central2-b", "alpha") is None


def test_status_without_a_controller_says_how_to_start_one(cli: SpineCli) -> None:
    cli.file.write_text(desired_text(HELD))
    out = cli("status")
    assert out.returncode == 0
    assert "controller: not running" in out.stdout
    assert "tpu-reconciler run" in out.stdout
    assert "alpha" in out.stdout
