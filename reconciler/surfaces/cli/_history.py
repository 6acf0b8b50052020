"""Capacity history verbs: ``history`` (figures per zone, accelerator, mode and API; ``--export
csv``; ``--plot`` and ``--html FILE``: the history over time, in the terminal or as a page)
and ``recommend`` (zones ranked by expected time to capacity; ``--apply GROUP`` writes the
race group through the intent engine).

Thin: reads the store the controller keeps (``<state dir>/history.sqlite``) read-only, hands the
samples to ``core.capacity`` and prints what ``core.capacity_report`` renders.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from reconciler.exitcodes import EX_OK, EX_REFUSED, EX_USAGE
from reconciler.model.vocabulary import APIS, DEFAULT_MODE, MODES
from reconciler.surfaces.cli._intent import max_run_flag
from reconciler.surfaces.cli._say import err

if TYPE_CHECKING:
    from reconciler.core.capacity_chart import Timeline

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
    from reconciler.adapters.history_db import open_readonly
    from reconciler.core.capacity_report import CSV_COLUMNS, csv_row, format_history, history_doc
    from reconciler.errors import ReconcilerError
    from reconciler.runtime.history_reads import summary_stats

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
        db = open_readonly(_store_path(args))
        try:
            if args.export == "csv":
                out = csv.writer(sys.stdout, lineterminator="\n")
                out.writerow(CSV_COLUMNS)
                if db is not None:
                    for row in db.transitions(since=since, **filters):
                        out.writerow(csv_row(row))
                return EX_OK
            stats = (  # with the requests still queued and nodes still held, as of now
                summary_stats(_store_path(args), since=since, **filters) if db is not None else []
            )
            attempts = (
                db.attempts(since=since, zone=args.zone, accelerator=args.accelerator)
                if db is not None
                else []
            )
        finally:
            if db is not None:
                db.close()
    except ReconcilerError as e:
        err(str(e))
        return EX_REFUSED
    if args.json:
        print(json.dumps(history_doc(stats, since=since, attempts=attempts, **filters), indent=2))
    else:
        from reconciler.core.attempt_report import format_attempts

        given = {**filters, "since": args.since}
        asked = {k: v for k, v in given.items() if v}
        if stats or asked or not attempts:
            print(format_history(stats, asked), end="")
        else:  # attempts only: "no capacity history yet" would say too much
            print("No queued resource or node recorded yet.")
        print(format_attempts(attempts), end="")
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
    from reconciler.runtime.history_reads import chart_timeline

    path = _store_path(args)
    given = {**filters, "since": args.since}
    shown = {k: str(v) for k, v in given.items() if v}
    try:
        timeline = chart_timeline(path, now=until, since=since, **filters)
        rankings = _rankings(path, timeline, since, until) if args.html is not None else []
    except ReconcilerError as e:
        err(str(e))
        return EX_REFUSED
    if args.html is not None:
        from reconciler.adapters.files import atomic_write
        from reconciler.core.capacity_html import format_html
        from reconciler.surfaces.cli._timeline import html_section

        section = html_section(args, filters)
        page = format_html(
            timeline,
            rankings,
            until=until,
            since=since,
            generated=now,
            filters=shown,
            lab=section,
        )
        try:
            atomic_write(Path(args.html), page, mode=None)  # a page to share: 0644 when new
        except OSError as e:
            err(f"--html: cannot write {args.html}: {e.strerror or e}")
            return EX_REFUSED
        if not args.plot:
            print(f"wrote {args.html}")
    if args.plot:
        from reconciler.core.capacity_plot import format_plot

        width = args.width or shutil.get_terminal_size((80, 24)).columns
        print(format_plot(timeline, until=until, since=since, width=width, filters=shown), end="")
    return EX_OK


def _rankings(
    path: Path, timeline: Timeline, since: float | None, until: float
) -> list[dict[str, Any]]:
    """What ``recommend`` prints for every accelerator and mode the pictures show."""
    from reconciler.runtime.history_reads import recommend_document

    kinds = sorted(
        {(w.accelerator, w.mode) for w in timeline.waits}
        | {(h.accelerator, h.mode) for h in timeline.holdings}
    )
    apis = {w.api for w in timeline.waits} | {h.api for h in timeline.holdings}
    api = next(iter(apis)) if len(apis) == 1 else None  # the pictures' API, when one
    return [
        recommend_document(path, acc, mode=mode, since=since, now=until, api=api)
        for acc, mode in kinds
        if acc != "?" and mode != "?"
    ]


def recommend_command(args: argparse.Namespace) -> int:
    from reconciler.core.capacity_report import format_recommend
    from reconciler.errors import ReconcilerError
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
    from reconciler.runtime.history_reads import recommend_document

    try:
        doc = recommend_document(
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
