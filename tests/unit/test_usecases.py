"""The use-case declarations (``reconciler.intent.usecases``) and the surfaces made from them:
one canonical name per action, every declared edit joined to its class, the MCP tools (names,
deprecated aliases, annotations) and the CLI's edit verbs (their arguments) exactly as the
declarations say."""

from __future__ import annotations

import argparse
import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.statedir import StateDir
from reconciler.intent import catalog, usecases
from reconciler.intent.engine import IntentEditor
from reconciler.surfaces import cli
from reconciler.surfaces.cli import _skill_text as skill
from reconciler.surfaces.mcp_server import build_server


def _server_tools(tmp_path: Path) -> dict[str, Any]:
    import asyncio

    store = IntentEditor(tmp_path / "desired.yaml", StateDir(tmp_path / "state"))
    return {t.name: t for t in asyncio.run(build_server(store).list_tools())}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _command(path: str) -> argparse.ArgumentParser | None:
    parser: argparse.ArgumentParser | None = cli.build_parser()
    for word in path.split():
        parser = _subparsers(parser).get(word) if parser is not None else None
    return parser


def test_each_action_has_one_name_and_each_name_one_action() -> None:
    names = Counter(c.name for c in usecases.ALL)
    assert [n for n, k in names.items() if k > 1] == []
    tools = Counter(n for c in usecases.ALL if c.mcp for n in (c.mcp, *c.aliases))
    assert [n for n, k in tools.items() if k > 1] == []
    commands = Counter(c.cli for c in usecases.ALL if c.cli)
    assert [n for n, k in commands.items() if k > 1] == []
    for case in usecases.ALL:
        assert case.summary and "\n" not in case.summary, case.name
        # one name: the CLI's word, wherever the action has a CLI command; the MCP tool's too
        if case.cli is not None:
            assert case.name == case.cli.replace("-", "_").replace(" ", "_"), case.name
        if case.mcp is not None:
            assert case.mcp == case.name, case.name
    assert usecases.by_name("hold").aliases == ("queue_slot",)
    assert usecases.deprecated() == {
        "queue_slot": "hold",
        "cancel_slot": "release",
        "set_race_group": "race",
        "plan": "last_plan",
        "list_slots": "status",
        "slot_info": "info",
        "ssh_command": "ssh",
        "workload_logs": "logs",
        "capacity_history": "history",
        "recommend_zones": "recommend",
        "quotas": "quota",
        "set_workload": "workload_set",
        "restart_workload": "workload_restart",
        "stop_workload": "workload_stop",
        "confirm_deletes": "confirm",
    }
    # `plan` means one thing: the CLI's observe-now; the controller's last plan is last_plan
    assert usecases.by_name("plan").cli == "plan" and usecases.by_name("plan").mcp is None
    assert usecases.by_name("last_plan").mcp == "last_plan"
    with pytest.raises(KeyError, match="no use case 'queue_slot'"):
        usecases.by_name("queue_slot")


def test_every_declared_edit_names_one_edit_class_and_its_fields() -> None:
    for case in catalog.edit_cases():
        cls = catalog.edit_of(case)
        assert cls.kind == case.edit, case.name
        taken = {f.name for f in catalog.fields_of(case)}
        assert taken.isdisjoint(dict(case.fixed)), case.name
        assert {a.field for a in case.args} <= taken | set(dict(case.fixed)), case.name
    broken = dataclasses.replace(usecases.by_name("hold"), edit="no_such_edit")
    with pytest.raises(TypeError, match="names no edit 'no_such_edit'"):
        catalog.edit_of(broken)
    misspelt = dataclasses.replace(usecases.by_name("hold"), args=(usecases.Arg("nmae"),))
    with pytest.raises(TypeError, match="Hold has no"):
        catalog.fields_of(misspelt)


def test_make_builds_the_edit_from_a_surfaces_arguments() -> None:
    race = catalog.make(usecases.by_name("race"), {"group": "g", "slots": ["a", "b"], "count": 1})
    assert race == catalog.edit_classes()["race"]("g", ("a", "b"), 1, exact=True)
    vm = catalog.make(usecases.by_name("setup_vm"), {"name": "a", "tmux": True})
    assert vm.args == {"name": "a", "bootstrap": True, "tailscale": None, "tmux": None,
                       "at_boot": None, "rerun": True}  # fmt: skip


def test_the_mcp_tools_are_the_declarations(tmp_path: Path) -> None:
    tools = _server_tools(tmp_path)
    declared = usecases.mcp_names()
    assert set(tools) == set(declared)
    for name, tool in tools.items():
        case, a = declared[name], tool.annotations
        assert a.read_only_hint is (case.kind == "read"), name
        assert a.destructive_hint is (case.kind == "destructive"), name
        assert a.idempotent_hint is (not case.again), name
        assert ("confirm" in tool.input_schema["properties"]) is bool(case.confirm), name
        if name in case.aliases:  # the same tool under its old name, saying so
            canonical = tools[case.mcp]
            assert tool.input_schema == canonical.input_schema, name
            assert tool.description.startswith(f"Deprecated alias of `{case.mcp}`"), name
            assert tool.description.endswith(canonical.description), name
        else:
            assert "Deprecated" not in (tool.description or ""), name
    for case in catalog.edit_cases():
        if case.mcp is not None:
            params = set(tools[case.mcp].input_schema["properties"])
            assert {f.name for f in catalog.fields_of(case)} <= params, case.name


