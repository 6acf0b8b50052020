"""``tpu-reconciler tmux status|close``: look at the tmux SSH mirror, close a window on purpose.

``status`` lists the windows in ``tpu-*`` sessions and marks each active, orphaned (its slot is
not ACTIVE: left alone, closing is up to you) or unknown (no status snapshot to judge by). The
ACTIVE slots come from the controller's ``status.json``; this command never asks the cloud.
``close SLOT`` is the only way a window is ever closed: it asks first on a terminal, and without
one it refuses unless ``--yes`` is given.

Which tmux server: ``--socket``, else ``$TPU_RECONCILER_TMUX_SOCKET``, else the desired file's
``settings.tmux_socket`` (the server the controller uses), else tmux's default.

May: read the state dir and desired file, drive tmux through ``intent.tmux_mirror``, print.
May not: start a tmux server, create windows (the controller's job), edit any file.
Heavy imports (asyncio, libtmux, ruamel) happen inside the handlers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from reconciler.exitcodes import EX_OK, EX_REFUSED, EX_USAGE
from reconciler.surfaces.cli._say import err

if TYPE_CHECKING:
    from reconciler.intent.tmux_mirror import TmuxInventory, TmuxWindow

SCHEMA: Final = "tpu-reconciler.tmux-status.v1"
SOCKET_ENV: Final = "TPU_RECONCILER_TMUX_SOCKET"
_HERE: Final = "reconciler.surfaces.cli._tmux"


def register(subparsers: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--socket",
        default=None,
        help=f"tmux socket name (-L); default ${SOCKET_ENV}, else settings.tmux_socket, "
        "else tmux's default",
    )
    group = subparsers.add_parser("tmux", help="the tmux SSH mirror: list windows, close one")
    actions = group.add_subparsers(dest="tmux_action", metavar="ACTION", required=True)

    status = actions.add_parser(
        "status", parents=[common], help="list tpu-* windows and the orphaned ones"
    )
    status.add_argument("--json", action="store_true", help=f"print a {SCHEMA} document")
    status.set_defaults(handler=f"{_HERE}:status_command")

    close = actions.add_parser(
        "close", parents=[common], help="close a slot's window (asks first; --yes to skip)"
    )
    close.add_argument("slot", metavar="SLOT", help="the slot whose window to close")
    close.add_argument("--yes", action="store_true", help="close without asking")
    close.set_defaults(handler=f"{_HERE}:close_command")


# --- inputs ------------------------------------------------------------------------------------


def _state_dir(args: argparse.Namespace) -> Path:
    from reconciler.intent.store import state_dir

    return state_dir(Path(args.file), args.state_dir).root


def _socket_from_file(path: Path) -> str | None:
    """``settings.tmux_socket`` from the desired file; YAML only, so an unrelated schema error
    elsewhere in the file does not hide which server the controller uses."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    from reconciler.errors import InvalidDesiredState
    from reconciler.model.load import parse_yaml

    try:
        root = parse_yaml(text, str(path))
    except InvalidDesiredState:
        return None
    settings = root.get("settings") if isinstance(root, dict) else None
    value = settings.get("tmux_socket") if isinstance(settings, dict) else None
    return value if isinstance(value, str) and value else None


def _socket(args: argparse.Namespace) -> str | None:
    return args.socket or os.environ.get(SOCKET_ENV) or _socket_from_file(Path(args.file))


def _error(message: str) -> int:
    err(message)
    return EX_REFUSED


# --- status ------------------------------------------------------------------------------------


def _standing(w: TmuxWindow, inv: TmuxInventory) -> str:
    if not inv.known:
        return "unknown"
    return "orphaned" if w in inv.orphans else "active"


