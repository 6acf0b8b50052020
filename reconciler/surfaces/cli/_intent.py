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
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from reconciler.exitcodes import EX_CONFIRM, EX_OK, EX_REFUSED, EX_USAGE
from reconciler.intent import usecases
from reconciler.surfaces.cli._say import confirm
from reconciler.surfaces.cli._say import err as _err

if TYPE_CHECKING:
    from reconciler.intent.edits import Edit
    from reconciler.intent.engine import IntentEditor
    from reconciler.intent.usecases import Arg, UseCase

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
    required flag), a tuple one or more words, a mapping ``NAME=VALUE`` words given once each,
    a bool a switch (``--x/--no-x`` when it may be left as it is), an int or a float typed;
    ``--yes`` where the declaration needs a confirmation. An action that is no edit takes its
    declared ``args``, each an optional string."""
    for name, hint, default in _params(case):
        arg = case.arg(name)
        required = default is _MISSING
        kind = _kind(hint)
        kw: dict[str, Any] = {"help": arg.help}
        if choices := _choices(arg):
            kw["choices"] = choices
        if arg.metavar:
            kw["metavar"] = arg.metavar
        if kind is tuple:
            kw["nargs"] = "+"
        elif kind is Mapping:
            kw["action"] = "append"
        elif hint is bool:
            kw = {"help": arg.help, "action": "store_true"}
        elif kind is bool:
            kw |= {"action": argparse.BooleanOptionalAction, "default": default}
        elif kind in (int, float):
            kw["type"] = kind
        if required and not arg.option:
            p.add_argument(name, **kw)
            continue
        if arg.positional:
            p.add_argument(name, nargs="?", default=default, **kw)
            continue
        if required:
            kw["required"] = True
        elif "action" not in kw or kw["action"] is argparse.BooleanOptionalAction:
            kw["default"] = default
        flag = "--" + name.replace("_", "-")
        if arg.words is None:
            p.add_argument(flag, dest=name, **kw)
            continue
        either = p.add_mutually_exclusive_group()  # --command STR | --argv WORD...
        either.add_argument(flag, dest=name, **kw)
        words = arg.words.upper()
        either.add_argument(
            f"--{arg.words}", dest=name, nargs="+", default=None, metavar=words, help=arg.words_help
        )
    if case.confirm:
        p.add_argument("--yes", action="store_true", help=case.confirm)


_MISSING: Final = object()


def _params(case: UseCase) -> list[tuple[str, Any, Any]]:
    """(name, type hint, default or ``_MISSING``) of each argument ``flags_of`` makes."""
    if case.edit is None:
        return [(arg.field, str | None, None) for arg in case.args]
    import dataclasses
    import typing

    from reconciler.intent import catalog

    hints = typing.get_type_hints(catalog.edit_of(case))
    params: list[tuple[str, Any, Any]] = []
    for f in catalog.fields_of(case):
        given = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        params.append((f.name, hints[f.name], f.default if given else _MISSING))
    return params


def _kind(hint: Any) -> Any:
    """What an argument of type ``hint`` is taken as: ``tuple`` (words), ``Mapping``
    (NAME=VALUE words), ``bool``, ``int``, ``float`` or None (a string)."""
    import types
    import typing

    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    members = [a for a in typing.get_args(hint) if a is not type(None)] if union else [hint]
    origins = {typing.get_origin(m) for m in members}
    if tuple in origins and not union:
        return tuple
    if Mapping in origins:
        return Mapping
    for kind in (bool, int):
        if kind in members:
            return kind
    return float if members == [float] else None


def _choices(arg: Arg) -> tuple[str, ...]:
    """``arg``'s choices; a vocabulary's are read through ``intent.catalog`` (only then loaded)."""
    if arg.vocabulary is None:
        return arg.choices
    from reconciler.intent import catalog

    return catalog.choices_of(arg)


def declared_edit(args: argparse.Namespace) -> Edit:
    """The edit of the declared verb ``args`` ran (``usecase``), from the flags ``flags_of``
    made: each mapping field's ``NAME=VALUE`` words made a mapping (ValueError names the flag
    of a malformed one)."""
    from reconciler.intent import catalog

    case = usecases.by_name(args.usecase)
    values = vars(args).copy()
    for name, hint, _ in _params(case):
        if _kind(hint) is Mapping and values.get(name) is not None:
            values[name] = _pairs(values[name], "--" + name.replace("_", "-"))
    return catalog.make(case, values)


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag} takes NAME=VALUE, got {item!r}")
        out[key] = value
    return out


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
    try:
        edit = declared_edit(args)
    except ValueError as e:  # a malformed NAME=VALUE
        _err(str(e))
        return EX_USAGE
    return _run(args, edit)


def mcp_command(args: argparse.Namespace) -> int:
    from reconciler.surfaces.mcp_server import serve

    return serve(Path(args.file), args.state_dir, verbose=args.verbose)
