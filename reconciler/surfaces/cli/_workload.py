"""``tpu-reconciler workload set|restart|stop NAME``: edits of a slot's (or race group's)
``workload:`` block in desired.yaml, through ``reconciler.intent.edits_workload``
(``SetWorkload``, ``RestartWorkload``, ``StopWorkload``).

``restart`` bumps the workload's generation (a new run id, attempt 1); ``stop`` removes the
block (the controller stops the program: SIGTERM, then SIGKILL after ``stop_grace``). Both, and
a ``set`` that changes what runs, end a program the controller's snapshot shows running: they
ask first (``--yes`` to skip; exit 2 when nobody can answer). Same output and exit codes as the
other intent verbs (``_intent``); the output of a workload is ``tpu-reconciler logs``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Final

from reconciler.exitcodes import EX_CONFIRM, EX_USAGE

if TYPE_CHECKING:
    from reconciler.intent.edits import Edit

_HERE: Final = "reconciler.surfaces.cli._workload"


def _pairs(values: list[str] | None, what: str) -> dict[str, str] | None:
    if values is None:
        return None
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{what} takes NAME=VALUE, got {item!r}")
        out[key] = value
    return out


def register(subparsers: Any) -> None:
    from reconciler.intent.usecases import by_name
    from reconciler.surfaces.cli._intent import _edit_parser, flags_of

    top = subparsers.add_parser(
        "workload",
        help="set, restart or stop a slot's workload (edits desired.yaml)",
        description="Edit the workload: block of a slot or race group. The controller "
        "launches, stops and relaunches it; see `status` and `logs`.",
    )
    sub = top.add_subparsers(dest="workload_verb", metavar="VERB", required=True)

    p = _edit_parser(sub, "set", "set workload fields of a slot or race group", "set_command")
    p.set_defaults(handler=f"{_HERE}:set_command")  # this module's handler, not _intent's
    p.add_argument("name", metavar="NAME", help="a slot (with its own entry) or a race group")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--command", default=None, help="a command run by bash -lc on each worker")
    how.add_argument("--argv", nargs="+", default=None, help="the program and its arguments")
    p.add_argument("--workdir", default=None, help="working directory (default: login dir)")
    p.add_argument("--env", action="append", metavar="NAME=VALUE", help="plain variable")
    p.add_argument(
        "--secret-env", action="append", metavar="NAME=SECRET", help="variable from a secret"
    )
    p.add_argument("--restart", choices=("never", "on-preemption", "on-failure", "always"))
    p.add_argument("--max-failures", type=int, default=None)
    p.add_argument("--stall-after", default=None, help="e.g. 30m")
    p.add_argument("--stop-grace", default=None, help="e.g. 60s")
    p.add_argument("--when-done", choices=("keep", "release"), default=None)
    p.add_argument(
        "--keep-attempts", type=int, default=None, help="attempt directories kept (1..10000)"
    )
    p.add_argument("--idle-after", default=None, help="chips idle this long = a hang, e.g. 20m")
    p.add_argument("--idle-below", type=float, default=None, help="idle duty cycle, percent")
    p.add_argument(
        "--take-tpu",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="stop others' processes holding the chips before a launch",
    )
    p.add_argument(
        "--across",
        choices=("group", "slot"),
        default=None,
        help="race group only: group = one program over every winner",
    )
    p.add_argument(
        "--min-count", type=int, default=None, help="race group with --across group: start on N"
    )
    p.add_argument("--yes", action="store_true", help="do not ask before ending a running one")

    for verb in ("restart", "stop"):  # their arguments from the declarations
        case = by_name(f"workload_{verb}")
        p = _edit_parser(sub, verb, case.summary, f"{verb}_command")
        p.set_defaults(handler=f"{_HERE}:{verb}_command")
        flags_of(p, case)


def _guarded(args: argparse.Namespace, edit: Edit, ends_it: bool) -> int:
    """Ask before an edit that ends a program the snapshot shows live, then run it."""
    from reconciler.errors import ReconcilerError
    from reconciler.intent.workload_views import live
    from reconciler.surfaces.cli._intent import _run, _store
    from reconciler.surfaces.cli._say import confirm

    if ends_it and not args.yes:
        try:
            running = live(_store(args), args.name)
        except ReconcilerError:
            running = False  # no readable snapshot: nothing is known to run
        if running:
            what = f"this ends {args.name}'s running workload"
            refusal = f"{what}; confirm with --yes (stdin is not a terminal)"
            if not confirm(f"{what}. Go ahead?", not_a_terminal=refusal):
                return EX_CONFIRM
            args.yes = True
    return _run(args, edit)


def set_command(args: argparse.Namespace) -> int:
    from reconciler.intent.edits_workload import SetWorkload
    from reconciler.surfaces.cli._say import err as _err

    try:
        env = _pairs(args.env, "--env")
        secret_env = _pairs(args.secret_env, "--secret-env")
    except ValueError as e:
        _err(str(e))
        return EX_USAGE
    edit = SetWorkload(
        args.name,
        command=args.command if args.argv is None else tuple(args.argv),
        workdir=args.workdir,
        env=env,
        secret_env=secret_env,
        restart=args.restart,
        max_failures=args.max_failures,
        stall_after=args.stall_after,
        stop_grace=args.stop_grace,
        when_done=args.when_done,
        keep_attempts=args.keep_attempts,
        idle_after=args.idle_after,
        idle_below=args.idle_below,
        take_tpu=args.take_tpu,
        across=args.across,
        min_count=args.min_count,
    )
    return _guarded(args, edit, edit.changes_what_runs)


def restart_command(args: argparse.Namespace) -> int:
    from reconciler.intent.edits_workload import RestartWorkload

    return _guarded(args, RestartWorkload(args.name), True)


def stop_command(args: argparse.Namespace) -> int:
    from reconciler.intent.edits_workload import StopWorkload

    return _guarded(args, StopWorkload(args.name), True)
