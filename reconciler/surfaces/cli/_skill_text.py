"""The assistant skill's text: ``SKILL.md`` (when to use which MCP tool and JSON command, the
operation-id and confirm rules, what an assistant must never do) and ``PROTOCOL.md`` (every tool
with its parameters and hints, every command with its flags).

The guidance is each use case's (``reconciler.intent.usecases``: ``guidance``, ``summary``),
keyed by its MCP tool and its CLI command; the rules and the never-list are written here; the
names, parameters and flags are read from the real MCP server
(``surfaces.mcp_server.build_server``, its tools listed as a client would see them) and the
real CLI parser (``surfaces.cli.build_parser``) each time the skill is made. ``skill_files``
refuses to make a skill whose guidance names a tool or command that does not exist, or leaves
one out (tests/integration/test_skill.py checks the same through the MCP SDK's client and the
CLI's ``--help``), so it cannot go stale.

May: build text. May not: print, write files, or start a server (building one lists its tools).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from reconciler import __version__, exitcodes
from reconciler.intent import usecases

SKILL_NAME: Final = "tpu-reconciler"


def _tools() -> dict[str, str]:
    """Every MCP tool: when an assistant should use it (each use case's ``guidance``; a
    deprecated alias points at its canonical tool)."""
    tools: dict[str, str] = {}
    for case in usecases.ALL:
        if case.mcp is not None:
            tools[case.mcp] = case.guidance or case.summary[0].upper() + case.summary[1:] + "."
            for alias in case.aliases:
                tools[alias] = f"Deprecated alias of `{case.mcp}` (kept for one release): use that."
    return tools


def _json_commands() -> dict[str, str]:
    """Commands with ``--json`` an assistant may run (when no MCP server is connected), and
    when: every declared use case whose CLI command prints JSON, and ``secret list``."""
    commands: dict[str, str] = {}
    for case in usecases.ALL:
        if case.cli is None or not case.json:
            continue
        tool = f" (MCP: {case.mcp})" if case.mcp and case.mcp != case.name else ""
        yes = " (needs --yes after the user's yes)" if case.kind == "destructive" else ""
        what = f"Edit: {case.summary}" if case.edit else case.summary[0].upper() + case.summary[1:]
        commands[case.cli] = f"{what}{tool}{yes}."
    commands["secret list"] = "Which secret names exist (never their values)."
    return commands


#: Every MCP tool: when an assistant should use it. Must name exactly the server's tools.
TOOLS: Final[Mapping[str, str]] = _tools()
#: Commands with ``--json`` an assistant may run (when no MCP server is connected), and when.
JSON_COMMANDS: Final[Mapping[str, str]] = _json_commands()

#: Commands an assistant must never run on its own initiative, and why.
NEVER_COMMANDS: Final[Mapping[str, str]] = {
    "apply": "acts on the cloud at once; the running controller is the only thing that acts",
    "run": "starts a controller; one already runs (or the user starts it)",
    "secret set": "writes a secret: secrets are the user's to type, never an assistant's",
    "secret delete": "deletes a secret",
    "service install": "installs a systemd unit",
    "service uninstall": "removes the systemd unit",
}

_NEVER: Final = """\
- **Never act on the cloud.** No `gcloud compute tpus ...` create/delete, no Cloud TPU API
  calls, no `tpu-reconciler apply`. Say what you want in desired.yaml through a tool or an
  edit command; the controller is the only thing that creates or deletes.
- **Never touch secrets.** Do not read, print, set or delete them (`secret set`, `secret
  delete`, the secrets file, tokens, SSH keys); a workload names secrets in `secret_env`,
  never their values, and an `env` value is never a secret.
- **Never pass `confirm=true` (or `--yes`) on your own.** Show the user what will be
  released, dropped, restarted or deleted, and confirm only after they said yes to exactly
  that.
- **Never edit desired.yaml by hand** when a tool or command does the edit: those keep its
  comments, validate the whole file and record the operation id.
"""

_RULES: Final = """\
## Operation ids

Give every edit (tool or command) an `operation_id` you make up, unique per intended change
(e.g. `hold-alpha-20260301T1200`; 1-128 of `[A-Za-z0-9._:-]`). Retrying with the same id after
a lost answer is safe: it returns the first result with `status: "exists"` and changes
nothing. The same id for a different edit is refused. Without one, each call is a new edit.

## Confirm rules

These need `confirm=true` (commands: `--yes`), given only after the user agreed: `release`,
`tmux_close` and `confirm` always; `race` when it drops a candidate or lowers
`count`; `remove_slot` when `settings.prune` is on; `workload_restart`, `workload_stop` and a
`workload_set` that changes what runs, while the workload runs. Refused without it, the tool
says what it would do: show that to the user.

## Reading results

Tool results carry `schema_version: "tpu-reconciler.mcp.v1"`; an edit returns `status`
(`changed` / `unchanged` / `exists`), `operation_id`, `notes` and a `diff`. Edits change the
file only: the controller acts on its next pass; pass `wait_seconds` to wait for the outcome
(`wait.reached`). A `file:line:col: message` error means the file is invalid: show it.
"""


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    params: tuple[tuple[str, bool], ...]  # (name, required)
    read_only: bool
    destructive: bool


@dataclass(frozen=True, slots=True)
class Command:
    name: str  # "workload restart"
    help: str
    options: frozenset[str]


def server_tools() -> list[Tool]:
    """The MCP server's tools, as its ``tools/list`` answers (no file is read to list them)."""
    from reconciler.intent.store import open_store
    from reconciler.surfaces.mcp_server import build_server

    nowhere = Path("/nonexistent/tpu-reconciler")
    server = build_server(open_store(nowhere / "desired.yaml", nowhere / "state"))
    tools = []
    for t in asyncio.run(server.list_tools()):
        schema: dict[str, Any] = t.input_schema or {}
        required = set(schema.get("required", ()))
        params = tuple((p, p in required) for p in schema.get("properties", {}))
        a = t.annotations
        tools.append(
            Tool(
                t.name,
                (t.description or "").strip(),
                params,
                bool(a and a.read_only_hint),
                bool(a and a.destructive_hint),
            )
        )
    return tools


