"""An MCP edit tool's parameters come from its edit class (``surfaces/mcp_server/_common``):
the fields, in order, then the arguments every edit takes; the body gets the edit they make."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from mcp.server.mcpserver import MCPServer

from reconciler.adapters.statedir import StateDir
from reconciler.intent.edits import AddSlot, Edit, EditContext, Hold, Release, RemoveSlot, SetPoll
from reconciler.intent.edits_control import Resume, Suspend
from reconciler.intent.edits_race import Race
from reconciler.intent.edits_workload import RestartWorkload, SetWorkload, StopWorkload
from reconciler.intent.engine import IntentEditor
from reconciler.surfaces.mcp_server import build_server
from reconciler.surfaces.mcp_server._common import EDIT, EditCall, edit_tool


@dataclass(frozen=True, slots=True)
class Rename(Edit):
    kind: ClassVar[str] = "rename"
    name: str
    to: str
    dry: bool | None = None
    why: str = "asked"

    def apply(self, ctx: EditContext) -> None:
        raise AssertionError("not applied here")


def _store(tmp_path: Path) -> IntentEditor:
    return IntentEditor(tmp_path / "desired.yaml", StateDir(tmp_path / "state"))


async def test_the_fields_are_the_parameters_and_the_body_gets_the_edit(tmp_path: Path) -> None:
    server = MCPServer("test")
    seen: list[tuple[Any, ...]] = []

    @edit_tool(server, _store(tmp_path), Rename, EDIT, fixed={"why": "by a tool"}, confirm=True)
    def rename(call: EditCall[Rename], loud: bool = False) -> dict[str, Any]:
        """Rename a thing."""
        seen.append((call.edit, call.operation_id, call.wait_seconds, call.confirmed, loud))
        return {"done": True}

    (tool,) = await server.list_tools()
    schema = tool.input_schema
    assert list(schema["properties"]) == [
        "name", "to", "operation_id", "dry", "confirm", "loud", "wait_seconds"
    ]  # fmt: skip
    assert schema["required"] == ["name", "to"] and tool.description == "Rename a thing."
    await server.call_tool("rename", {"name": "a", "to": "b", "confirm": True, "loud": True})
    await server.call_tool("rename", {"name": "c", "to": "d", "operation_id": "op", "dry": True})
    assert seen == [
        (Rename("a", "b", why="by a tool"), None, 0, True, True),
        (Rename("c", "d", dry=True, why="by a tool"), "op", 0, False, False),
    ]


def test_a_field_the_class_does_not_have_is_refused_when_the_tool_is_made(
    tmp_path: Path,
) -> None:
    with pytest.raises(ValueError, match=r"Rename has no field \['too'\]"):
        edit_tool(MCPServer("test"), _store(tmp_path), Rename, EDIT, only=("name", "too"))


async def test_every_edit_tool_takes_its_classes_fields_and_operation_id_described_once(
    tmp_path: Path,
) -> None:
    tools = {t.name: t.input_schema for t in await build_server(_store(tmp_path)).list_tools()}
    made_from: dict[str, tuple[type[Edit], set[str]]] = {
        "queue_slot": (Hold, set()),
        "cancel_slot": (Release, set()),
        "add_slot": (AddSlot, set()),
        "set_race_group": (Race, {"exact"}),
        "remove_slot": (RemoveSlot, set()),
        "set_poll": (SetPoll, set()),
        "set_workload": (SetWorkload, set()),
        "restart_workload": (RestartWorkload, set()),
        "stop_workload": (StopWorkload, set()),
        "suspend": (Suspend, set()),
        "resume": (Resume, set()),
    }
    for name, (cls, fixed) in made_from.items():
        fields = {f.name for f in dataclasses.fields(cls)} - fixed
        assert fields <= set(tools[name]["properties"]), name
    described = {
        schema["properties"]["operation_id"].get("description")
        for schema in tools.values()
        if "operation_id" in schema["properties"]
    }
    assert len(described) == 1 and "retry" in str(described.pop())
