"""``tpu-reconciler completion bash|zsh``: completion scripts made by ``shtab`` from the parser
itself, so a command added anywhere (a declared edit verb included) is completed without a
line here.

Before handing the parser over, every option whose value is a path (``type=Path``: ``--file``,
``--state-dir``, ``--target``...) is marked for file (or, named ``*dir*``, directory)
completion; choices are completed by ``shtab`` from the parser. ``command_paths`` lists every
command path, for the tests and the skill.

May: read the parser, return text. May not: run anything.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from reconciler.exitcodes import EX_OK

SHELLS: Final = ("bash", "zsh")
#: The name ``shtab`` gives the script's entry function (bash: ``_shtab_tpu_reconciler``).
PROG: Final = "tpu-reconciler"


def _parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _parsers(child, (*path, name))


def command_paths(parser: argparse.ArgumentParser) -> list[str]:
    """Every command and sub-command: ``"status"``, ``"tmux close"``, ..."""
    return [" ".join(path) for path, _ in _parsers(parser) if path]


def _mark_paths(parser: argparse.ArgumentParser) -> None:
    import shtab

    for _, p in _parsers(parser):
        for action in p._actions:
            if action.type is Path and action.option_strings:
                wanted = shtab.DIRECTORY if "dir" in action.dest else shtab.FILE
                action.complete = wanted  # type: ignore[attr-defined]


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script for ``shell`` (one of ``SHELLS``)."""
    import shtab

    parser.prog = PROG
    _mark_paths(parser)
    text: str = shtab.complete(parser, shell=shell)
    return text if text.endswith("\n") else text + "\n"


def completion_command(args: argparse.Namespace) -> int:
    from reconciler.surfaces.cli import build_parser

    print(script(build_parser(), args.shell), end="")
    return EX_OK
