"""The assistant skill names only what exists: the tools the real MCP server lists (through
the MCP SDK's client) and the commands the real CLI has (through its ``--help``), and
``skill install`` / ``skill show`` write and print the same text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reconciler.surfaces.cli import _skill_text as skill
from tests.integration.test_mcp_server import session
from tests.support.cli import run_cli

pytestmark = pytest.mark.integration

#: Backticked snake_case words of SKILL.md that are neither tools nor tool parameters.
FIELDS = {"schema_version", "secret_env"}


@pytest.fixture
def installed(tmp_path: Path) -> dict[str, str]:
    done = run_cli("skill", "install", "--target", str(tmp_path / "skills"))
    assert done.returncode == 0, done.stderr
    where = tmp_path / "skills" / "tpu-reconciler"
    assert done.stdout.split() == [str(where / "SKILL.md"), str(where / "PROTOCOL.md")]
    shown = run_cli("skill", "show")
    assert shown.returncode == 0, shown.stderr
    files = {p.name: p.read_text() for p in sorted(where.iterdir())}
    assert shown.stdout == files["SKILL.md"] + "\n" + files["PROTOCOL.md"]
    return files


async def test_the_skill_names_exactly_the_tools_the_server_lists(
    installed: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "desired.yaml").write_text("project: my-proj-123\nslots: []\n")
    async with session(tmp_path) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
    text = installed["SKILL.md"]
    assert text.startswith("---\nname: tpu-reconciler\ndescription: ")
    tabled = set(re.findall(r"^\| `([a-z_]+)` \|", text, re.MULTILINE))
    assert tabled == set(tools)
    params = {p for t in tools.values() for p in (t.input_schema or {}).get("properties", {})}
    named = set(re.findall(r"`([a-z]+(?:_[a-z]+)+)", text))
    assert named - set(tools) - params - FIELDS == set()
    row = re.compile(r"^\| `([a-z_]+)` \| (?:read|edit|destructive) \|", re.MULTILINE)
    protocol = set(row.findall(installed["PROTOCOL.md"]))
    assert protocol == set(tools)
    for name, tool in tools.items():  # read-only as the server says: safe to call unasked
        read_only = bool(tool.annotations and tool.annotations.read_only_hint)
        assert (f"`{name}` | read |" in installed["PROTOCOL.md"]) == read_only, name


def test_every_command_the_skill_names_is_in_the_cli(installed: dict[str, str]) -> None:
    named = set()
    for text in installed.values():
        named |= set(re.findall(r"`tpu-reconciler ([a-z][a-z-]*(?: [a-z][a-z-]*)?)", text))
    assert set(skill.JSON_COMMANDS) | set(skill.NEVER_COMMANDS) <= named
    helps = {"": run_cli("--help")}  # the CLI's own --help: top level, then each group
    for group in sorted({c.split()[0] for c in named if " " in c}):
        helps[group] = run_cli(group, "--help")
    for command in named:
        *group, leaf = command.split()
        helped = helps["".join(group)]
        assert helped.returncode == 0, helped.stderr
        assert re.search(rf"^\s+{re.escape(leaf)}\s", helped.stdout, re.MULTILINE), command
    # The options of each command, as the CLI's completion script (shtab's) lists them.
    script = run_cli("completion", "bash").stdout
    options = dict(
        re.findall(r"^_shtab_tpu_reconciler_(\w+)_option_strings=\(([^)]*)\)$", script, re.M)
    )
    for command in skill.JSON_COMMANDS:
        key = re.sub(r"[ -]", "_", command)
        assert "--json" in options[key].split(), command


def test_stale_guidance_is_refused() -> None:
    tools, commands = skill.server_tools(), skill.cli_commands()
    assert skill.stale(tools, commands) == []
    other = skill.Tool("plan_next", "", (), True, False)
    renamed = [t if t.name != "plan" else other for t in tools]
    assert skill.stale(renamed, commands) == [
        "guidance for unknown tool plan",
        "no guidance for tool plan_next",
    ]
    bare = skill.Command("status", "", frozenset())
    no_json = [c if c.name != "status" else bare for c in commands]
    assert skill.stale(tools, no_json) == ["command status has no --json"]
