"""The CLI builds only the chosen command's sub-parsers: the registry of command modules is
complete, the chosen command is found the way argparse finds it, and a run parses (and helps)
exactly as the whole command tree does."""

from __future__ import annotations

import argparse
import importlib

import pytest

from reconciler.surfaces import cli


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_command_is_registered_with_the_module_that_adds_it() -> None:
    owners: dict[str, str] = {}
    for module in cli._MODULES:
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        importlib.import_module(f"reconciler.surfaces.cli.{module}").register(sub)
        owners.update(dict.fromkeys(_commands(parser), module))
    assert dict(cli._COMMANDS) == owners  # a new command needs its line in cli._COMMANDS


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["status"], "status"),
        (["-f", "d.yaml", "--state-dir", "s", "status", "--json"], "status"),
        (["--file=status", "-v", "-q", "plan"], "plan"),
        (["-fstatus", "--state-dir=x", "-vv", "tmux", "status"], "tmux"),
        (["-f", "plan", "status"], "status"),  # a file named like a command is the file
        ([], None),
        (["-f"], None),
        (["--help"], None),
        (["--version"], None),
        (["-vq", "status"], None),  # a cluster: left to argparse (the whole tree)
        (["--state", "s", "status"], None),  # an abbreviation: the same
        (["--", "status"], None),
    ],
)
def test_the_chosen_command_is_found_past_the_global_options(
    argv: list[str], command: str | None
) -> None:
    assert cli.chosen_command(argv) == command


ARGVS = [
    ["-f", "d.yaml", "status"],
    ["--state-dir", "/s", "status", "--json", "--interval", "3"],
    ["plan", "--detailed-exitcode"],
    ["hold", "slot-a", "--json"],
    ["secret", "set", "tailscale"],
    ["tmux", "close", "slot-a"],
    ["-v", "events", "--limit", "5"],
    ["service", "install", "--now"],
    ["completion", "zsh"],
    ["emulator", "serve", "--port", "0"],
]


@pytest.mark.parametrize("argv", ARGVS, ids=lambda a: " ".join(a))
def test_a_run_parses_and_helps_as_the_whole_tree_does(argv: list[str]) -> None:
    whole, lean = cli.build_parser(), cli.build_parser(argv)
    assert lean.parse_args(argv) == whole.parse_args(argv)
    name = cli.chosen_command(argv)
    assert name is not None
    assert set(_commands(lean)) == {c for c, m in cli._COMMANDS.items() if m == cli._COMMANDS[name]}
    assert _commands(lean)[name].format_help() == _commands(whole)[name].format_help()


@pytest.mark.parametrize(
    "argv", [["nosuch"], ["-vq", "status"], [], ["--help"]], ids=lambda a: " ".join(a) or "-"
)
def test_without_a_known_command_the_whole_tree_is_built(argv: list[str]) -> None:
    parser = cli.build_parser(argv)
    assert parser.format_help() == cli.build_parser().format_help()
    assert set(_commands(parser)) == set(cli._COMMANDS)


def test_a_mistake_after_the_command_reads_the_same(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["status", "--nosuch"]
    errors = []
    for parser in (cli.build_parser(), cli.build_parser(argv)):
        with pytest.raises(SystemExit):
            parser.parse_args(argv)
        errors.append(capsys.readouterr().err)
    assert errors[0] == errors[1]
    assert "unrecognized arguments: --nosuch" in errors[0]


def _walk(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser, str | None]]:
    """Every sub-command at every depth: (path, its parser, the help its parent lists)."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, child in action.choices.items():
                found.append(((*path, name), child, helps.get(name)))
                found += _walk(child, (*path, name))
    return found


def test_every_subcommand_has_a_one_line_help_and_a_description() -> None:
    commands = _walk(cli.build_parser())
    assert len(commands) > 40  # the whole tree, sub-sub-commands included
    for path, parser, help_text in commands:
        name = " ".join(path)
        assert help_text and "\n" not in help_text.strip(), f"{name}: no one-line help"
        assert parser.description, f"{name}: `{name} --help` says nothing of what it does"
