"""The workload MCP tools through the SDK's stdio client: status joins the file with the
snapshot, and edits that end a running workload need confirm=true."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.files import write_json
from reconciler.exitcodes import EX_CONFIRM, EX_USAGE
from reconciler.model.load import parse_desired
from tests.integration.test_mcp_server import REPO, call, refused, session

pytestmark = pytest.mark.integration

DESIRED = """\
project: my-project-123
slots:
  - name: train
    zone: us-central2-b
    accelerator: v4-32
    want: held
    # the training run
    workload:
      command: python3 train.py
      secret_env: {WANDB_API_KEY: wandb}
  - name: idle
    zone: us-central2-b
    accelerator: v4-8
    want: held
"""


def snapshot(tmp: Path, state: str) -> None:
    workload = {
        "state": state, "run_id": "g0-abc", "attempt": 2, "failures": 1, "max_failures": 3,
        "since": "2026-12-01T06:00:00Z", "workers": [{"index": 0, "state": "alive",
        "exit_code": None}], "last_lines": [],
    }  # fmt: skip
    (tmp / "state").mkdir(exist_ok=True)
    write_json(
        tmp / "state" / "status.json",
        {
            "schema_version": "tpu-reconciler.status.v1",
            "generated_at": "2026-12-01T07:00:00Z",
            "slots": [{"name": "train", "workload": workload}, {"name": "idle", "workload": None}],
        },
    )


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    (tmp_path / "desired.yaml").write_text(DESIRED)
    return tmp_path


def spec(tmp: Path, name: str = "train") -> Any:
    slot = parse_desired((tmp / "desired.yaml").read_text()).slot(name)
    assert slot is not None
    return slot.workload


async def test_status_shows_the_declared_workload_and_what_the_controller_saw(tmp: Path) -> None:
    snapshot(tmp, "running")
    async with session(tmp) as s:
        doc = await call(s, "workload_status", name="train")
        assert "unknown slot" in await refused(s, "workload_status", name="nope")
    (slot,) = doc["slots"]
    assert slot["declared"]["command"] == "python3 train.py"
    assert slot["declared"]["secret_env"] == {"WANDB_API_KEY": "wandb"}  # a name, not a value
    w = slot["workload"]
    assert (w["state"], w["run_id"], w["attempt"], w["failures"]) == ("running", "g0-abc", 2, 1)


async def test_restart_and_stop_of_a_running_workload_need_confirm(tmp: Path) -> None:
    snapshot(tmp, "running")
    async with session(tmp) as s:
        text = await refused(s, "restart_workload", name="train", operation_id="r1")
        assert "confirm=true" in text and spec(tmp).generation == 0
        doc = await call(s, "restart_workload", name="train", operation_id="r2", confirm=True)
        assert doc["status"] == "changed" and spec(tmp).generation == 1
        again = await call(s, "restart_workload", name="train", operation_id="r2", confirm=True)
        assert again["status"] == "exists" and spec(tmp).generation == 1
        assert "confirm=true" in await refused(s, "stop_workload", name="train", operation_id="s1")
        await call(s, "stop_workload", name="train", operation_id="s2", confirm=True)
    assert spec(tmp) is None
    assert "# the training run" in (tmp / "desired.yaml").read_text()


async def test_set_workload_on_an_idle_slot_needs_no_confirm(tmp: Path) -> None:
    snapshot(tmp, "gave-up")
    async with session(tmp) as s:
        await call(
            s, "set_workload", name="idle", operation_id="w1", command=["python3", "eval.py"],
            env={"EXP": "one"}, restart="on-failure", max_failures=1, stall_after="10m",
        )  # fmt: skip
        await call(s, "restart_workload", name="train", operation_id="w2")  # gave up: not live
        bad = await refused(
            s, "set_workload", name="idle", operation_id="w3", secret_env={"K": "Not_A_Name"}
        )
    assert "invalid secret name" in bad
    w = spec(tmp, "idle")
    assert w.command == ("python3", "eval.py") and dict(w.env) == {"EXP": "one"}
    assert (w.restart, w.max_failures, w.stall_after) == ("on-failure", 1, 600.0)
    assert spec(tmp).generation == 1


def cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "reconciler", "-f", str(tmp / "desired.yaml")]
    argv += ["--state-dir", str(tmp / "state"), "workload", *args]
    return subprocess.run(
        argv, cwd=REPO, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60
    )


def test_cli_workload_verbs_ask_before_ending_a_running_workload(tmp: Path) -> None:
    snapshot(tmp, "running")
    refused = cli(tmp, "restart", "train")
    assert refused.returncode == EX_CONFIRM and "--yes" in refused.stderr
    assert spec(tmp).generation == 0
    done = cli(tmp, "restart", "train", "--yes")
    assert done.returncode == 0, done.stderr
    assert "workload.generation: 1" in done.stdout and spec(tmp).generation == 1
    assert cli(tmp, "set", "train", "--command", "python3 other.py").returncode == EX_CONFIRM
    tuned = cli(tmp, "set", "train", "--max-failures", "7", "--restart", "always")
    assert tuned.returncode == 0, tuned.stderr  # policy only: nothing stops
    assert (spec(tmp).max_failures, spec(tmp).restart) == (7, "always")
    set_idle = cli(tmp, "set", "idle", "--argv", "python3", "eval.py", "--env", "A=1")
    assert set_idle.returncode == 0, set_idle.stderr
    assert spec(tmp, "idle").command == ("python3", "eval.py")
    assert cli(tmp, "set", "idle", "--env", "oops").returncode == EX_USAGE
    assert cli(tmp, "stop", "idle").returncode == 0  # not running: no question
    assert spec(tmp, "idle") is None


GROUP = """\
  - {name: a1, zone: us-central2-b, accelerator: v4-16}
  - {name: a2, zone: us-central2-b, accelerator: v4-16}
