"""Intent verbs: every edit use case declared with ``flags`` (``reconciler.intent.usecases``:
``hold``, ``release``, ``pause``, ``race``, ``add-slot``, ``remove-slot``, ``setup``,
``set-poll``; edits of desired.yaml, through ``reconciler.intent.engine``) and ``mcp`` (the MCP
server on stdio, same as ``tpu-mcp``). Each verb's arguments are made from its edit class by
``flags_of`` and one handler, ``edit_command``, makes the edit from them: a new declared edit
is a new verb with no line here.

Thin and light: only argparse and the declarations at import time; handlers import the runtime
when called (``mcp`` alone pays for the MCP SDK). Each edit prints what changed (notes and a
short diff) and reminds that the controller, not this command, acts. Exit codes: 0 done,
1 refused, 2 needs confirmation (or usage), 75 desired.yaml kept changing (try again), 77
another lab member's slot (``intent/owners``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from reconciler.exitcodes import EX_CONFIRM, EX_OK, EX_REFUSED
from reconciler.intent import usecases
from reconciler.surfaces.cli._say import confirm
from reconciler.surfaces.cli._say import err as _err

if TYPE_CHECKING:
    from reconciler.intent.edits import Edit
    from reconciler.intent.engine import IntentEditor
    from reconciler.intent.usecases import UseCase

_HERE: Final = "reconciler.surfaces.cli._intent"


def _edit_parser(sub: Any, name: str, help: str, func: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help)
    p.add_argument(
        "--operation-id",
        default=None,
        help="idempotency key: a retry with the same id and edit does nothing twice",
    )
    p.add_argument("--json", action="store_true", help="print the result document (JSON)")
    p.set_defaults(handler=f"{_HERE}:{func}")
    return p


def register(subparsers: Any) -> None:
    for case in usecases.cli_verbs():
        assert case.cli is not None
        p = _edit_parser(subparsers, case.cli, case.summary, "edit_command")
        p.set_defaults(usecase=case.name)
        flags_of(p, case)
        if case.name == "release":
            p.add_argument(
                "--close-tmux", action="store_true", help="also close its tmux window now"
            )

    p = subparsers.add_parser("mcp", help="MCP server on stdio (same as tpu-mcp)")
    p.set_defaults(handler=f"{_HERE}:mcp_command")


def flags_of(p: argparse.ArgumentParser, case: UseCase) -> None:
    """The verb's arguments, made from its edit class's fields (``intent.catalog.fields_of``)
    as the declaration's ``args`` spell them: a required field is positional (``option``: a
    required flag), a tuple one or more words, a bool a switch (``--x/--no-x`` when it may be
    left as it is), an int typed; ``--yes`` where the declaration needs a confirmation."""
    import dataclasses
    import typing

    from reconciler.intent import catalog

    hints = typing.get_type_hints(catalog.edit_of(case))
    for f in catalog.fields_of(case):
        arg, hint = case.arg(f.name), hints[f.name]
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        kw: dict[str, Any] = {"help": arg.help}
        if choices := catalog.choices_of(arg):
            kw["choices"] = choices
        if arg.metavar:
            kw["metavar"] = arg.metavar
        if typing.get_origin(hint) is tuple:
            kw["nargs"] = "+"
        elif hint is bool:
            kw = {"help": arg.help, "action": "store_true"}
        elif bool in typing.get_args(hint):
            kw |= {"action": argparse.BooleanOptionalAction, "default": f.default}
        elif hint is int or int in typing.get_args(hint):
            kw["type"] = int
        if required and not arg.option:
            p.add_argument(f.name, **kw)
            continue
        if required:
            kw["required"] = True
        elif "action" not in kw or kw["action"] is argparse.BooleanOptionalAction:
            kw["default"] = f.default
        p.add_argument("--" + f.name.replace("_", "-"), dest=f.name, **kw)
    if case.confirm:
        p.add_argument("--yes", action="store_true", help=case.confirm)


def max_run_flag(p: argparse.ArgumentParser) -> None:
    """``--max-run-duration`` (``init``, ``recommend``) as ``add-slot`` takes it."""
    arg = usecases.by_name("add_slot").arg("max_run_duration")
    p.add_argument("--max-run-duration", default=None, metavar=arg.metavar, help=arg.help)


# --- handlers ------------------------------------------------------------------------------------


def _store(args: argparse.Namespace) -> IntentEditor:
    from reconciler.intent.store import open_store

    return open_store(Path(args.file), args.state_dir)


def _run(args: argparse.Namespace, edit: Edit) -> int:
    """Apply ``edit`` (asking first when it needs confirmation), print what changed."""
    from reconciler.surfaces.cli._reconcile import one_shot

    with one_shot():
        return _apply(args, edit)


def _apply(args: argparse.Namespace, edit: Edit) -> int:
    from reconciler.errors import NeedsConfirmation, ReconcilerError
    from reconciler.intent.edits import Release

    store = _store(args)
    confirmed = bool(getattr(args, "yes", False))
    try:
        try:
            result = store.apply(
                edit, source="cli", operation_id=args.operation_id, confirmed=confirmed
            )
        except NeedsConfirmation as e:
            question = f"{e.message.split(';')[0]}. Go ahead?"
            if not confirm(
                question, not_a_terminal=f"{e} (stdin is not a terminal, so nobody can confirm)"
            ):
                return EX_CONFIRM
            result = store.apply(edit, source="cli", operation_id=args.operation_id, confirmed=True)
    except ReconcilerError as e:  # EditConflict: 75, try again; any other refusal: 1
        _err(str(e))
        return e.exit_code
    _print(args, result, store)
    if isinstance(edit, Release) and getattr(args, "close_tmux", False):
        return _close_tmux(args, store, edit.name)
    if isinstance(edit, Release) and not args.quiet and not args.json:
        from reconciler.intent.tmux import stays_open_notes, tmux_may_run

        if tmux_may_run(store):  # else no window stays open: asyncio and libtmux stay unloaded
            import asyncio

            for note in asyncio.run(stays_open_notes(store, edit.name)):
                print(f"note: {note}")
    return EX_OK


def _print(args: argparse.Namespace, result: Any, store: Any) -> None:
    if args.json:
        import json

        doc = {"schema_version": "tpu-reconciler.intent.v1", **result.to_dict()}
        print(json.dumps(doc, indent=2))
        return
    if args.quiet:
        return
    for note in result.notes:
        print(note)
    if result.status == "exists":
        print(f"operation {result.operation_id} was already done; nothing changed now")
    elif result.status == "unchanged":
        print(f"{args.file} already says so; nothing changed")
    else:
        lines = result.diff.splitlines()[2:]  # drop the ---/+++ header
        print("\n".join(lines[:40] + (["..."] if len(lines) > 40 else [])))
        print(_next_step(store))


def _next_step(store: Any) -> str:
    """Who acts on the edit: the running controller, or nobody until one is started."""
    from reconciler.intent.store import controller_running

    if not controller_running(store):
        return (
            "No controller is running, so nothing acts on this yet: start one with "
            "`tpu-reconciler run` (or `tpu-reconciler service install`)."
        )
    return "The controller acts on this at its next pass (see: tpu-reconciler status)."


def _close_tmux(args: argparse.Namespace, store: Any, name: str) -> int:
    import asyncio

    from reconciler.errors import ReconcilerError
    from reconciler.intent.tmux import REOPEN_NOTE, close_window

    try:
        closed = asyncio.run(close_window(store, name))
    except ReconcilerError as e:
        _err(f"tmux: {e}")
        return EX_REFUSED
    if not args.quiet and not args.json:
        print(f"closed {', '.join(closed)}" if closed else "no tmux window was open")
        if closed:
            print(f"note: {REOPEN_NOTE}")
    return EX_OK


def edit_command(args: argparse.Namespace) -> int:
    """Every verb made from a declaration: its edit, from the flags ``flags_of`` made."""
    from reconciler.intent import catalog

    case = usecases.by_name(args.usecase)
    return _run(args, catalog.make(case, vars(args)))


def mcp_command(args: argparse.Namespace) -> int:
    from reconciler.surfaces.mcp_server import serve

    return serve(Path(args.file), args.state_dir, verbose=args.verbose)
