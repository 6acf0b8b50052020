"""``tpu-reconciler workload set|restart|stop NAME``: edits of a slot's (or race group's)
``workload:`` block in desired.yaml, through ``reconciler.intent.edits_workload``
(``SetWorkload``, ``RestartWorkload``, ``StopWorkload``).

``restart`` bumps the workload's generation (a new run id, attempt 1); ``stop`` removes the
block (the controller stops the program: SIGTERM, then SIGKILL after ``stop_grace``). Both, and
a ``set`` that changes what runs, end a program the controller's snapshot shows running: they
ask first (``--yes`` to skip; exit 2 when nobody can answer). Same output and exit codes as the
other intent verbs (``_intent``); the output of a workload is ``tpu-reconciler logs``.

Each verb's arguments are made from its declaration (``intent.usecases``: ``workload_set``,
``workload_restart``, ``workload_stop``) by ``_intent.flags_of``, as every edit verb's are;
this module adds the group and the ask before a running program ends.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Final

from reconciler.exitcodes import EX_CONFIRM, EX_USAGE
from reconciler.surfaces.cli._say import err as _err

if TYPE_CHECKING:
    from reconciler.intent.edits import Edit

_HERE: Final = "reconciler.surfaces.cli._workload"


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
    for verb in ("set", "restart", "stop"):  # their arguments from the declarations
        case = by_name(f"workload_{verb}")
        p = _edit_parser(sub, verb, case.summary, "workload_command")
        # this module's handler, not _intent's: it asks before a running program ends
        p.set_defaults(handler=f"{_HERE}:workload_command", usecase=case.name)
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


def workload_command(args: argparse.Namespace) -> int:
    """``workload set|restart|stop``: the declared edit, asked about first when it ends a
    running program (restart and stop always; set when it changes what runs)."""
    from reconciler.intent.edits_workload import SetWorkload
    from reconciler.surfaces.cli._intent import declared_edit

    try:
        edit = declared_edit(args)
    except ValueError as e:  # a malformed --env / --secret-env NAME=VALUE
        _err(str(e))
        return EX_USAGE
    return _guarded(args, edit, not isinstance(edit, SetWorkload) or edit.changes_what_runs)