race_groups:
  - name: pair  # two v4-16 as one program
    count: 2
    slots: [a1, a2]
    workload: {command: python3 train.py}
"""


def group(tmp: Path) -> Any:
    (found,) = parse_desired((tmp / "desired.yaml").read_text()).race_groups
    return found


async def test_set_workload_sets_keep_attempts_across_and_min_count(tmp: Path) -> None:
    (tmp / "desired.yaml").write_text(DESIRED + GROUP)
    async with session(tmp) as s:
        await call(s, "set_workload", name="idle", operation_id="k1", command="python3 e.py",
                   keep_attempts=20, take_tpu=True, idle_after="1h")  # fmt: skip
        low = await refused(s, "set_workload", name="idle", operation_id="k2", keep_attempts=0)
        high = await refused(
            s, "set_workload", name="idle", operation_id="k3", keep_attempts=10_001
        )
        await call(s, "set_workload", name="pair", operation_id="g1", across="group", min_count=1)
        more = await refused(s, "set_workload", name="pair", operation_id="g2", min_count=3)
        on_slot = await refused(s, "set_workload", name="idle", operation_id="g3", min_count=1)
    assert "keep_attempts must be at least 1; got 0" in low
    assert "keep_attempts must be at most 10000; got 10001" in high
    assert spec(tmp, "idle").keep_attempts == 20
    assert (spec(tmp, "idle").take_tpu, spec(tmp, "idle").idle_after) == (True, 3600.0)
    assert "min_count 3 is more than count 2" in more
    assert "min_count is a race group's key" in on_slot
    pair = group(tmp)  # RaceGroupSpec.workload: the one program of across: group
    assert pair.workload is not None and pair.min_count == 1
    assert "# two v4-16 as one program" in (tmp / "desired.yaml").read_text()


def test_cli_workload_set_keep_attempts_across_and_min_count(tmp: Path) -> None:
    (tmp / "desired.yaml").write_text(DESIRED + GROUP)
    assert group(tmp).workload is None  # each winner runs its own copy
    done = cli(tmp, "set", "train", "--keep-attempts", "50")
    assert done.returncode == 0, done.stderr  # policy only: nothing stops, nothing asked
    assert "workload.keep_attempts: 50" in done.stdout and spec(tmp).keep_attempts == 50
    bad = cli(tmp, "set", "train", "--keep-attempts", "0")
    assert bad.returncode != 0 and "keep_attempts must be at least 1" in bad.stderr
    assert spec(tmp).keep_attempts == 50
    ran = cli(tmp, "set", "pair", "--across", "group", "--min-count", "1")
    assert ran.returncode == 0, ran.stderr
    assert "min_count: 1" in ran.stdout and "workload.across: group" in ran.stdout
    assert group(tmp).workload is not None and group(tmp).min_count == 1
    only = cli(tmp, "set", "pair", "--min-count", "2")
    assert only.returncode == 0, only.stderr
    assert group(tmp).min_count == 2
    assert "--across group" in cli(tmp, "set", "--help").stdout
    idle = cli(tmp, "set", "train", "--idle-after", "20m", "--idle-below", "5", "--take-tpu")
    assert idle.returncode == 0, idle.stderr
    w = spec(tmp)
    assert (w.idle_after, w.idle_below, w.take_tpu, w.keep_attempts) == (1200.0, 5.0, True, 50)
    assert cli(tmp, "set", "train", "--no-take-tpu").returncode == 0
    assert spec(tmp).take_tpu is False
    zero = cli(tmp, "set", "train", "--idle-below", "0")
    assert zero.returncode != 0 and "idle_below must be more than 0" in zero.stderr


def group_running(tmp: Path) -> None:
    """desired.yaml's pair runs one program across its winners, running in the snapshot."""
    (tmp / "desired.yaml").write_text(
        DESIRED + GROUP.replace("train.py}", "train.py, across: group}")
    )
    snapshot(tmp, "gave-up")
    path = tmp / "state" / "status.json"
    doc = json.loads(path.read_text())
    doc["race_groups"] = [{
        "name": "pair", "count": 2, "winners": ["a1", "a2"], "candidates": ["a1", "a2"],
        "workload": {"state": "running", "run_id": "pair-0", "attempt": 1,
                     "summary": "running 5m · attempt 1"},
        "instance": "pair@abc.a1@1,a2@2",
    }]  # fmt: skip
    write_json(path, doc)


