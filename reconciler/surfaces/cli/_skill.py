"""``tpu-reconciler skill install [--target DIR]`` and ``skill show``: the bundled assistant
skill, a ``SKILL.md`` and its ``PROTOCOL.md`` (``cli/_skill_text``), made from the MCP server and
the CLI this version ships, so the tool and command names in it are the real ones.

``install`` writes ``DIR/tpu-reconciler/`` (DIR: ``--target``, else ``~/.claude/skills``, where
assistants look for personal skills), replacing the files of an earlier install; ``show``
prints both files.

May: write the two skill files, print. May not: read or edit desired.yaml or the state dir, or
follow a symbolic link below DIR (``intent/skill_install.install_skill``: one planted there by
another user is refused, exit 77).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Final

from reconciler.exitcodes import EX_NOPERM, EX_OK, EX_REFUSED
from reconciler.surfaces.cli._say import err

_HERE: Final = "reconciler.surfaces.cli._skill"


def default_target() -> Path:
    return Path(os.path.expanduser("~")) / ".claude" / "skills"


def register(subparsers: Any) -> None:
    actions = subparsers.add_parser(
        "skill", help="install or show the assistant skill (MCP tools, JSON commands, rules)"
    ).add_subparsers(dest="skill_action", metavar="ACTION", required=True)
    install = actions.add_parser(
        "install",
        help="write SKILL.md and PROTOCOL.md into DIR/tpu-reconciler/",
        description="Write the assistant skill (SKILL.md, PROTOCOL.md) into "
        "DIR/tpu-reconciler/, replacing an earlier install. DIR: --target, else "
        "~/.claude/skills.",
    )
    install.add_argument("--target", metavar="DIR", type=Path, help="skills directory")
    install.set_defaults(handler=f"{_HERE}:install_command")
    actions.add_parser("show", help="print the skill (SKILL.md, then PROTOCOL.md)").set_defaults(
        handler=f"{_HERE}:show_command"
    )


def _files() -> dict[str, str] | None:
    from reconciler.surfaces.cli._skill_text import skill_files

    try:
        return skill_files()
    except ValueError as e:  # a bug of this version: the guidance names what is not there
        err(str(e))
        return None


def install_command(args: argparse.Namespace) -> int:
    from reconciler.intent.skill_install import install_skill
    from reconciler.surfaces.cli._skill_text import SKILL_NAME

    files = _files()
    if files is None:
        return EX_REFUSED
    target = args.target if args.target is not None else default_target()
    where = target / SKILL_NAME
    try:
        install_skill(target, SKILL_NAME, files)
    except OSError as e:
        err(f"cannot write the skill to {where}: {e.strerror or e}")
        return EX_NOPERM if isinstance(e, PermissionError) else EX_REFUSED
    for name in files:
        print(where / name)
    return EX_OK


def show_command(args: argparse.Namespace) -> int:
    files = _files()
    if files is None:
        return EX_REFUSED
    print("\n".join(files.values()), end="")
    return EX_OK
