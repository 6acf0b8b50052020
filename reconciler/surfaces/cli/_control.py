"""Control verb ``confirm``: let through the deletes the delete guard holds, exactly those
shown. (``suspend`` and ``resume``, edits of ``settings.suspend``, are verbs made from their
declarations in ``intent.usecases``, by ``_intent``.)

Its arguments (FINGERPRINT, ``--yes``) are made from its declaration (``intent.usecases``:
``confirm``) by ``_intent.flags_of``, as the edit verbs' are.

Thin: ``confirm`` writes the controller's confirmation input (``reconciler.intent.confirm``);
it does not act on the cloud: the controller does, at its next pass. Without FINGERPRINT it asks
at the terminal (and refuses without one, as ``release`` does, unless ``--yes``). Exit codes:
0 done, 1 refused, 2 nobody confirmed.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Final

from reconciler.exitcodes import EX_CONFIRM
from reconciler.surfaces.cli._say import confirm, err

_HERE: Final = "reconciler.surfaces.cli._control"


def register(subparsers: Any) -> None:
    from reconciler.intent.usecases import by_name
    from reconciler.surfaces.cli._intent import flags_of

    case = by_name("confirm")
    p = subparsers.add_parser(
        "confirm",
        help=case.summary,
        description="Confirm the deletes held by settings.delete_guard: exactly the set "
        "`status` and `plan` show. With FINGERPRINT, refuse if the set has changed since.",
    )
    flags_of(p, case)  # FINGERPRINT and --yes, from the declaration
    p.add_argument("--json", action="store_true", help="print the result document (JSON)")
    p.set_defaults(handler=f"{_HERE}:confirm_command")


def confirm_command(args: argparse.Namespace) -> int:
    from reconciler.errors import ReconcilerError
    from reconciler.intent.confirm import confirm_deletes, guarded, refuse_unless_yours
    from reconciler.surfaces.cli._intent import _store

    store = _store(args)
    fingerprint = args.fingerprint
    try:
        guard = guarded(store) if fingerprint is None and not args.yes else None
        if guard is not None:  # no id: the person at the terminal says yes to what is shown
            refuse_unless_yours(store)  # someone else's slots: 77 before anyone is asked
            shown = ", ".join(guard.deletes)
            question = f"Delete {len(guard.deletes)} running TPU(s): {shown}?"
            if not confirm(
                question,
                not_a_terminal=f"{len(guard.deletes)} delete(s) wait for confirmation "
                f"({shown}); stdin is not a terminal, so nobody can confirm: pass what you were "
                f"shown (tpu-reconciler confirm {guard.fingerprint}), or --yes",
            ):
                return EX_CONFIRM
            fingerprint = guard.fingerprint  # exactly the set asked about
        result = confirm_deletes(store, fingerprint)
    except ReconcilerError as e:  # NotYourSlot, NotPermitted: 77, as every ownership refusal
        err(str(e))
        return e.exit_code
    if args.json:
        print(json.dumps({"schema_version": "tpu-reconciler.intent.v1", **result}, indent=2))
    elif not args.quiet:
        if result["status"] == "nothing":
            print("nothing to confirm: no deletes wait for confirmation")
        else:
            for d in result["deletes"]:
                print(f"  - delete {d}")
            print(
                f"confirmed {len(result['deletes'])} delete(s) ({result['fingerprint']}): "
                f"{result['note']}"
            )
    return 0