def _status_document(socket: str | None, inv: TmuxInventory, source: str) -> dict[str, Any]:
    """``source`` says where the ACTIVE slots came from, or why they are unknown."""
    return {
        "schema_version": SCHEMA,
        "socket": socket,
        "active_slots_source": source if inv.known else None,
        "windows": [
            {
                "target": w.target,
                "session": w.session,
                "window": w.window,
                "state": _standing(w, inv),
                "exited": w.dead,
            }
            for w in inv.windows
        ],
        "orphans": [w.target for w in inv.orphans],
        "notes": [n for n in (inv.note, None if inv.known else source) if n],
    }


def _status_text(doc: dict[str, Any], quiet: bool) -> list[str]:
    lines = []
    where = f"socket {doc['socket']!r}" if doc["socket"] else "the default socket"
    if not quiet:
        lines.append(f"tmux windows on {where}:")
    width = max((len(w["target"]) for w in doc["windows"]), default=0)
    for w in doc["windows"]:
        detail = {
            "active": "active",
            "orphaned": f"orphaned: slot not ACTIVE (tpu-reconciler tmux close {w['window']})",
            "unknown": "unknown: no snapshot to judge by",
        }[w["state"]]
        exited = ", ssh exited" if w["exited"] else ""
        lines.append(f"  {w['target']:<{width}}  {detail}{exited}")
    if not quiet:
        count = len(doc["windows"])
        lines.append(
            f"{count} window{'s' if count != 1 else ''}, {len(doc['orphans'])} orphaned"
            + (f"; {doc['active_slots_source']}" if doc["active_slots_source"] else "")
        )
        lines.extend(f"note: {n}" for n in doc["notes"])
    return lines


def status_command(args: argparse.Namespace) -> int:
    import asyncio

    from reconciler.errors import ReconcilerError
    from reconciler.intent.tmux_mirror import active_slots, mirror

    socket = _socket(args)
    active, source = active_slots(_state_dir(args))

    async def run() -> TmuxInventory:
        async with mirror(socket) as tmux:
            return await tmux.inventory(active)

    try:
        inv = asyncio.run(run())
    except ReconcilerError as e:  # UnsafeName for a bad --socket
        return _error(str(e))
    doc = _status_document(socket, inv, source)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print("\n".join(_status_text(doc, bool(args.quiet))))
    return EX_OK


# --- close -------------------------------------------------------------------------------------


def _confirm(targets: Sequence[str]) -> bool:
    sys.stderr.write(f"Close tmux window{'s' if len(targets) > 1 else ''} {', '.join(targets)}? ")
    sys.stderr.write("[y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    return answer.strip().lower() in {"y", "yes"}


def close_command(args: argparse.Namespace) -> int:
    import asyncio

    from reconciler.errors import ReconcilerError
    from reconciler.intent.tmux_mirror import active_slots, mirror
    from reconciler.model import names

    slot: str = args.slot
    try:
        names.check_name(slot)
    except ReconcilerError as e:
        err(str(e))
        return EX_USAGE
    socket = _socket(args)
    interactive = sys.stdin.isatty()

    async def run() -> int:
        async with mirror(socket) as tmux:
            found = await tmux.windows_for(slot)
            if not found:
                return _error(f"no window named {slot} in tpu-* sessions on {tmux.socket_label}")
            targets = [w.target for w in found]
            if not args.yes:
                if not interactive:
                    return _error(
                        f"refusing to close {', '.join(targets)} without --yes "
                        "(stdin is not a terminal, so nobody can confirm)"
                    )
                if not await asyncio.to_thread(_confirm, targets):
                    return _error("not closed")
            closed = await tmux.close(slot)
        if not args.quiet:
            for w in closed:
                print(f"closed {w.target}")
        return EX_OK if closed else _error(f"{slot}'s window was already gone")

    try:
        code = asyncio.run(run())
    except ReconcilerError as e:
        return _error(str(e))
    active, _ = active_slots(_state_dir(args))
    if code == 0 and active and slot in active and not args.quiet:
        print(
            f"note: {slot} is ACTIVE: the controller opens its window again on its next pass "
            "unless the slot's setup.tmux is false",
            file=sys.stderr,
        )
    return code