def test_the_cli_edit_verbs_are_made_from_the_declarations() -> None:
    verbs = list(usecases.cli_verbs())
    assert {c.cli for c in verbs} >= {"hold", "release", "race", "add-slot", "pause"}
    for case in verbs:
        assert case.cli is not None and cli._COMMANDS[case.cli] == "_intent"
        parser = _command(case.cli)
        assert parser is not None, case.cli
        dests = {a.dest for a in parser._actions} - {"help", "operation_id", "json"}
        expected = {f.name for f in catalog.fields_of(case)}
        expected |= {"yes"} if case.confirm else set()
        expected |= {"close_tmux"} if case.name == "release" else set()
        assert dests == expected, case.cli
    for case in usecases.ALL:  # the verbs in a group and the actions: their modules' handlers
        if case.flags and case not in verbs:
            assert case.cli is not None, case.name
            parser = _command(case.cli)
            assert parser is not None, case.cli
            dests = {a.dest for a in parser._actions} - {"help", "operation_id", "json"}
            if case.edit is not None:
                expected = {f.name for f in catalog.fields_of(case)}
            else:  # an action that is no edit: its declared arguments
                expected = {a.field for a in case.args}
            assert dests == expected | ({"yes"} if case.confirm else set()), case.cli
    for case in usecases.ALL:  # every declared command exists, with --json when it says so
        if case.cli is not None:
            parser = _command(case.cli)
            assert parser is not None, case.cli
            options = {o for a in parser._actions for o in a.option_strings}
            assert ("--json" in options) is case.json, case.cli


def test_the_skill_is_made_from_the_declarations() -> None:
    for case in usecases.ALL:
        if case.mcp is not None:
            assert skill.TOOLS[case.mcp], case.name
            for alias in case.aliases:
                assert skill.TOOLS[alias].startswith(f"Deprecated alias of `{case.mcp}`")
        if case.cli is not None and case.json:
            assert case.summary[1:] in skill.JSON_COMMANDS[case.cli], case.name


def test_the_tui_help_names_each_keys_use_case() -> None:
    from reconciler.surfaces.tui._app import KEY_ACTIONS, KEYS

    keys = dict(KEYS)
    for key, name in KEY_ACTIONS.items():
        usecases.by_name(name)  # a declared use case (KeyError otherwise)
        assert keys[key].endswith(f" · {name}"), key
    assert keys["c"] == "hold the slot (want: held) · hold"


def test_docs_list_each_deprecated_name_with_its_canonical_tool() -> None:
    import re

    text = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text()
    section = text.split("### Deprecated names", 1)[1].split("\n### ", 1)[0]
    rows = re.findall(r"^\| `(\w+)\([^`]*\)` \| \w+ \| `(\w+)`", section, re.MULTILINE)
    assert dict(rows) == usecases.deprecated()


def test_choices_come_from_the_models_vocabularies() -> None:
    from reconciler.model.accelerators import APIS
    from reconciler.model.names import MODE_PREFIX

    add = _command("add-slot")
    assert add is not None
    choices = {a.dest: tuple(a.choices or ()) for a in add._actions}
    assert choices["mode"] == tuple(MODE_PREFIX) and choices["api"] == APIS
    assert choices["want"] == ("held", "released")


def _parsed(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(list(argv))


def test_workload_set_takes_its_flags_from_the_declaration() -> None:
    from reconciler.intent.edits_workload import SetWorkload
    from reconciler.surfaces.cli._intent import declared_edit

    args = _parsed(
        "workload", "set", "train", "--argv", "python3", "t.py", "--env", "A=1", "--env", "B=",
        "--secret-env", "K=hf-token", "--idle-below", "5.5", "--no-take-tpu", "--restart",
        "always", "--max-failures", "3", "--stall-after", "30m",
    )  # fmt: skip
    assert declared_edit(args) == SetWorkload(
        "train", command=("python3", "t.py"), env={"A": "1", "B": ""},
        secret_env={"K": "hf-token"}, restart="always", max_failures=3, stall_after="30m",
        idle_below=5.5, take_tpu=False,
    )  # fmt: skip
    assert declared_edit(_parsed("workload", "set", "train", "--command", "make")).command == "make"
    # --command and --argv are one field, given one way; a choice is the model's vocabulary
    for wrong in (("--command", "make", "--argv", "make"), ("--restart", "sometimes")):
        with pytest.raises(SystemExit):
            _parsed("workload", "set", "train", *wrong)
    with pytest.raises(ValueError, match="--secret-env takes NAME=VALUE, got 'K'"):
        declared_edit(_parsed("workload", "set", "train", "--secret-env", "K"))
    untouched = declared_edit(_parsed("workload", "set", "train", "--workdir", "/w"))
    assert untouched == SetWorkload("train", workdir="/w")  # None: every other field as it is


def test_confirm_takes_an_optional_fingerprint_from_the_declaration() -> None:
    assert vars(_parsed("confirm")) | {"fingerprint": None, "yes": False} == vars(
        _parsed("confirm")
    )
    args = _parsed("confirm", "0123456789abcdef", "--yes")
    assert (args.fingerprint, args.yes) == ("0123456789abcdef", True)
    with pytest.raises(SystemExit):
        _parsed("confirm", "a", "b")
