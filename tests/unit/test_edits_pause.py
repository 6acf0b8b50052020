"""``pause``: a slot's own ``paused: true``, a verb made from its declaration alone (the
``Pause`` edit and its entry in ``intent/usecases``): the edit, the CLI verb, the MCP tool and
the skill all have it without a line of their own."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from reconciler.adapters.statedir import StateDir
from reconciler.errors import EditRejected
from reconciler.intent.edits_control import Pause
from reconciler.intent.engine import IntentEditor
from reconciler.surfaces import cli
from reconciler.surfaces.cli import _skill_text as skill
from reconciler.surfaces.mcp_server import build_server
from tests.unit.test_intent import SAMPLE, apply, comments, slot, store, text

__all__ = ["store"]  # the fixture


def test_pause_writes_the_slots_own_key_and_resume_lifts_it(store: IntentEditor) -> None:
    result = apply(store, Pause("big"))
    assert result.status == "changed" and slot(store, "big").hold.paused
    assert comments(text(store)) == comments(SAMPLE)
    assert "    paused: true\n" in text(store)
    assert apply(store, Pause("big")).status == "unchanged"
    apply(store, Pause("big", resume=True))
    assert not slot(store, "big").hold.paused and "    paused: false\n" in text(store)
    apply(store, Pause("cand-a"))  # a race candidate keeps its place in its group
    assert slot(store, "cand-a").hold.paused and slot(store, "cand-a").race_group == "any-v6e8"


def test_pause_refuses_an_unknown_or_generated_slot(store: IntentEditor) -> None:
    with pytest.raises(EditRejected, match=r"unknown slot 'bgi'.*did you mean 'big'"):
        apply(store, Pause("bgi"))
    generated = next(s.name for s in store.parse(SAMPLE).slots if s.generated)
    with pytest.raises(EditRejected, match="generated"):
        apply(store, Pause(generated))
    assert text(store) == SAMPLE


def test_the_cli_verb_is_made_from_the_declaration(
    store: IntentEditor, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli._COMMANDS["pause"] == "_intent"
    common = ["-f", str(store.path), "--state-dir", str(store.state.root)]
    assert cli.main([*common, "pause", "small"]) == 0
    assert slot(store, "small").hold.paused
    assert "'small': paused: true" in capsys.readouterr().out
    assert cli.main([*common, "pause", "small", "--resume", "--json"]) == 0
    assert not slot(store, "small").hold.paused
    assert '"kind": "pause"' in capsys.readouterr().out
    assert cli.main([*common, "pause", "nosuch"]) == 1
    assert "unknown slot 'nosuch'" in capsys.readouterr().err


def test_the_mcp_tool_and_the_skill_have_it(tmp_path: Path) -> None:
    file = tmp_path / "desired.yaml"
    file.write_text(SAMPLE)
    server = build_server(IntentEditor(file, StateDir(tmp_path / "state"), env={}))
    tools = {t.name: t for t in asyncio.run(server.list_tools())}
    pause = tools["pause"]
    assert list(pause.input_schema["properties"]) == [
        "name", "operation_id", "resume", "wait_seconds"
    ]  # fmt: skip
    assert pause.annotations is not None and pause.annotations.read_only_hint is False
    assert pause.annotations.destructive_hint is False
    asyncio.run(server.call_tool("pause", {"name": "big", "operation_id": "p1"}))
    assert "    paused: true\n" in file.read_text()
    assert "pause" in skill.TOOLS and "pause" in skill.JSON_COMMANDS
