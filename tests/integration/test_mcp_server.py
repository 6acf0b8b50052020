"""The MCP server as a real process, driven by the SDK's own stdio client."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from reconciler.adapters.files import write_json
from reconciler.model.load import parse_desired
from tests.unit.test_intent import SAMPLE, comments

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]

READ_ONLY = {"list_slots", "slot_info", "ssh_command", "tmux_status", "plan", "events",
             "workload_status", "workload_logs", "capacity_history", "recommend_zones",
             "quotas", "timeline", "last_plan", "status", "info", "ssh", "logs", "history",
             "recommend", "quota"}  # fmt: skip
EDITS = {"queue_slot", "queue_slots", "setup_vm", "tailscale_setup", "tmux_sync", "tmux_open",
         "add_slot", "set_poll", "set_workload", "suspend", "resume", "hold",
         "pause", "workload_set"}  # fmt: skip
DESTRUCTIVE = {"cancel_slot", "set_race_group", "remove_slot", "tmux_close",
               "restart_workload", "stop_workload", "confirm_deletes", "release",
               "race", "workload_restart", "workload_stop", "confirm"}  # fmt: skip
# The deprecated MCP names, kept for one release, and the canonical tool each calls.
ALIASES = {"queue_slot": "hold", "cancel_slot": "release", "set_race_group": "race",
           "plan": "last_plan", "list_slots": "status", "slot_info": "info", "ssh_command": "ssh",
           "workload_logs": "logs", "capacity_history": "history",
           "recommend_zones": "recommend", "quotas": "quota", "set_workload": "workload_set",
           "restart_workload": "workload_restart", "stop_workload": "workload_stop",
           "confirm_deletes": "confirm"}  # fmt: skip
# Repeated without the same operation_id, these do it again (a new slot, another run).
AGAIN = {"add_slot", "setup_vm", "tailscale_setup", "restart_workload", "workload_restart"}


@asynccontextmanager
async def session(tmp: Path, *module_args: str) -> AsyncIterator[ClientSession]:
    """A client session with a fresh server; opened inside each test body."""
    args = module_args or (
        "reconciler.surfaces.mcp_server",
        "--file", str(tmp / "desired.yaml"),
        "--state-dir", str(tmp / "state"),
    )  # fmt: skip
    params = StdioServerParameters(command=sys.executable, args=["-m", *args], cwd=str(REPO))
    with (tmp / "server.err").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            yield s


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    (tmp_path / "desired.yaml").write_text(SAMPLE)
    return tmp_path


async def call(s: ClientSession, tool: str, **args: Any) -> dict[str, Any]:
    result = await s.call_tool(tool, args)
    assert not result.is_error, result.content
    doc = result.structured_content
    assert isinstance(doc, dict) and doc["schema_version"] == "tpu-reconciler.mcp.v1"
    return doc


async def refused(s: ClientSession, tool: str, **args: Any) -> str:
    result = await s.call_tool(tool, args)
    assert result.is_error
    return " ".join(getattr(c, "text", "") for c in result.content)


async def test_tools_and_their_annotations(tmp: Path) -> None:
    async with session(tmp) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
    assert set(tools) == READ_ONLY | EDITS | DESTRUCTIVE
    for name, tool in tools.items():
        a = tool.annotations
        assert a is not None and a.open_world_hint is False, name
        assert a.read_only_hint is (name in READ_ONLY), name
        assert a.destructive_hint is (name in DESTRUCTIVE), name
        assert a.idempotent_hint is (name not in AGAIN), name
        if name in EDITS | DESTRUCTIVE - {"tmux_close", "confirm_deletes", "confirm"}:
            assert "operation_id" in tool.input_schema["properties"], name
            assert "operation_id" not in tool.input_schema.get("required", []), name
    assert (tmp / "desired.yaml").read_text() == SAMPLE
    documented = re.findall(
        r"^\| `(\w+)\(([^`]*)\)` \|", (REPO / "docs" / "mcp.md").read_text(), re.M
    )
    assert dict(documented) == {name: _signature(t.input_schema) for name, t in tools.items()}


def _signature(schema: dict[str, Any]) -> str:
    """A tool's arguments as docs/mcp.md writes them: ``name, operation_id?, confirm=false``
    (``wait_seconds``, which every edit takes, has its own section)."""
    required = set(schema.get("required", []))
    args = []
    for arg, spec in schema.get("properties", {}).items():
        if arg == "wait_seconds":
            continue
        default = spec.get("default")
        if arg in required:
            args.append(arg)
        elif default is None:
            args.append(f"{arg}?")
        else:
            args.append(f"{arg}={json.dumps(default)}")
    return ", ".join(args)


async def test_every_edit_changes_the_file_as_intended_and_keeps_comments(tmp: Path) -> None:
    file = tmp / "desired.yaml"

    def desired() -> Any:
        return parse_desired(file.read_text())

    async with session(tmp) as s:
        doc = await call(s, "queue_slot", name="small", operation_id="e1")
        assert doc["status"] == "changed" and "+    want: held" in doc["diff"]
        assert desired().slot("small").want == "held"
        await call(s, "queue_slots", names=["big", "small"], race=True, count=1, operation_id="e2")
        assert desired().slot("big").race_group == "race-big"
        await call(s, "setup_vm", name="cand-a", operation_id="e3")
        await call(s, "tailscale_setup", name="cand-a", operation_id="e4")
        setup = desired().slot("cand-a").setup
        assert setup.bootstrap and setup.tailscale and setup.generation == 2
        await call(s, "tmux_open", name="cand-b", operation_id="e5")
        assert desired().slot("cand-b").setup.tmux is True
        await call(s, "tmux_sync", operation_id="e6")
        doc = await call(s, "add_slot", zone="europe-west4-a", accelerator="v6e-8",
                         operation_id="e7")  # fmt: skip
        assert doc["slots"] == ["spot-v6e8-ew4a-1"] and desired().slot("spot-v6e8-ew4a-1")
        await call(s, "set_poll", interval="1m", operation_id="e8")
        assert desired().settings.poll_interval == 60
        await call(s, "set_race_group", group="any-v6e8", slots=["cand-a", "cand-b"], count=2,
                   operation_id="e9")  # fmt: skip
        assert next(g for g in desired().race_groups if g.name == "any-v6e8").count == 2
        await call(s, "cancel_slot", name="spot-v6e8-ew4a-1", confirm=True, operation_id="e10")
        assert desired().slot("spot-v6e8-ew4a-1").want == "released"
        doc = await call(s, "remove_slot", name="spot-v6e8-ew4a-1", operation_id="e11")
        assert desired().slot("spot-v6e8-ew4a-1") is None
        assert any("UNMANAGED" in n for n in doc["notes"])
    kept = comments(file.read_text())
    # Every comment stays, that of big's removed 'want: held' line too (big joined a race).
    assert kept == comments(SAMPLE)


async def test_invalid_edits_leave_the_file_byte_identical(tmp: Path) -> None:
    before = (tmp / "desired.yaml").read_bytes()
    async with session(tmp) as s:
        assert "invalid name" in await refused(s, "queue_slot", name="Bad;x", operation_id="i1")
        text = await refused(s, "queue_slot", name="smal", operation_id="i2")
        assert "unknown slot 'smal'" in text and "did you mean 'small'" in text
        text = await refused(s, "add_slot", zone="us-central2-b", accelerator="v9-8",
                             operation_id="i3")  # fmt: skip
        assert re.search(r"desired\.yaml:\d+:\d+: unknown accelerator 'v9-8'", text)
        assert "confirm=true" in await refused(s, "cancel_slot", name="big", operation_id="i4")
        text = await refused(s, "cancel_slot", name="bgi")  # unknown before "ask the user"
        assert "unknown slot 'bgi'" in text and "did you mean 'big'" in text
        assert "confirm=true" in await refused(s, "tmux_close", name="big")
        text = await refused(s, "set_race_group", group="any-v6e8", slots=["cand-a"], count=1,
                             operation_id="i5")  # fmt: skip
        assert "confirm" in text
        assert "invalid operation id" in await refused(s, "queue_slot", name="small",
                                                       operation_id="no spaces")  # fmt: skip
    assert (tmp / "desired.yaml").read_bytes() == before


async def test_an_edit_without_an_operation_id_gets_a_fresh_one(tmp: Path) -> None:
    async with session(tmp) as s:
        first = await call(s, "queue_slot", name="small")
        again = await call(s, "queue_slot", name="small")
        added = await call(s, "add_slot", zone="europe-west4-a", accelerator="v6e-8")
    assert (first["status"], again["status"]) == ("changed", "unchanged")
    ids = first["operation_id"], again["operation_id"]
    assert ids[0].startswith("mcp-") and ids[0] != ids[1]
    assert added["status"] == "changed" and added["slots"] == ["spot-v6e8-ew4a-1"]


async def test_operation_id_replay_and_conflict(tmp: Path) -> None:
    async with session(tmp) as s:
        first = await call(s, "queue_slot", name="small", operation_id="op-1")
        (tmp / "desired.yaml").write_text(SAMPLE)  # reverted by hand
        again = await call(s, "queue_slot", name="small", operation_id="op-1")
        text = await refused(s, "queue_slot", name="big", operation_id="op-1")
    assert (first["status"], again["status"]) == ("changed", "exists")
    assert again["diff"] == first["diff"] and (tmp / "desired.yaml").read_text() == SAMPLE
    assert "already used for a different edit" in text


async def test_read_tools_and_wait_seconds_against_written_snapshots(tmp: Path) -> None:
    status = tmp / "state" / "status.json"

    def snapshot(state: str) -> dict[str, Any]:
        now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        row = {"name": "small", "zone": "us-central2-b", "state": state, "want": "held",
               "managed": True, "ips": ["10.1.2.3"], "instance": "small@77"}  # fmt: skip
        return {"schema_version": "tpu-reconciler.status.v1", "generated_at": now,
                "slots": [row], "tmux": {"windows": [], "orphans": []}, "plan": None}  # fmt: skip

    async def controller() -> None:
        await asyncio.sleep(0.8)
        write_json(status, snapshot("WAITING_FOR_RESOURCES"))
        await asyncio.sleep(0.5)
        write_json(status, snapshot("ACTIVE"))

    async with session(tmp) as s:
        listed = await call(s, "list_slots")
        assert listed["snapshot"]["present"] is False and len(listed["slots"]) == 5
        task = asyncio.create_task(controller())
        doc = await call(s, "queue_slot", name="small", operation_id="w1", wait_seconds=10)
        await task
        assert doc["wait"]["reached"] is True and doc["wait"]["observed"][0]["state"] == "ACTIVE"
        ssh = await call(s, "ssh_command", name="small")
        assert ssh["ip"] == "10.1.2.3" and "HostKeyAlias=tpu.small.77.w0" in ssh["command"]
        info = await call(s, "slot_info", name="small")
        assert info["observed"]["state"] == "ACTIVE" and info["ssh"]["available"] is True
        assert (await call(s, "events"))["events"] == []
        assert (await call(s, "tmux_status"))["windows"] == []


async def test_tpu_reconciler_mcp_is_the_same_server(tmp: Path) -> None:
    args = (
        "reconciler",
        "--file",
        str(tmp / "desired.yaml"),
        "--state-dir",
        str(tmp / "st"),
        "mcp",
    )
    async with session(tmp, *args) as s:
        names = {t.name for t in (await s.list_tools()).tools}
        doc = await call(s, "queue_slot", name="small", operation_id="c1")
    assert names == READ_ONLY | EDITS | DESTRUCTIVE and doc["status"] == "changed"
    assert (tmp / "st" / "audit.jsonl").exists()


async def test_suspend_resume_and_confirm_deletes(tmp: Path) -> None:
    file = tmp / "desired.yaml"
    guard = {"limit": 2, "deletes": ["z/a@1", "z/b@2", "z/c@3"], "fingerprint": "", "slots": []}
    from reconciler.core.control import fingerprint

    guard["fingerprint"] = fingerprint(guard["deletes"])
    async with session(tmp) as s:
        doc = await call(s, "suspend", operation_id="s1")
        assert doc["status"] == "changed" and parse_desired(file.read_text()).settings.suspend
        doc = await call(s, "resume", operation_id="s2")
        assert not parse_desired(file.read_text()).settings.suspend
        assert "confirm=true" in await refused(s, "confirm_deletes")
        assert (await call(s, "confirm_deletes", confirm=True))["status"] == "nothing"
        # the canonical name (the CLI's word); confirm_deletes is its deprecated alias
        assert "confirm=true" in await refused(s, "confirm")
        assert (await call(s, "confirm", confirm=True))["status"] == "nothing"
        write_json(tmp / "state" / "status.json", {
            "schema_version": "tpu-reconciler.status.v1", "plan": {"guard": guard}
        })  # fmt: skip
        assert "changed" in await refused(
            s, "confirm_deletes", confirm=True, fingerprint="0123456789abcdef"
        )
        doc = await call(s, "confirm_deletes", confirm=True, fingerprint=guard["fingerprint"])
    assert doc["status"] == "confirmed" and doc["deletes"] == guard["deletes"]
    from reconciler.adapters.confirm_file import confirm_path
    from reconciler.adapters.statedir import StateDir

    confirmed = json.loads(confirm_path(StateDir(tmp / "state")).read_text())
    assert confirmed["deletes"] == sorted(guard["deletes"])
    assert comments(file.read_text()) == comments(SAMPLE)


async def test_capacity_history_and_recommend_zones_read_the_store(tmp: Path) -> None:
    from reconciler.adapters.history_db import HistoryDB
    from reconciler.core.history import Wait

    (tmp / "state").mkdir()
    db = HistoryDB(tmp / "state" / "history.sqlite")
    db.write([Wait("a", zone, "v6e-8", "spot", 0.0, w, w, w)
              for zone, w in (("us-east5-b", 600.0), ("europe-west4-a", 60.0))])  # fmt: skip
    db.close()
    async with session(tmp) as s:
        history = await call(s, "capacity_history", accelerator="v6e-8")
        ranked = await call(s, "recommend_zones", accelerator="v6e-8")
        bad = await refused(s, "recommend_zones", accelerator="v6e")
        bad_since = await refused(s, "capacity_history", since="a week")
    assert history["document"] == "tpu-reconciler.history.v1"
    assert {p["zone"] for p in history["places"]} == {"us-east5-b", "europe-west4-a"}
    assert ranked["document"] == "tpu-reconciler.recommend.v1"
    assert [z["zone"] for z in ranked["zones"]] == ["europe-west4-a", "us-east5-b"]
    assert "accelerator" in bad and "since" in bad_since
    assert (tmp / "desired.yaml").read_text() == SAMPLE  # read-only: the intent is untouched
