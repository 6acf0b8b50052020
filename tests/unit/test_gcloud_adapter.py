"""GcloudCloud's process handling against a fake gcloud (a tiny Python script).

The fake logs each run (argv, stdin, environment, timing, pid) and answers from a plan: the
first rule whose ``match`` is a substring of the joined argv. Real gcloud runs live in
tests/integration/test_gcloud_contract.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.cloud import Outcome
from reconciler.adapters.gcloud import GcloudCloud
from reconciler.adapters.tpu_api_parse import QRState
from reconciler.errors import PermanentCloudError, TransientCloudError, UnsafeName
from reconciler.model.observed import Observation
from reconciler.model.requests import CreateRequest
from tests.support.waiting import eventually

FAKE = """\
import json, os, subprocess, sys, time
plan = json.load(open(os.environ["FAKE_PLAN"]))
joined = " ".join(sys.argv[1:])
rule = next((r for r in plan if r["match"] in joined), {})
child = None
if rule.get("child"):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]).pid
start = {"argv": sys.argv[1:], "pid": os.getpid(), "child": child, "t": time.time(),
         "stdin": sys.stdin.read(), "prompts": os.environ.get("CLOUDSDK_CORE_DISABLE_PROMPTS"),
         "marker": os.environ.get("FAKE_MARKER")}
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps(start) + "\\n")
time.sleep(rule.get("sleep", 0))
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps({"end": os.getpid(), "t": time.time()}) + "\\n")
sys.stdout.write(rule.get("stdout", ""))
sys.stderr.write(rule.get("stderr", ""))
sys.exit(rule.get("rc", 0))
"""

ZONE_A, ZONE_B = "us-central2-b", "europe-west4-a"


def qr_json(zone: str, name: str, state: str = "ACTIVE") -> dict[str, Any]:
    return {
        "name": f"projects/test-project/locations/{zone}/queuedResources/{name}",
        "state": {"state": state},
        "tpu": {"nodeSpec": [{"nodeId": name, "node": {"acceleratorType": "v4-8"}}]},
    }


def node_json(zone: str, name: str) -> dict[str, Any]:
    return {"name": f"projects/test-project/locations/{zone}/nodes/{name}", "state": "READY"}


def ok(match: str, data: Any, **extra: Any) -> dict[str, Any]:
    return {"match": match, "stdout": json.dumps(data), **extra}


def fail(match: str, stderr: str, *, stdout: str = "[]", rc: int = 1) -> dict[str, Any]:
    return {"match": match, "stderr": stderr, "stdout": stdout, "rc": rc}


class Fake:
    def __init__(self, tmp_path: Path) -> None:
        self.script = tmp_path / "gcloud"
        self.script.write_text(f"#!{sys.executable}\n{FAKE}")
        self.script.chmod(0o755)
        self.plan_file = tmp_path / "plan.json"
        self.log_file = tmp_path / "log.jsonl"
        self.plan([])
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "FAKE_PLAN": str(self.plan_file),
            "FAKE_LOG": str(self.log_file),
            "FAKE_MARKER": "passed-through",
            "CLOUDSDK_CORE_DISABLE_PROMPTS": "0",  # the adapter must override it
        }

    def plan(self, rules: list[dict[str, Any]]) -> None:
        self.plan_file.write_text(json.dumps(rules))

    def cloud(self, **kwargs: Any) -> GcloudCloud:
        return GcloudCloud("test-project", gcloud=str(self.script), env=self.env, **kwargs)

    def runs(self) -> list[dict[str, Any]]:
        if not self.log_file.exists():
            return []
        lines = [json.loads(line) for line in self.log_file.read_text().splitlines()]
        return [line for line in lines if "argv" in line]

    def max_overlap(self) -> int:
        events = []
        for line in self.log_file.read_text().splitlines():
            entry = json.loads(line)
            events.append((entry["t"], 1 if "argv" in entry else -1))
        level = peak = 0
        for _, step in sorted(events):
            level += step
            peak = max(peak, level)
        return peak


@pytest.fixture
def fake(tmp_path: Path) -> Fake:
    return Fake(tmp_path)


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


async def test_observe_zones_runs_two_lists_per_zone_with_safe_argv(fake: Fake) -> None:
    fake.plan(
        [
            ok(f"queued-resources list --zone={ZONE_A}", [qr_json(ZONE_A, "a")]),
            ok(f"tpu-vm list --zone={ZONE_A}", [node_json(ZONE_A, "a")]),
            ok(f"queued-resources list --zone={ZONE_B}", [qr_json(ZONE_B, "b", "ACCEPTED")]),
            ok(f"tpu-vm list --zone={ZONE_B}", []),
        ]
    )
    seen = await fake.cloud().observe([ZONE_A, ZONE_B, ZONE_A])
    assert seen.zones == frozenset({ZONE_A, ZONE_B})
    assert seen.unreachable == frozenset()
    assert seen.knows(ZONE_A) and seen.knows(ZONE_B)
    assert seen.request(ZONE_A, "a") is not None and seen.node(ZONE_A, "a") is not None
    qr_b = seen.request(ZONE_B, "b")
    assert qr_b is not None and qr_b.api_state == QRState.ACCEPTED
    runs = fake.runs()
    assert len(runs) == 4
    for run in runs:
        assert run["argv"][:2] == ["compute", "tpus"]
        assert run["argv"][-3:] == ["--project=test-project", "--format=json", "--quiet"]
        assert run["stdin"] == ""
        assert run["prompts"] == "1"
        assert run["marker"] == "passed-through"


async def test_observe_all_zones_is_one_list_of_each(fake: Fake) -> None:
    fake.plan(
        [
            ok("queued-resources list --zone=-", [qr_json(ZONE_A, "a"), qr_json(ZONE_B, "b")]),
            ok("tpu-vm list --zone=-", [node_json(ZONE_A, "a")]),
        ]
    )
    seen = await fake.cloud().observe(None)
    assert seen.zones is None and seen.knows(ZONE_B)
    assert {q.key for q in seen.requests} == {(ZONE_A, "a"), (ZONE_B, "b")}
    assert sorted(r["argv"][2] for r in fake.runs()) == ["queued-resources", "tpu-vm"]


async def test_a_failing_zone_is_unreachable_not_empty(fake: Fake) -> None:
    # gcloud prints "[]" on stdout even when the list failed: the exit code must win.
    fake.plan(
        [
            ok(f"queued-resources list --zone={ZONE_A}", [qr_json(ZONE_A, "a")]),
            ok(f"tpu-vm list --zone={ZONE_A}", []),
            ok(f"queued-resources list --zone={ZONE_B}", [qr_json(ZONE_B, "b")]),
            fail(f"tpu-vm list --zone={ZONE_B}", "ERROR: (gcloud.x) HTTPError 503: down\n"),
        ]
    )
    seen = await fake.cloud().observe([ZONE_A, ZONE_B])
    assert seen.unreachable == {ZONE_B}
    assert not seen.knows(ZONE_B) and seen.knows(ZONE_A)
    assert seen.request(ZONE_B, "b") is None  # partial results of an unknown zone are dropped
    assert seen.request(ZONE_A, "a") is not None


async def test_nothing_observed_raises_with_the_clouds_intent(fake: Fake) -> None:
    fake.plan([fail("list", "ERROR: (gcloud.x) UNAVAILABLE: try later\n")])
    with pytest.raises(TransientCloudError, match=r"no zone could be observed.*try later"):
        await fake.cloud().observe([ZONE_A, ZONE_B])
    fake.plan([fail("list", "ERROR: (gcloud.x) PERMISSION_DENIED: tpu.list denied\n")])
    with pytest.raises(PermanentCloudError, match=r"tpu\.list denied"):
        await fake.cloud().observe([ZONE_A])
    with pytest.raises(PermanentCloudError, match=r"tpu\.list denied"):
        await fake.cloud().observe(None)
    fake.plan([ok("queued-resources list", [qr_json(ZONE_A, "a")]), ok("tpu-vm", "garbage")])
    with pytest.raises(TransientCloudError, match="expected a JSON list"):
        await fake.cloud().observe(None)
    runs = len(fake.runs())
    assert await fake.cloud().observe([]) == Observation(zones=frozenset())
    assert len(fake.runs()) == runs


async def test_garbage_output_is_transient(fake: Fake) -> None:
    fake.plan([{"match": "describe", "stdout": "Listed 0 items.\n"}])
    with pytest.raises(TransientCloudError, match="not JSON"):
        await fake.cloud().describe_request("tpu", ZONE_A, "a")


async def test_create_delete_describe_outcomes(fake: Fake) -> None:
    op = {"name": f"projects/test-project/locations/{ZONE_A}/operations/op-1", "done": False}
    request = CreateRequest(name="a", zone=ZONE_A, accelerator="v4-8", image="rt", mode="spot")
    cloud = fake.cloud()
    fake.plan([ok("create a", op), ok("delete a", op), ok("describe a", qr_json(ZONE_A, "a"))])
    assert (await cloud.create_request(request)).outcome is Outcome.DONE
    assert (await cloud.delete_request("tpu", ZONE_A, "a", force=True)).outcome is Outcome.DONE
    described = await cloud.describe_request("tpu", ZONE_A, "a")
    assert described is not None and described.key == (ZONE_A, "a")
    fake.plan(
        [
            fail("create", "ERROR: (gcloud.c) ALREADY_EXISTS: exists\n", stdout=""),
            fail("delete", "ERROR: (gcloud.d) NOT_FOUND: gone\n", stdout=""),
            fail("describe", "ERROR: (gcloud.d) NOT_FOUND: gone\n", stdout=""),
            fail("get-guest-attributes", "ERROR: (gcloud.g) NOT_FOUND: no node\n", stdout=""),
        ]
    )
    assert (await cloud.create_request(request)).outcome is Outcome.ALREADY
    assert (await cloud.delete_request("tpu", ZONE_A, "a", force=False)).outcome is Outcome.ALREADY
    assert await cloud.describe_request("tpu", ZONE_A, "a") is None
    with pytest.raises(PermanentCloudError, match="no node"):
        await cloud.guest_attributes(ZONE_A, "a")
    with pytest.raises(UnsafeName):
        await cloud.delete_request("tpu", ZONE_A, "--all", force=True)
    assert len(fake.runs()) == 7


async def test_timeout_kills_gcloud_and_its_children(fake: Fake) -> None:
    fake.plan([{"match": "list", "sleep": 30, "child": True}])
    started = time.monotonic()
    with pytest.raises(TransientCloudError, match=r"timed out after 0\.5s"):
        await fake.cloud(timeout=0.5).observe(None)
    assert time.monotonic() - started < 5
    runs = fake.runs()
    assert len(runs) == 2
    pids = [pid for run in runs for pid in (run["pid"], run["child"])]
    assert await eventually(lambda: all(gone(pid) for pid in pids))


async def test_concurrency_is_bounded(fake: Fake) -> None:
    fake.plan([{"match": "list", "sleep": 0.3, "stdout": "[]"}])
    zones = [ZONE_A, ZONE_B, "asia-east1-c"]
    await fake.cloud(concurrency=2).observe(zones)
    assert len(fake.runs()) == 6
    assert fake.max_overlap() == 2


async def test_aclose_kills_running_calls(fake: Fake) -> None:
    fake.plan([{"match": "describe", "sleep": 30}])
    cloud = fake.cloud()
    call = asyncio.create_task(cloud.describe_request("tpu", ZONE_A, "a"))
    assert await eventually(lambda: len(fake.runs()) == 1)
    await cloud.aclose()
    with pytest.raises(TransientCloudError, match="killed"):
        await asyncio.wait_for(call, 5)
    assert await eventually(lambda: gone(fake.runs()[0]["pid"]))


async def test_cancelling_a_call_kills_its_process(fake: Fake) -> None:
    fake.plan([{"match": "describe", "sleep": 30}])
    call = asyncio.create_task(fake.cloud().describe_request("tpu", ZONE_A, "a"))
    assert await eventually(lambda: len(fake.runs()) == 1)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert await eventually(lambda: gone(fake.runs()[0]["pid"]))


async def test_missing_gcloud_is_permanent(tmp_path: Path) -> None:
    cloud = GcloudCloud("test-project", gcloud=str(tmp_path / "no-gcloud"), env={})
    with pytest.raises(PermanentCloudError, match="cannot run"):
        await cloud.describe_request("tpu", ZONE_A, "a")


def test_constructor_validates() -> None:
    with pytest.raises(UnsafeName):
        GcloudCloud("--project=evil")
    with pytest.raises(ValueError, match="concurrency"):
        GcloudCloud("test-project", concurrency=0)
    with pytest.raises(ValueError, match="timeout"):
        GcloudCloud("test-project", timeout=0)
    assert GcloudCloud("test-project").capability.transport == "gcloud"
