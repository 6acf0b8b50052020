"""Intent verbs: ``hold``, ``release``, ``race``, ``add-slot``, ``remove-slot``, ``setup``,
``set-poll`` (edits of desired.yaml, through ``reconciler.intent.engine``) and ``mcp`` (the MCP
server on stdio, same as ``tpu-mcp``).

Thin and light: only argparse at import time; handlers import the runtime when called (``mcp``
alone pays for the MCP SDK). Each edit prints what changed (notes and a short diff) and reminds
that the controller, not this command, acts. Exit codes: 0 done, 1 refused, 2 needs
confirmation (or usage), 75 desired.yaml kept changing (try again), 77 another lab member's
slot (``intent/owners``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from reconciler.exitcodes import EX_CONFIRM, EX_OK, EX_REFUSED
from reconciler.model.vocabulary import DEFAULT_WANT, MODES, WANTS
from reconciler.surfaces.cli._say import confirm
from reconciler.surfaces.cli._say import err as _err

if TYPE_CHECKING:
    from reconciler.intent.edits import Edit
    from reconciler.intent.engine import IntentEditor

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
    p = _edit_parser(subparsers, "hold", "want a slot held (want: held)", "hold_command")
    p.add_argument("slot", metavar="SLOT")

    p = _edit_parser(
        subparsers, "release", "release a slot: the controller deletes its TPU", "release_command"
    )
    p.add_argument("slot", metavar="SLOT")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--close-tmux", action="store_true", help="also close its tmux window now")

    p = _edit_parser(
        subparsers, "race", "create or replace a race group of candidate slots", "race_command"
    )
    p.add_argument("group", metavar="GROUP")
    p.add_argument("slots", metavar="SLOT", nargs="+")
    p.add_argument("--count", type=int, required=True, help="winners wanted")
    p.add_argument("--yes", action="store_true", help="confirm dropping or lowering")

    p = _edit_parser(subparsers, "add-slot", "add a slot to desired.yaml", "add_slot_command")
    p.add_argument("--zone", required=True)
    p.add_argument("--accelerator", required=True, help="e.g. v6e-8, v4-32")
    p.add_argument("--mode", choices=MODES, default=None)
    p.add_argument("--name", default=None, help="default: <mode>-<accel>-<zone code>-<index>")
    p.add_argument("--index", type=int, default=None, help="index for the generated name")
    p.add_argument("--want", choices=WANTS, default=DEFAULT_WANT)
    p.add_argument("--slices", type=int, default=1, help="multislice: N slices in one QR")
    max_run_flag(p)
    p.add_argument(
        "--renew",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="flex-start only: queue a new run once each run has ended",
    )

    p = _edit_parser(
        subparsers, "remove-slot", "remove a slot: it becomes unmanaged", "remove_slot_command"
    )
    p.add_argument("slot", metavar="SLOT")
    p.add_argument("--yes", action="store_true", help="confirm when settings.prune is on")

    p = _edit_parser(subparsers, "setup", "set a slot's setup flags", "setup_command")
    p.add_argument("slot", metavar="SLOT")
    for flag in ("bootstrap", "tailscale", "tmux"):
        p.add_argument(f"--{flag}", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument(
        "--at-boot",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the setup scripts in the node's startup-script metadata, run at every boot",
    )
    p.add_argument("--rerun", action="store_true", help="bump the generation: run setup again")

    p = _edit_parser(subparsers, "set-poll", "change the poll intervals", "set_poll_command")
    p.add_argument("--interval", default=None, help="when steady, e.g. 30s, 2m")
    p.add_argument("--fast-interval", default=None, help="while anything moves, e.g. 5s")

    p = subparsers.add_parser("mcp", help="MCP server on stdio (same as tpu-mcp)")
    p.set_defaults(handler=f"{_HERE}:mcp_command")


def max_run_flag(p: argparse.ArgumentParser) -> None:
    """``--max-run-duration`` (``add-slot``, ``init``): a flex-start run's length."""
    p.add_argument(
        "--max-run-duration",
        default=None,
        metavar="DURATION",
        help="mode flex-start (required there): how long the TPU runs, at most 7d, e.g. 6h",
    )


# --- handlers ------------------------------------------------------------------------------------


def _store(args: argparse.Namespace) -> IntentEditor:
    from reconciler.adapters.statedir import StateDir, default_state_dir
    from reconciler.intent.engine import IntentEditor

    file = Path(args.file)
    root = Path(args.state_dir) if args.state_dir is not None else default_state_dir(file)
    return IntentEditor(file, StateDir(root))


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
    if getattr(args, "close_tmux", False):
        return _close_tmux(args, store)
    if isinstance(edit, Release) and not args.quiet and not args.json:
        from reconciler.intent.tmux import stays_open_notes, tmux_may_run

        if tmux_may_run(store):  # else no window stays open: asyncio and libtmux stay unloaded
            import asyncio

            for note in asyncio.run(stays_open_notes(store, args.slot)):
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
    from reconciler.runtime.lock import read_holder

    if read_holder(store.state) is None:
        return (
            "No controller is running, so nothing acts on this yet: start one with "
            "`tpu-reconciler run` (or `tpu-reconciler service install`)."
        )
    return "The controller acts on this at its next pass (see: tpu-reconciler status)."


def _close_tmux(args: argparse.Namespace, store: Any) -> int:
    import asyncio

    from reconciler.errors import ReconcilerError
    from reconciler.intent.tmux import REOPEN_NOTE, close_window

    try:
        closed = asyncio.run(close_window(store, args.slot))
    except ReconcilerError as e:
        _err(f"tmux: {e}")
        return EX_REFUSED
    if not args.quiet and not args.json:
        print(f"closed {', '.join(closed)}" if closed else "no tmux window was open")
        if closed:
            print(f"note: {REOPEN_NOTE}")
    return EX_OK


def hold_command(args: argparse.Namespace) -> int:
    from reconciler.intent.edits import Hold

    return _run(args, Hold(args.slot))


def release_command(args: argparse.Namespace) -> int:
    from reconciler.intent.edits import Release

    return _run(args, Release(args.slot))


def race_command(args: argparse.Namespace) -> int:
    from reconciler.intent.edits_race import Race

    return _run(args, Race(args.group, tuple(args.slots), args.count, exact=True))


def add_slot_command(args: argparse.Namespace) -> int:
    from reconciler.intent.edits import AddSlot

    return _run(
        args,
        AddSlot(
            zone=args.zone,
            accelerator=args.accelerator,
            mode=args.mode,
            name=args.name,
            want=args.want,
            index=args.index,
            slices=args.slices,
            max_run_duration=args.max_run_duration,
            renew=args.renew,
        ),
    )


def remove_slot_command(args: argparse.Namespace) -> int:
    from reconciler.intent.edits import RemoveSlot

    return _run(args, RemoveSlot(args.slot))


def setup_command(args: argparse.Namespace) -> int:
    from reconciler.intent.edits import Setup

    return _run(
        args,
        Setup(
            args.slot,
            bootstrap=args.bootstrap,
            tailscale=args.tailscale,
            tmux=args.tmux,
            rerun=args.rerun,
            at_boot=args.at_boot,
        ),
    )


def set_poll_command(args: argparse.Namespace) -> int:
    from reconciler.intent.edits import SetPoll

    return _run(args, SetPoll(interval=args.interval, fast_interval=args.fast_interval))


def mcp_command(args: argparse.Namespace) -> int:
    from reconciler.surfaces.mcp_server import serve

    return serve(Path(args.file), args.state_dir, verbose=args.verbose)