def cli_commands() -> list[Command]:
    """Every command and sub-command of the CLI, from its parser."""
    from reconciler.surfaces.cli import build_parser

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[Command]:
        for action in parser._actions:
            if not isinstance(action, argparse._SubParsersAction):
                continue
            helps = {c.dest: c.help or "" for c in action._choices_actions}
            for name, sub in action.choices.items():
                options = frozenset(o for a in sub._actions for o in a.option_strings)
                yield Command(" ".join((*path, name)), helps.get(name, ""), options)
                yield from walk(sub, (*path, name))

    return list(walk(build_parser(), ()))


def stale(tools: list[Tool], commands: list[Command]) -> list[str]:
    """What the hand-written guidance gets wrong about the live server and CLI."""
    problems = []
    names = {t.name for t in tools}
    problems += [f"guidance for unknown tool {n}" for n in sorted(TOOLS.keys() - names)]
    problems += [f"no guidance for tool {n}" for n in sorted(names - TOOLS.keys())]
    by_name = {c.name: c for c in commands}
    for name in JSON_COMMANDS:
        if name not in by_name:
            problems.append(f"guidance for unknown command {name}")
        elif "--json" not in by_name[name].options:
            problems.append(f"command {name} has no --json")
    problems += [f"unknown command {n}" for n in NEVER_COMMANDS if n not in by_name]
    return problems


def skill_md(tools: list[Tool]) -> str:
    reads = [t.name for t in tools if t.read_only]
    lines = [
        "---",
        f"name: {SKILL_NAME}",
        "description: Hold Cloud TPU capacity with tpu-reconciler. Use when the user asks "
        "about their TPU slots, races, workloads, capacity waits or where to queue: read "
        "through its MCP tools or JSON commands, change desired.yaml through its edits, and "
        "never act on the cloud yourself.",
        "---",
        "",
        "# tpu-reconciler",
        "",
        "The user's `desired.yaml` says which Cloud TPU slots to hold; a controller makes the "
        "cloud match and keeps it matching. You read what the controller saw and edit what is "
        "wanted; it does the rest on its next pass. Prefer the MCP tools (server `tpu-mcp`); "
        "without them, run `tpu-reconciler COMMAND --json`.",
        "",
        "## Never",
        "",
        _NEVER,
        "## When to use which tool",
        "",
        f"Read-only, safe at any time: {', '.join(f'`{n}`' for n in reads)}.",
        "",
        "| tool | use it when |",
        "| --- | --- |",
        *(f"| `{t.name}` | {TOOLS[t.name]} |" for t in tools),
        "",
        "## JSON commands",
        "",
        "| command | use it when |",
        "| --- | --- |",
        *(f"| `tpu-reconciler {c} --json` | {why} |" for c, why in JSON_COMMANDS.items()),
        "",
        "Not yours to run: "
        + "; ".join(f"`{c}` ({why})" for c, why in NEVER_COMMANDS.items())
        + ".",
        "",
        _RULES,
        "Every tool's parameters and every command's flags: [PROTOCOL.md](PROTOCOL.md).",
        "",
    ]
    return "\n".join(lines)


def protocol_md(tools: list[Tool], commands: list[Command]) -> str:
    def params(t: Tool) -> str:
        return ", ".join(p if required else f"{p}?" for p, required in t.params)

    def kind(t: Tool) -> str:
        return "read" if t.read_only else "destructive" if t.destructive else "edit"

    codes = sorted(
        (v, k) for k, v in vars(exitcodes).items() if k.startswith("EX_") and isinstance(v, int)
    )
    lines = [
        f"# tpu-reconciler protocol (version {__version__})",
        "",
        "Generated by `tpu-reconciler skill install` from the MCP server and the CLI it ships "
        "with; `skill show` prints the same.",
        "",
        "## MCP tools",
        "",
        "| tool | kind | parameters (`?` optional) | what it does |",
        "| --- | --- | --- | --- |",
        *(
            f"| `{t.name}` | {kind(t)} | {params(t)} | {_first_line(t.description)} |"
            for t in tools
        ),
        "",
        "## Commands",
        "",
        "`--json` prints one JSON document; `--operation-id` makes an edit safe to retry; "
        "`--yes` confirms (only after the user's yes).",
        "",
        "| command | flags | what it does |",
        "| --- | --- | --- |",
        *(f"| `tpu-reconciler {c.name}` | {_flags(c)} | {c.help} |" for c in commands if c.help),
        "",
        "## Exit codes",
        "",
        *(f"- {v}: `{k}`" for v, k in codes),
        "",
    ]
    return "\n".join(lines)


def _first_line(text: str) -> str:
    return " ".join(text.split("\n\n", 1)[0].split()).replace("|", "\\|")


def _flags(c: Command) -> str:
    shown = ("--json", "--operation-id", "--yes")
    return " ".join(f"`{o}`" for o in shown if o in c.options)


def skill_files() -> dict[str, str]:
    """File name -> text of the skill, made from the live server and CLI; ValueError when the
    guidance has gone stale."""
    tools, commands = server_tools(), cli_commands()
    problems = stale(tools, commands)
    if problems:
        raise ValueError("the skill's guidance is stale: " + "; ".join(problems))
    return {"SKILL.md": skill_md(tools), "PROTOCOL.md": protocol_md(tools, commands)}
