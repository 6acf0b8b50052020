"""Node verbs: ``ssh SLOT [--worker N] [-- COMMAND...]``, ``info SLOT [--json]`` and ``tui``.

``ssh`` execs OpenSSH with exactly the argv of the slot's tmux window
(``adapters.openssh.ssh_argv``): the node instance's pinned known_hosts entry, the resolved
user (``settings.ssh_user``, else the cached OS Login user, else one gcloud lookup of a few
seconds that is cached — unless a recent lookup failed, ``intent.ssh_reach.resolve_user``),
the key, agent forwarding, and the ``ProxyCommand`` of the slot's ``ssh_proxy``. The address
and instance come from the controller's snapshot; nothing calls the cloud API, but for IAP's
worker VM names when the controller has kept none (one guest-attributes read,
``intent.ssh_reach.vm_names``). An unknown slot is refused with "did you mean"; an emulated
node's address (a documentation range) is ``NoMachine`` at once (exit ``EX_UNAVAILABLE``), and
so is a failed OS Login lookup (naming ``settings.ssh_user``). ``--print`` never looks the user
up for an emulated node: it prints the command and says on stderr that no machine answers
there.

``info`` prints one slot's facts (IPs per worker, create time, last error, setup, the SSH
command); ``--json`` prints the ``slot_info`` view
(``tpu-reconciler.mcp.v1``, docs/json.md). ``tui`` starts the terminal UI (Textual is imported
only then).

May: read the state directory and desired.yaml, exec ssh, print. May not: edit anything.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Final

from reconciler.exitcodes import EX_OK, EX_REFUSED, EX_UNAVAILABLE, EX_USAGE
from reconciler.surfaces.cli._say import err as _err
from reconciler.surfaces.cli._say import note as _note

_HERE: Final = "reconciler.surfaces.cli._nodes"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "ssh",
        help="open an SSH session to a slot's worker (pinned host key, agent forwarding)",
        description="Exec OpenSSH to a worker of SLOT, as its tmux window does. Anything "
        "after -- is the remote command.",
    )
    p.add_argument("slot", metavar="SLOT")
    p.add_argument("--worker", type=int, default=0, help="worker index (default 0)")
    p.add_argument("remote", metavar="COMMAND", nargs=argparse.REMAINDER, help="after --")
    p.add_argument("--print", action="store_true", help="print the command instead of running")
    p.set_defaults(handler=f"{_HERE}:ssh_command")

    p = subparsers.add_parser("info", help="one slot: IPs per worker, create time, errors, SSH")
    p.add_argument("slot", metavar="SLOT")
    p.add_argument("--json", action="store_true", help="print the slot_info document (JSON)")
    p.set_defaults(handler=f"{_HERE}:info_command")

    p = subparsers.add_parser(
        "tui",
        help="the terminal UI: a live view, one key per edit",
        description="A live view of the controller's snapshot; every key that changes "
        "something edits desired.yaml through the intent engine. ? lists the keys.",
    )
    theme = os.environ.get("TPU_RECONCILER_TUI_THEME", "dark")
    p.add_argument(
        "--theme",
        choices=("dark", "light"),
        default=theme if theme in ("dark", "light") else "dark",
        help="colours (default: $TPU_RECONCILER_TUI_THEME or dark)",
    )
    p.add_argument(
        "--owner", metavar="USER", default=None, help="start filtered to the slots USER holds"
    )
    p.set_defaults(handler=f"{_HERE}:tui_command")


def _editor(args: argparse.Namespace) -> Any:
    from reconciler.intent.engine import IntentEditor
    from reconciler.surfaces.cli._reconcile import state_dir

    return IntentEditor(args.file, state_dir(args))


def info_command(args: argparse.Namespace) -> int:
    from reconciler.errors import ReconcilerError
    from reconciler.intent import views

    try:
        doc = views.slot_info(_editor(args), args.slot)
    except ReconcilerError as e:
        _err(str(e))
        return EX_REFUSED
    print(json.dumps(doc, indent=2) if args.json else views.format_slot_info(doc))
    return 0


def _unknown_slot(editor: Any, slot: str) -> str | None:
    """``unknown slot 'X' ... (did you mean ...)`` when neither the file nor the snapshot has
    it; None otherwise (also when neither can be read: the view says why)."""
    from reconciler.errors import ReconcilerError
    from reconciler.intent import views
    from reconciler.surfaces.cli._logs import unknown_slot

    try:
        snapshot = views.read_snapshot(editor)
    except ReconcilerError:
        snapshot = None
    try:
        desired = editor.parse(editor.read().decode("utf-8", "replace"))
    except (ReconcilerError, OSError):
        desired = None
    return unknown_slot(desired, snapshot, slot)


def _split_remote(args: argparse.Namespace) -> list[str]:
    """The remote command. argparse hands every word after SLOT to the remainder (dropping a
    first ``--``), so ``--worker N`` / ``--print`` given after SLOT are taken from its front
    here, up to a ``--`` or the first other word."""
    rest = list(args.remote)
    while rest:
        word = rest[0]
        if word == "--":
            return rest[1:]
        if word == "--print":
            args.print = True
        elif word == "--worker" and len(rest) > 1:
            args.worker = _worker(rest.pop(1))
        elif word.startswith("--worker="):
            args.worker = _worker(word.partition("=")[2])
        else:
            return rest
        rest.pop(0)
    return rest


def _worker(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"--worker: {text!r} is not a number") from None


def ssh_command(args: argparse.Namespace) -> int:
    import shlex

    from reconciler.errors import NoMachine, ReconcilerError, SetupFailed
    from reconciler.intent import views
    from reconciler.intent.ssh_reach import check_reachable, resolve_user, vm_names

    try:
        remote = _split_remote(args)
    except ValueError as e:
        _err(str(e))
        return EX_USAGE
    if args.worker < 0:
        _err("--worker must be 0 or more")
        return EX_USAGE
    editor = _editor(args)
    unknown = _unknown_slot(editor, args.slot)
    if unknown:
        _err(unknown)
        return EX_REFUSED
    try:
        names = vm_names(editor, args.slot)
    except SetupFailed as e:
        _err(str(e))
        return EX_UNAVAILABLE
    except ReconcilerError:
        names = None  # the view says what is wrong
    try:
        doc = views.ssh_command(editor, args.slot, args.worker, names=names)
    except ReconcilerError as e:
        _err(str(e))
        return EX_REFUSED
    try:
        check_reachable(args.slot, [doc["ip"]])
        if "@" not in doc["argv"][-1]:
            resolve_user(editor)
            # now with the cached user
            doc = views.ssh_command(editor, args.slot, args.worker, names=names)
    except NoMachine as e:
        if not args.print:
            _err(str(e))
            return EX_UNAVAILABLE
        print(shlex.join([*doc["argv"], *remote]))  # the command, as asked; but say it
        _note(f"note: {e}")
        return EX_OK
    except SetupFailed as e:
        _err(str(e))
        return EX_UNAVAILABLE
    except ReconcilerError as e:
        _err(str(e))
        return EX_REFUSED
    argv = [*doc["argv"], *remote]
    if args.print:
        print(shlex.join(argv))
        return EX_OK
    sys.stdout.flush()
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        _err(f"cannot run {argv[0]}: {e.strerror}")
        return EX_REFUSED


def tui_command(args: argparse.Namespace) -> int:
    # Without a terminal on both ends Textual has nothing to read keys from or draw on, and
    # would spin; say so at once (a pipe, cron, an ssh without -t, `< /dev/null`).
    missing = [n for n, f in (("stdin", sys.stdin), ("stdout", sys.stdout)) if not f.isatty()]
    if missing:
        _err(
            f"tui needs a terminal, and {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not one (for a script: status --watch, "
            "status --json, events --follow)"
        )
        return EX_USAGE
    from reconciler.surfaces.tui import main

    return main(args.file, args.state_dir, theme=args.theme, owner=args.owner)
