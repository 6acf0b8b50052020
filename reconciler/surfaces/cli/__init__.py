"""The ``tpu-reconciler`` command line: global options (``surfaces._options``, shared with
``tpu-mcp``) and a registry of command modules.

Each command module (``_<group>.py``) exposes ``register(subparsers)`` and keeps its imports
light at module level: heavy libraries (mcp, asyncssh, libtmux, rich) are imported inside the
handler, so ``status`` does not pay for the MCP SDK. A handler takes the parsed namespace and
returns the exit code; it is named ``"module:function"`` so only the chosen one is imported.

A run builds only its own command's sub-parsers: ``_COMMANDS`` says which module registers
each top-level command, and ``build_parser(argv)`` imports and registers just that module when
``argv`` names one (building every module's sub-parsers was a quarter of ``status``, the
command people run in loops). Without a known command (``--help``, no command, a typo, an
unusual option spelling) the whole tree is built, as ``build_parser()`` always does, so help,
errors and completion see every command.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from reconciler import __version__
from reconciler.exitcodes import EX_INTERRUPTED, EX_OK, EX_USAGE
from reconciler.intent import usecases
from reconciler.surfaces._options import global_options

if TYPE_CHECKING:
    import argparse

#: Command modules, in help order. Each is reconciler.surfaces.cli.<name>.
_MODULES = (
    "_reconcile",
    "_intent",
    "_workload",
    "_nodes",
    "_control",
    "_secret",
    "_tmux",
    "_logs",
    "_ops",
    "_history",
    "_quota",
    "_timeline",
    "_emulator",
    "_skill",
)

#: The module registering each top-level command. A command missing here still works (the
#: whole tree is built for it, only slower); tests/unit/test_cli_commands.py keeps it complete.
_COMMANDS: Final[Mapping[str, str]] = {
    **dict.fromkeys(("validate", "plan", "apply", "run", "status", "demo"), "_reconcile"),
    # the verbs made from the use-case declarations (a new one needs no line here)
    **dict.fromkeys((*(c.cli for c in usecases.cli_verbs() if c.cli), "mcp"), "_intent"),
    "workload": "_workload",
    **dict.fromkeys(("ssh", "info", "tui"), "_nodes"),
    "confirm": "_control",
    "secret": "_secret",
    "tmux": "_tmux",
    "logs": "_logs",
    **dict.fromkeys(("events", "doctor", "init", "service", "completion"), "_ops"),
    **dict.fromkeys(("history", "recommend"), "_history"),
    "emulator": "_emulator",
    "quota": "_quota",
    "timeline": "_timeline",
    "skill": "_skill",
}
#: Global options taking a value (as ``-f FILE``, ``-fFILE`` or ``--file=FILE``) and flags.
_VALUED: Final = ("-f", "--file", "--state-dir")
_FLAGS: Final = frozenset(("-v", "-vv", "-vvv", "--verbose", "-q", "--quiet"))


def _translate_once() -> None:
    """argparse passes each of its ~100 strings through ``gettext.gettext``, which searches the
    disk for message catalogues on every call (a miss is not cached): about half the time it
    takes to build this parser. Look the catalogue up once; the translations are the same."""
    import argparse
    import gettext

    catalogue = gettext.translation(gettext.textdomain(), fallback=True)
    argparse._ = catalogue.gettext  # type: ignore[attr-defined]
    argparse.ngettext = catalogue.ngettext  # type: ignore[attr-defined]


def chosen_command(argv: Sequence[str]) -> str | None:
    """The top-level command ``argv`` runs, found by skipping the global options; None when
    there is none or an argument is not spelled in one of the plain ways (argparse decides)."""
    args = iter(argv)
    for arg in args:
        if arg in _VALUED:
            next(args, None)
        elif arg in _FLAGS or arg.startswith(("--file=", "--state-dir=")):
            continue
        elif arg.startswith("-f") and not arg.startswith("--"):
            continue  # -fFILE
        elif arg.startswith("-"):
            return None  # --help, --version, -vq, an abbreviation, --, a mistake
        else:
            return arg
    return None


def _parser_class() -> type[argparse.ArgumentParser]:
    """An ``ArgumentParser`` whose sub-commands, at every depth, take their one-line ``help``
    as their ``description`` when they have none: ``COMMAND --help`` then says what the
    command does instead of starting at "positional arguments"."""
    import argparse

    class Described(argparse._SubParsersAction):  # type: ignore[type-arg]
        def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
            if kwargs.get("description") is None and kwargs.get("help"):
                kwargs["description"] = kwargs["help"]
            return super().add_parser(name, **kwargs)  # type: ignore[no-any-return]

    class Parser(argparse.ArgumentParser):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.register("action", "parsers", Described)

    return Parser


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; for an ``argv`` naming a known command, with only that command's module
    registered (it parses that ``argv`` exactly as the whole tree does)."""
    _translate_once()
    parser = _parser_class()(
        prog="tpu-reconciler",
        description="Hold Cloud TPU capacity declaratively: write desired.yaml, run the controller",
    )
    parser.add_argument("--version", action="version", version=f"tpu-reconciler {__version__}")
    global_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = _COMMANDS.get(chosen_command(argv) or "") if argv is not None else None
    for name in (chosen,) if chosen else _MODULES:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        return EX_USAGE
    handler = args.handler
    module_name, _, func_name = handler.partition(":")
    func = getattr(importlib.import_module(module_name), func_name)
    try:
        return int(func(args))
    except KeyboardInterrupt:
        return EX_INTERRUPTED
    except BrokenPipeError:
        return EX_OK


if __name__ == "__main__":
    sys.exit(main())
