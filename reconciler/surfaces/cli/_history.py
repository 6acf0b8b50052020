"""Capacity history verbs: ``history`` (figures per zone, accelerator, mode and API; ``--export
csv``; ``--plot`` and ``--html FILE``: the history over time, in the terminal or as a page)
and ``recommend`` (zones ranked by expected time to capacity; ``--apply GROUP`` writes the
race group through the intent engine).

Thin: ``intent.history_views`` reads the store the controller keeps (``<state
dir>/history.sqlite``) read-only and words it; this prints what it says.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path
from typing import Any, Final

from reconciler.exitcodes import EX_OK, EX_REFUSED, EX_USAGE
from reconciler.model.vocabulary import APIS, DEFAULT_MODE, MODES
from reconciler.surfaces.cli._intent import max_run_flag
from reconciler.surfaces.cli._say import err

_HERE: Final = "reconciler.surfaces.cli._history"
API_HELP: Final = "only this API's places: tpu (queued resources) or compute (Compute Engine)"


def register(sub: Any) -> None:
    p = sub.add_parser("history", help="capacity history: queue waits, lifetimes, failures")
    p.add_argument("--zone", default=None)
    p.add_argument("--accelerator", default=None, help="e.g. v6e-8")
    p.add_argument("--mode", choices=MODES, default=None)
    p.add_argument("--api", choices=APIS, default=None, help=API_HELP)
    p.add_argument("--since", default=None, help="only records newer than this, e.g. 7d, 12h")
    p.add_argument("--json", action="store_true", help="print tpu-reconciler.history.v1 JSON")
    p.add_argument("--export", choices=("csv",), default=None, help="print every transition")
    p.add_argument(
        "--plot",
        action="store_true",
        help="draw waits by zone, chips held and preemptions per day in the terminal",
    )
    p.add_argument(
        "--html",
        metavar="FILE",
        default=None,
        help="write those charts and the zone rankings as one self-contained HTML page",
    )
    p.add_argument(
        "--until",
        metavar="TIME",
        default=None,
        help="end the pictures at this time (ISO 8601 with an offset; default: now)",
    )
    p.add_argument("--width", type=int, default=None, help="--plot width (default: the terminal)")
    p.set_defaults(handler=f"{_HERE}:history_command")

    p = sub.add_parser("recommend", help="zones ranked by expected time to capacity")
    p.add_argument("accelerator", metavar="ACCELERATOR", help="e.g. v6e-8")
    p.add_argument("--mode", choices=MODES, default=DEFAULT_MODE)
    p.add_argument("--api", choices=APIS, default=None, help=API_HELP + " (default: both)")
    p.add_argument("--count", type=int, default=3, help="zones to recommend (default 3)")
    p.add_argument("--since", default=None, help="only history newer than this, e.g. 30d")
    p.add_argument("--json", action="store_true", help="print tpu-reconciler.recommend.v1 JSON")
    p.add_argument(
        "--apply",
        metavar="GROUP",
        default=None,
        help="add a race group GROUP with one new candidate slot per recommended zone",
    )
    p.add_argument("--operation-id", default=None, help="idempotency key for --apply")
    max_run_flag(p)
    p.set_defaults(handler=f"{_HERE}:recommend_command")


def _since(text: str | None) -> float | None:
    from reconciler.model.durations import parse_duration

    return None if text is None else time.time() - parse_duration(text)


def _store_path(args: argparse.Namespace) -> Any:
    from reconciler.surfaces.cli._reconcile import state_dir

    return state_dir(args).history


def history_command(args: argparse.Namespace) -> int:
    from reconciler.errors import ReconcilerError
    from reconciler.intent.history_views import csv_rows, history_text

    try:
        since = _since(args.since)
    except ValueError as e:
        err(f"--since: {e}")
        return EX_USAGE
    filters = {
        "zone": args.zone,
        "accelerator": args.accelerator,
        "mode": args.mode,
        "api": args.api,
    }
    if args.plot or args.html is not None:
        if args.json or args.export:
            err("--plot and --html draw pictures: use --json and --export without them")
            return EX_USAGE
        return _pictures(args, since, filters)
    try:
        if args.export == "csv":
            out = csv.writer(sys.stdout, lineterminator="\n")
            for row in csv_rows(_store_path(args), since=since, **filters):
                out.writerow(row)
            return EX_OK
        text = history_text(
            _store_path(args), since=since, since_text=args.since, as_json=args.json, **filters
        )
    except ReconcilerError as e:
        err(str(e))
        return EX_REFUSED
    print(text, end="")
    return EX_OK


def _pictures(args: argparse.Namespace, since: float | None, filters: dict[str, Any]) -> int:
    """``history --plot`` / ``--html FILE``: the history over time, drawn by ``core``."""
    import shutil

    from reconciler.errors import ReconcilerError
    from reconciler.model.times import parse_instant

    now = time.time()
    try:
        until = now if args.until is None else parse_instant(args.until)
    except ValueError as e:
        err(f"--until: {e}")
        return EX_USAGE
    if args.width is not None and args.width < 1:
        err("--width: must be a positive number of columns")
        return EX_USAGE
    from reconciler.intent.history_views import pictures

    given = {**filters, "since": args.since}
    shown = {k: str(v) for k, v in given.items() if v}
    try:
        timeline, rankings = pictures(
            _store_path(args), until=until, since=since, rankings=args.html is not None, **filters
        )
    except ReconcilerError as e:
        err(str(e))
        return EX_REFUSED
    if args.html is not None:
        from reconciler.intent.history_views import write_page
        from reconciler.surfaces.cli._timeline import html_section

        section = html_section(args, filters)
        try:
            write_page(
                Path(args.html),
                timeline,
                rankings,
                until=until,
                since=since,
                generated=now,
                filters=shown,
                lab=section,
            )
        except OSError as e:
            err(f"--html: cannot write {args.html}: {e.strerror or e}")
            return EX_REFUSED
        if not args.plot:
            print(f"wrote {args.html}")
    if args.plot:
        from reconciler.intent.history_views import plot_text

        width = args.width or shutil.get_terminal_size((80, 24)).columns
        print(plot_text(timeline, until=until, since=since, width=width, filters=shown), end="")
    return EX_OK


def recommend_command(args: argparse.Namespace) -> int:
    from reconciler.errors import ReconcilerError
    from reconciler.intent.history_views import recommend_at
    from reconciler.intent.history_views import recommend_text as format_recommend
    from reconciler.model import names

    try:
        names.check_accelerator(args.accelerator)
        if args.apply is not None:
            names.check_name(args.apply)
        _since(args.since)
        if args.apply is not None and args.mode == "flex-start" and not args.max_run_duration:
            raise ValueError("--mode flex-start --apply needs --max-run-duration, e.g. 6h")
    except (ReconcilerError, ValueError) as e:
        err(str(e))
        return EX_USAGE
    try:
        doc = recommend_at(
            _store_path(args),
            args.accelerator,
            mode=args.mode,
            count=args.count,
            since=_since(args.since),
            group=args.apply,
            api=args.api,
        )
    except ReconcilerError as e:
        err(str(e))
        return EX_REFUSED
    if args.apply is None:
        print(
            json.dumps(doc, indent=2) if args.json else format_recommend(doc),
            end="\n" if args.json else "",
        )
        return EX_OK
    if not doc["zones"]:
        err("no zone to recommend yet: nothing applied")
        return EX_REFUSED
    from reconciler.intent.edits_race import RaceZones
    from reconciler.surfaces.cli._intent import _run

    if not args.json:  # the ranking; the names written are the edit's (its diff and note):
        # the paste-in snippet's would differ where the file already has such names
        print(format_recommend({**doc, "race_group_yaml": None}), end="")
    zones = tuple(z["zone"] for z in doc["zones"])
    apis = tuple(z["api"] for z in doc["zones"])  # written as api: where not the default
    run = args.max_run_duration
    return _run(
        args,
        RaceZones(
            args.apply, args.accelerator, zones, args.mode, 1, max_run_duration=run, apis=apis
        ),
    )
