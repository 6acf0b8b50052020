"""``tpu-reconciler timeline``: who holds what, when — each slot's past, present and scheduled
spans on one time axis, grouped by owner, zone or quota, with the earliest start of every
create waiting for a quota or a member's cap (an estimate) and the history's expected queue
waits. Reads the controller's snapshot, desired.yaml and the capacity history; never the cloud.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.exitcodes import EX_OK, EX_REFUSED, EX_USAGE
from reconciler.surfaces.cli._say import err

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "timeline",
        help="who holds what, when: held, queued and scheduled spans on one time axis",
        description="Every slot on one time axis: held and queued spans from the capacity "
        "history, now, scheduled ends (hold_until, hold_for, flex-start runs) and maintenance "
        "windows, and for each create waiting for a quota or a member's cap the earliest time "
        "it can start (an estimate, in the quota's fair order; 'never' with the reason), with "
        "the history's expected queue wait. As of the controller's last snapshot.",
    )
    p.add_argument(
        "--by",
        choices=("owner", "zone", "quota"),
        default="owner",
        help="group the slots by owner (default), zone or the chip limit they count under",
    )
    p.add_argument(
        "--since",
        metavar="WHEN",
        default=None,
        help="start of the axis: a duration back (12h, 2d) or an ISO time with an offset "
        "(default: half as far back as the axis goes ahead, at least 6h)",
    )
    p.add_argument(
        "--until",
        metavar="WHEN",
        default=None,
        help="end of the axis: a duration ahead (1d) or an ISO time with an offset "
        "(default: far enough for every scheduled end and estimate, 6h to 7d)",
    )
    p.add_argument("--width", type=int, default=None, help="columns (default: the terminal)")
    p.add_argument("--json", action="store_true", help="print tpu-reconciler.timeline.v1 JSON")
    p.set_defaults(handler=f"{__name__}:timeline_cmd")


def timeline_cmd(args: argparse.Namespace) -> int:
    import shutil

    from reconciler.errors import ReconcilerError
    from reconciler.intent.timeline_views import check_moment, lab_picture, timeline_text
    from reconciler.surfaces.cli._reconcile import state_dir
    from reconciler.surfaces.cli._snapshot import current_status

    if args.width is not None and args.width < 1:
        err("--width: must be a positive number of columns")
        return EX_USAGE
    for flag, text in (("--since", args.since), ("--until", args.until)):
        try:
            if text is not None:
                check_moment(text, ahead=flag == "--until")
        except ValueError as e:
            err(f"{flag}: {e}")
            return EX_USAGE
    try:
        found = lab_picture(
            current_status(args),
            args.file,
            state_dir(args).history,
            since=args.since,
            until=args.until,
            by=args.by,
        )
    except ValueError as e:
        err(f"--since / --until: {e}")
        return EX_USAGE
    except ReconcilerError as e:
        err(str(e))
        return EX_REFUSED
    width = args.width or shutil.get_terminal_size((80, 24)).columns
    print(timeline_text(found, width=width, as_json=args.json), end="")
    return EX_OK


def html_section(args: argparse.Namespace, filters: Mapping[str, str | None]) -> str:
    """``history --html``'s section of the lab's timeline (its rows narrowed to the page's
    ``--zone``, ``--accelerator`` and ``--mode``); "" when the history cannot be read."""
    from reconciler.errors import ReconcilerError
    from reconciler.intent import timeline_views
    from reconciler.surfaces.cli._reconcile import state_dir
    from reconciler.surfaces.cli._snapshot import current_status

    try:
        found = timeline_views.lab_picture(current_status(args), args.file, state_dir(args).history)
    except ReconcilerError:
        return ""
    return timeline_views.html_section(found, filters)
