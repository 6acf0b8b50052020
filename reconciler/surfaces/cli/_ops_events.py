"""``tpu-reconciler events``: the controller's event log, for people (one line each) or machines.

A human line is ``TIME  KIND  SLOT  what happened``: the UTC time to the second, the event
kind, the slot (``-`` for none) and its salient fields — for a failure the error exactly as
the cloud worded it. Control characters in any text are escaped, so a hostile message cannot
drive the terminal. ``--json`` prints each record as stored, with ``schema_version``
``tpu-reconciler.event.v1`` first (docs/json.md).

May: read the event files (``intent/event_log``), print. May not: write anything. The line for a
person is ``intent.event_text.format_event`` (the TUI's events pane shows the same).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from reconciler.exitcodes import EX_OK, EX_REFUSED, EX_USAGE
from reconciler.intent.event_text import format_event
from reconciler.surfaces.cli._say import err

EVENT_SCHEMA: Final = "tpu-reconciler.event.v1"
#: With --follow the slots to come are unknown: pad to a width most generated names fit.
_FOLLOW_SLOT_WIDTH: Final = 20


def parse_since(value: str, now: float) -> datetime:
    """``1h`` / ``30m`` / ``90`` (seconds ago) or an ISO-8601 time (naive means UTC)."""
    from reconciler.model.durations import parse_duration

    try:
        return datetime.fromtimestamp(now - parse_duration(value), UTC)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"--since {value!r}: expected a duration (30m, 1h, 2d) or an ISO-8601 time"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def json_line(record: Mapping[str, Any]) -> str:
    return json.dumps({"schema_version": EVENT_SCHEMA, **record}, separators=(",", ":"))


def _err(message: str) -> int:
    err(message)
    return EX_USAGE


def events_command(args: argparse.Namespace) -> int:
    from reconciler.surfaces.cli._reconcile import state_dir

    try:
        since = parse_since(args.since, time.time()) if args.since else None
    except ValueError as e:
        return _err(str(e))
    if args.limit is not None and args.limit < 0:
        return _err("--limit must be 0 or more")
    render: Callable[[Mapping[str, Any]], str] = json_line
    if not args.json:
        render = functools.partial(format_event, slot_width=_FOLLOW_SLOT_WIDTH)
    path = state_dir(args).events
    if args.follow:
        return _follow(path, since, args.slot, args.limit, render)
    from reconciler.intent.event_log import read_events, unknown_slot

    records = read_events(path, since=since, slot=args.slot, limit=args.limit)
    if args.slot and not records and (unknown := unknown_slot(args.file, args.slot)):
        err(unknown)
        return EX_REFUSED
    if not args.json:
        width = max((len(str(r.get("slot") or "-")) for r in records), default=0)
        render = functools.partial(format_event, slot_width=width)
    for record in records:
        print(render(record))
    if not records and not args.json and not args.quiet:
        print(f"no events{' matching' if args.slot or since else ''} in {path}", file=sys.stderr)
    return EX_OK


def _follow(
    path: Any,
    since: datetime | None,
    slot: str | None,
    limit: int | None,
    render: Callable[[Mapping[str, Any]], str],
) -> int:
    import asyncio
    import signal

    from reconciler.intent.event_log import follow_events

    async def follow() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async for record in follow_events(path, since=since, slot=slot, limit=limit, stop=stop):
            sys.stdout.write(render(record) + "\n")
            sys.stdout.flush()

    asyncio.run(follow())
    return EX_OK
