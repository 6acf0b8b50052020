"""Golden outputs: the real CLI (``python -m reconciler``) on fixture state, compared whole.

The fixture state (tests/golden/state) is a hand-written status.json and events.jsonl. Times in
status.json are written relative to now (``{{ago:SECONDS}}``, chosen mid-unit so the printed
ages cannot tick over during a test) and turned back into placeholders in the output, so the
golden files never depend on the clock. Paths under the test's temp dir become ``<tmp>``.

``UPDATE_GOLDEN=1 pytest tests/integration/test_golden.py`` rewrites the golden files; review
the diff before committing it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.adapters.statedir import StateDir
from reconciler.emulator import Emulator
from reconciler.runtime.lock import ControllerLock
from tests.fixtures.emulator import gcloud_env_for
from tests.support.cli import Cli, clean_env

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
_AGO = re.compile(r"\{\{ago:(\d+)\}\}")


class GoldenCli:
    """Runs the CLI in ``cwd`` and turns run-specific text back into placeholders."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.cli = Cli(cwd=cwd, env=clean_env({"COLUMNS": "200", "NO_COLOR": "1"}), timeout=120)
        self.times: dict[str, str] = {}  # rendered ISO time -> placeholder

    def render(self, template: str) -> str:
        now = time.time()

        def stamp(m: re.Match[str]) -> str:
            when = datetime.fromtimestamp(int(now) - int(m.group(1)), UTC)
            text = when.isoformat().replace("+00:00", "Z")
            self.times[text] = m.group(0)
            return text

        return _AGO.sub(stamp, template)

    def normalise(self, text: str) -> str:
        for rendered, placeholder in self.times.items():
            text = text.replace(rendered, placeholder)
        text = text.replace(str(self.cwd), "<tmp>").replace(sys.executable, "<python>")
        text = re.sub(r"@desired-[0-9a-f]{8}\.", "@desired-<hash>.", text)
        text = re.sub(r"^Environment=PYTHONPATH=.*\n", "", text, flags=re.M)  # not installed
        # doctor's state_disk: the room on this machine's disk
        text = re.sub(r"[\d.]+ [KMG]?i?B free of [\d.]+ [KMG]?i?B on [^\"\n]*", "<room>", text)
        return text.replace(f"pid {os.getpid()}", "pid <pid>")

    def run(
        self, *args: str, env: Mapping[str, str] | None = None, code: int = 0
    ) -> subprocess.CompletedProcess[str]:
        done = self.cli(*args, env=env)
        assert done.returncode == code, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done


def golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(actual, encoding="utf-8")
    assert path.exists(), f"{path} missing: run with UPDATE_GOLDEN=1 and review it"
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"{name} differs from the golden file (UPDATE_GOLDEN=1 rewrites)"


def with_fixture_state(tmp_path: Path) -> GoldenCli:
    """A GoldenCli whose state dir ``<tmp>/state`` holds the fixture snapshot and event log."""
    c = GoldenCli(tmp_path)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    template = (GOLDEN / "state" / "status.json.tmpl").read_text(encoding="utf-8")
    (state / "status.json").write_text(c.render(template), encoding="utf-8")
    events = (GOLDEN / "state" / "events.jsonl").read_bytes()
    (state / "events.jsonl").write_bytes(events)
    return c


@pytest.fixture
def cli(tmp_path: Path) -> GoldenCli:
    return with_fixture_state(tmp_path)


def test_status(cli: GoldenCli) -> None:
    done = cli.run("--state-dir", "state", "status")
    golden("status.txt", cli.normalise(done.stdout))


def test_status_json(cli: GoldenCli) -> None:
    done = cli.run("--state-dir", "state", "status", "--json")
    doc = json.loads(done.stdout)
    assert doc["schema_version"] == "tpu-reconciler.status.v1"
    assert doc["controller"] == {"running": False, "pid": None}  # from the lock, not the file
    golden("status.json", cli.normalise(done.stdout))


def test_events(cli: GoldenCli) -> None:
    done = cli.run("--state-dir", "state", "events")
    assert "\x1b" not in done.stdout  # a hostile message cannot drive the terminal
    golden("events.txt", done.stdout)


def test_events_json(cli: GoldenCli) -> None:
    done = cli.run("--state-dir", "state", "events", "--json")
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["seq"] for r in records] == list(range(1, 15))  # the torn last line is skipped
    assert {r["schema_version"] for r in records} == {"tpu-reconciler.event.v1"}
    golden("events.jsonl", done.stdout)