async def test_an_across_groups_program_is_its_workload_and_ending_it_needs_confirm(
    tmp: Path,
) -> None:
    group_running(tmp)
    async with session(tmp) as s:
        doc = await call(s, "workload_status", name="pair")
        text = await refused(s, "stop_workload", name="pair", operation_id="p1")
        await call(s, "set_workload", name="pair", operation_id="p2", keep_attempts=9)
    program = doc["program"]
    assert program["declared"]["command"] == "python3 train.py"
    assert program["workload"]["run_id"] == "pair-0"
    assert program["instance"] == "pair@abc.a1@1,a2@2"
    assert "confirm=true" in text and group(tmp).workload is not None
    assert group(tmp).workload.keep_attempts == 9  # policy only: no question


def test_cli_asks_before_restarting_an_across_groups_running_program(tmp: Path) -> None:
    group_running(tmp)
    asked = cli(tmp, "restart", "pair")
    assert asked.returncode == EX_CONFIRM and "--yes" in asked.stderr
    assert group(tmp).workload.generation == 0
    assert cli(tmp, "restart", "pair", "--yes").returncode == 0
    assert group(tmp).workload.generation == 1


async def test_logs_of_an_emulated_node_say_at_once_that_no_machine_answers(tmp: Path) -> None:
    # The snapshot puts train's node at a documentation address (as the emulator does): the
    # tool refuses before any OS Login lookup or connection, in well under a second of work.
    import time

    snapshot(tmp, "running")
    doc = (tmp / "state" / "status.json").read_text()
    doc = doc.replace(
        '"name": "train",', '"name": "train", "instance": "train@7", "ips": ["203.0.113.9"],'
    )
    (tmp / "state" / "status.json").write_text(doc)
    async with session(tmp) as s:
        started = time.monotonic()
        message = await refused(s, "workload_logs", name="train")
        took = time.monotonic() - started
    assert "203.0.113.9 is an emulated node's address" in message, message
    assert "no machine stands behind it" in message
    assert took < 3.0
    assert not (tmp / "state" / "oslogin_user").exists()
    assert not (tmp / "state" / "oslogin_user.failed").exists()  # nothing was looked up
