"""``status --watch``: the status view kept up to date, read from the snapshot every interval.

On a terminal it is a rich ``Live`` view redrawn in place (no clearing, so no flicker, and it
works over SSH): states in colour (ACTIVE green, queued yellow, FAILED / SUSPENDED red,
NOT_QUEUED dim), columns dropped by priority when the terminal is narrow, long notes cut with
an ellipsis. Not on a terminal it prints a plain ``format_status`` block per interval (with
``--json``: one compact status document per line), so ``status --watch | tee log`` works too.
Ctrl-C ends it with exit code 0.

It never asks the cloud: it reads status.json (``_snapshot.current_status``) like ``status``
does, and draws the words ``intent/status_view.watch_view`` gives it.
May: read the snapshot and the lock, print. May not: write anything.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from reconciler.exitcodes import EX_OK, EX_USAGE
from reconciler.surfaces.cli._say import err

if TYPE_CHECKING:
    from rich.console import RenderableType

    from reconciler.intent.status_view import WatchView
    from reconciler.model.status import StatusSnapshot

#: Which columns to show at a terminal width (the widest set that fits is used); None: every
#: column ``intent.status_view.watch_view`` names for the snapshot.
LAYOUTS: Final[tuple[tuple[int, tuple[str, ...] | None], ...]] = (
    (110, None),
    (80, ("SLOT", "ZONE", "WANT", "STATE", "FOR", "NODE", "NOTE")),
    (0, ("SLOT", "STATE", "FOR", "NOTE")),
)
QUEUED: Final = frozenset({"CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING"})
BAD: Final = frozenset({"FAILED", "SUSPENDED", "SUSPENDING"})


def state_style(state: str) -> str:
    if state == "ACTIVE":
        return "bold green"
    if state in QUEUED:
        return "yellow"
    if state in BAD:
        return "bold red"
    if state == "DELETING":
        return "magenta"
    return "dim"  # NOT_QUEUED, UNKNOWN


def columns_for(width: int) -> Sequence[str] | None:
    return next(cols for least, cols in LAYOUTS if width >= least)


def _head(snapshot: StatusSnapshot, view: WatchView, interval: float) -> list[tuple[str, str]]:
    """(text, style) lines above the table."""
    desired = snapshot.desired
    ctl = snapshot.controller
    lines = [
        (
            f"desired: {desired.file} "
            + (
                "(valid)"
                if desired.valid
                else "(INVALID: last valid intent in force)"
                if desired.digest is not None
                else "(INVALID: no valid intent yet: nothing acts)"
            ),
            "" if desired.valid else "bold red",
        ),
        (
            "controller: " + (f"running (pid {ctl.pid})" if ctl.running else "NOT RUNNING"),
            "" if ctl.running else "bold red",
        ),
        (
            f"{view.snapshot_line}   (every {interval:g}s, Ctrl-C quits)",
            "dim",
        ),
    ]
    lines += [(f"  {e}", "red") for e in desired.errors]
    if snapshot.note:
        lines.append((str(snapshot.note), "yellow"))
    if snapshot.observe_error:
        lines.append((f"last observation failed: {snapshot.observe_error}", "red"))
    if snapshot.unreachable_zones:
        lines.append((f"unreachable zones: {', '.join(snapshot.unreachable_zones)}", "yellow"))
    return lines


def _tail(snapshot: StatusSnapshot, view: WatchView) -> list[tuple[str, str]]:
    lines = [(line, "red") for line in view.errors]
    lines += [(line, "green" if won else "yellow") for line, won in view.races]
    orphans = snapshot.tmux.orphans
    if orphans:
        lines.append((f"tmux orphans (slot not ACTIVE; left open): {', '.join(orphans)}", "dim"))
    summary = snapshot.plan.summary if snapshot.plan else None
    if summary:
        lines.append((f"next: {summary}", "bold" if summary != "No changes." else "dim"))
    return lines


def render(snapshot: StatusSnapshot, now: float, width: int, interval: float) -> RenderableType:
    """The whole view for a terminal ``width`` columns wide."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from reconciler.intent.status_view import watch_view

    view = watch_view(snapshot, now)
    names = view.columns
    layout = columns_for(width)
    shown = list(names) if layout is None else [n for n in layout if n in names]
    index = [names.index(name) for name in shown]
    rows = [[row[i] for i in index] for row in view.rows]
    natural = [max([len(name), *(len(r[c]) for r in rows)]) for c, name in enumerate(shown)]
    others = sum(n for n, name in zip(natural, shown, strict=True) if name != "NOTE")
    note_room = width - others - 2 * (len(shown) - 1)
    fits = note_room >= 4  # else rich shrinks every column to fit
    table = Table(box=None, padding=(0, 2, 0, 0), pad_edge=False, header_style="bold")
    for name, size in zip(shown, natural, strict=True):
        note = name == "NOTE"
        table.add_column(
            name,
            no_wrap=True,
            overflow="ellipsis",
            min_width=size if fits and not note else None,
            max_width=max(4, note_room) if note else None,
        )
    state_at = shown.index("STATE")
    for slot, cells in zip(snapshot.slots, rows, strict=True):
        texts = [Text(c) for c in cells]
        texts[state_at].stylize(state_style(cells[state_at]))
        if "NOTE" in shown and slot.last_error:
            texts[shown.index("NOTE")].stylize("red")
        table.add_row(*texts, style="dim italic" if not slot.managed else None)
    parts: list[RenderableType] = [Text(t, style=s) for t, s in _head(snapshot, view, interval)]
    parts += [Text(""), table if snapshot.slots else Text("no slots", style="dim")]
    tail = _tail(snapshot, view)
    if tail:
        parts += [Text(""), *(Text(t, style=s) for t, s in tail)]
    return Group(*parts)


def _every(interval: float, step: Callable[[], None]) -> int:
    """Call ``step`` now and every ``interval`` seconds until Ctrl-C (see ``watch``)."""
    while True:
        step()
        time.sleep(interval)


def watch(args: argparse.Namespace) -> int:
    from reconciler.model.status import to_json
    from reconciler.surfaces.cli._snapshot import current_status as read_status

    if args.live:
        err("--watch reads the snapshot; drop --live")
        return EX_USAGE
    if not args.interval > 0:
        err("--interval must be more than 0")
        return EX_USAGE
    interval = float(args.interval)
    try:
        if args.json:
            return _every(interval, lambda: _line(json.dumps(to_json(read_status(args)))))
        if not sys.stdout.isatty():
            from reconciler.intent.status_view import format_status

            return _every(interval, lambda: _line(format_status(read_status(args), time.time())))
        return _live(args, interval, read_status)
    except KeyboardInterrupt:  # Ctrl-C is how a watch ends: not an error
        return EX_OK


def _line(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def _live(
    args: argparse.Namespace,
    interval: float,
    read: Callable[[argparse.Namespace], StatusSnapshot],
) -> int:
    from rich.console import Console
    from rich.live import Live

    console = Console(highlight=False)

    def view() -> RenderableType:
        return render(read(args), time.time(), console.width, interval)

    with Live(view(), console=console, auto_refresh=False, vertical_overflow="ellipsis") as live:
        return _every(interval, lambda: live.update(view(), refresh=True))