@pytest.fixture
def broken(cli: GoldenCli) -> Iterator[GoldenCli]:
    """Everything doctor should complain about at once: an invalid desired.yaml with a
    guessable ntfy topic, a world-readable state dir, a stale snapshot (the controller holds
    its lock but writes nothing), and no gcloud on PATH."""
    (cli.cwd / "desired.yaml").write_text(
        "project: my-project\n"
        "settings:\n  poll_interval: 30s\n  ntfy_topic: tpu-alerts\n"
        "slots:\n  - name: a-1\n    zonee: us-central2-b\n    accelerator: v4-8\n"
        "    want: held\n",
        encoding="utf-8",
    )
    (cli.cwd / "empty-bin").mkdir()
    lock = ControllerLock(StateDir(cli.cwd / "state"))
    lock.acquire()
    try:
        (cli.cwd / "state").chmod(0o755)
        yield cli
    finally:
        lock.release()


def _doctor_env(cli: GoldenCli) -> dict[str, str]:
    env = {k: "" for k in os.environ if k.startswith("CLOUDSDK_")}
    env.update({"PATH": str(cli.cwd / "empty-bin"), "HOME": str(cli.cwd)})
    return env


def test_doctor_on_a_broken_setup(broken: GoldenCli) -> None:
    done = broken.run("--state-dir", "state", "doctor", env=_doctor_env(broken), code=1)
    out = broken.normalise(done.stdout)
    golden("doctor-broken.txt", out)
    for name in ("desired", "gcloud", "state_dir", "snapshot"):
        assert len(re.findall(rf"^FAIL  {name} ", out, re.M)) == 1, name
    assert len(re.findall(r"^WARN  ntfy_topic ", out, re.M)) == 1
    assert out.count("fix: ") == 5  # each problem once, each with its hint
    assert out.endswith("doctor: 4 problems, 1 warning\n")


def test_doctor_on_a_broken_setup_json(broken: GoldenCli) -> None:
    done = broken.run("--state-dir", "state", "doctor", "--json", env=_doctor_env(broken), code=1)
    doc = json.loads(done.stdout)
    assert doc["schema_version"] == "tpu-reconciler.doctor.v1" and doc["healthy"] is False
    failed = [c["name"] for c in doc["checks"] if c["status"] == "fail"]
    assert failed == ["desired", "gcloud", "state_dir", "snapshot"]
    assert all(c["hint"] for c in doc["checks"] if c["status"] in ("fail", "warn"))
    golden("doctor-broken.json", broken.normalise(done.stdout))


PLAN_DESIRED = """\
project: test-project
settings: {backend: rest}
defaults: {setup: {tmux: false}}
slots:
  - {name: od-v48-usc2b-1, zone: us-central2-b, accelerator: v4-8, mode: on-demand, want: held}
  - {name: spot-v6e8-ew4a-1, zone: europe-west4-a, accelerator: v6e-8}
  - {name: spot-v6e8-use1d-1, zone: us-east1-d, accelerator: v6e-8}
race_groups:
  - {name: any-v6e-8, count: 1, slots: [spot-v6e8-ew4a-1, spot-v6e8-use1d-1]}
"""


def test_plan_against_the_emulator(emulator: Emulator, tmp_path: Path) -> None:
    cli = GoldenCli(tmp_path)
    (tmp_path / "desired.yaml").write_text(PLAN_DESIRED, encoding="utf-8")
    env = gcloud_env_for(emulator, tmp_path / "gcloud")
    human = cli.run("--state-dir", "state", "plan", env=env)
    golden("plan.txt", human.stdout)
    machine = cli.run("--state-dir", "state", "plan", "--json", env=env)
    assert json.loads(machine.stdout)["schema_version"] == "tpu-reconciler.plan.v1"
    golden("plan.json", machine.stdout)


def test_init(tmp_path: Path) -> None:
    cli = GoldenCli(tmp_path)
    args = ("--project", "my-project", "--zone", "europe-west4-a", "--zone", "us-east1-d")
    done = cli.run("-f", "new.yaml", "init", *args, "--accelerator", "v6e-8")
    golden("init.txt", done.stdout)
    golden("init-desired.yaml", (tmp_path / "new.yaml").read_text(encoding="utf-8"))
    cli.run("-f", "new.yaml", "validate")


def test_service_install(tmp_path: Path) -> None:
    cli = GoldenCli(tmp_path)
    (tmp_path / "desired.yaml").write_text("project: my-project\n", encoding="utf-8")
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "PATH": "/usr/bin:/bin"}
    done = cli.run("--state-dir", "state", "service", "install", env=env)
    golden("service-install.txt", cli.normalise(done.stdout))
    (unit,) = (tmp_path / "config" / "systemd" / "user").iterdir()
    golden("service.unit", cli.normalise(unit.read_text(encoding="utf-8")))
