"""The ``tpu-reconciler`` command line: global options and a registry of command modules.

Each command module (``_<group>.py``) exposes ``register(subparsers)`` and keeps its imports
light at module level: heavy libraries (mcp, asyncssh, libtmux, rich) are imported inside the
handler, so ``status`` does not pay for the MCP SDK. A handler takes the parsed namespace and
returns the exit code; it is named ``"module:function"`` so only the chosen one is imported.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from reconciler import __version__
from reconciler.exitcodes import EX_INTERRUPTED, EX_OK, EX_USAGE

#: Command modules, in help order. Each is reconciler.surfaces.cli.<name>.
_MODULES = (
    "_reconcile",
    "_intent",
    "_workload",
    "_control",
    "_secret",
    "_tmux",
    "_logs",
    "_ops",
    "_history",
    "_emulator",
)


def _global_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f",
        "--file",
        type=Path,
        default=Path(os.environ.get("TPU_RECONCILER_FILE") or "desired.yaml"),
        help="desired-state file (default: $TPU_RECONCILER_FILE or ./desired.yaml)",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="state directory (default: $TPU_RECONCILER_STATE_DIR or under $XDG_STATE_HOME)",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    parser.add_argument("-q", "--quiet", action="store_true", help="only errors")


def _translate_once() -> None:
    """argparse passes each of its ~100 strings through ``gettext.gettext``, which searches the
    disk for message catalogues on every call (a miss is not cached): about half the time it
    takes to build this parser. Look the catalogue up once; the translations are the same."""
    import gettext

    catalogue = gettext.translation(gettext.textdomain(), fallback=True)
    argparse._ = catalogue.gettext  # type: ignore[attr-defined]
    argparse.ngettext = catalogue.ngettext  # type: ignore[attr-defined]


def build_parser() -> argparse.ArgumentParser:
    _translate_once()
    parser = argparse.ArgumentParser(
        prog="tpu-reconciler",
        description="Hold Cloud TPU capacity declaratively: write desired.yaml, run the controller",
    )
    parser.add_argument("--version", action="version", version=f"tpu-reconciler {__version__}")
    _global_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _MODULES:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EX_USAGE
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
