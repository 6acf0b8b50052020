"""The capacity history drawn as text: ``history --plot`` and the TUI's history pane.

Three charts of ``core.capacity_chart``'s series, every line at most ``width`` columns (80
works; plain ASCII, so any terminal and any font draw it the same): the median wait to ACTIVE
by zone (one letter per zone, ``*`` where two zones meet), the chips held (bars of the average
per column), and the preemptions per UTC day (one bar per day, or per few days when the days
outnumber the columns). One column is one bin of the window; the same history, ``until`` and
width give the same text.

May: build text. May not: do I/O, read a clock (``until`` is given), or print.
"""

from __future__ import annotations

import datetime as _dt
import textwrap
from collections.abc import Sequence
from typing import Final

from reconciler.core.capacity_chart import (
    Charts,
    Timeline,
    axis_label,
    charts,
    peak,
    utc_date,
    zone_line,
)

HEIGHT: Final = 8  # rows of the waits and chips charts
BAR_HEIGHT: Final = 5  # rows of the preemptions chart
AXIS: Final = 7  # columns of the y-axis labels
MIN_WIDTH: Final = 40
LETTERS: Final = "abcdefghijklmnopqrstuvwxyz"
EMPTY: Final = "No capacity history to plot yet (the controller records it while it runs).\n"


def zone_letter(i: int) -> str:
    return LETTERS[i] if i < len(LETTERS) else "+"


def _frame(rows: list[list[str]], top: float, *, duration: bool) -> list[str]:
    """The plot rows with the y axis: the top value, half of it and 0 (at the bottom)."""
    height = len(rows)
    marks = {0: axis_label(top, duration=duration), height - 1: "0"}
    if height > 2:
        marks[(height - 1) // 2] = axis_label(top / 2, duration=duration)
    return [
        f"{marks.get(r, '')[: AXIS - 1]:>{AXIS - 1}} |{''.join(cells)}".rstrip()
        for r, cells in enumerate(rows)
    ]


def _x_axis(c: Charts, columns: int) -> list[str]:
    """The axis line and the dates (and times, for a window under three days) under it."""
    span = c.end - c.start
    fmt = "%m-%d" if span >= 3 * 86400 else "%m-%d %H:%M"

    def when(moment: float) -> str:
        return _dt.datetime.fromtimestamp(moment, _dt.UTC).strftime(fmt)

    left, right = when(c.start), when(c.end)
    line = [" "] * columns
    line[: len(left)] = left
    middle = when(c.start + span / 2)
    at = columns // 2 - len(middle) // 2
    if at > len(left) + 2 and at + len(middle) < columns - len(right) - 2:
        line[at : at + len(middle)] = middle
    line[columns - len(right) :] = right
    return [" " * (AXIS - 1) + " +" + "-" * columns, " " * (AXIS + 1) + "".join(line).rstrip()]


def _row_of(value: float, top: float, height: int) -> int:
    return height - 1 - round(value / top * (height - 1)) if top > 0 else height - 1


def _waits(c: Charts, columns: int) -> list[str]:
    lines = ["Wait to ACTIVE by zone (median of the requests queued at that time)"]
    if not c.waits:
        return [*lines, "  no queued requests in this window", ""]
    top = max(peak(z.values) for z in c.waits)
    legend = [f"  {zone_letter(i)} {z.zone}: {zone_line(z)}" for i, z in enumerate(c.waits)]
    if top <= 0:  # every request gave up or still waits: nothing to plot, only to count
        return [*lines, "  no request got capacity in this window", *legend, ""]
    rows = [[" "] * columns for _ in range(HEIGHT)]
    for i, z in enumerate(c.waits):
        for col, value in enumerate(z.values):
            if value is None:
                continue
            r = _row_of(value, top, HEIGHT)
            cell = rows[r][col]
            rows[r][col] = zone_letter(i) if cell in (" ", zone_letter(i)) else "*"
    return [*lines, *_frame(rows, top, duration=True), *_x_axis(c, columns), *legend, ""]


def _bars(values: Sequence[float], top: float, height: int) -> list[list[str]]:
    """Columns filled to each value (``.`` at the bottom for a value too small for a row)."""
    rows = [[" "] * len(values) for _ in range(height)]
    for col, value in enumerate(values):
        if value <= 0 or top <= 0:
            continue
        level = value / top * height
        filled = max(0, min(height, round(level)))
        for k in range(filled):
            rows[height - 1 - k][col] = "#"
        if filled == 0:
            rows[height - 1][col] = "."
    return rows


def _chips(c: Charts, columns: int) -> list[str]:
    lines = [f"Chips held (average per column; {c.chips_now} held at the end)"]
    top = peak(c.chips)
    if top <= 0:
        return [*lines, "  no capacity held in this window", ""]
    lines += _frame(_bars(c.chips, top, HEIGHT), top, duration=False) + _x_axis(c, columns)
    return [*lines, ""]


def _preemptions(c: Charts, columns: int) -> list[str]:
    days = list(c.preemptions)
    total = sum(n for _, n in days)
    per = max(1, -(-len(days) // columns))  # days per bar, so every day fits
    groups = [days[i : i + per] for i in range(0, len(days), per)]
    counts = [float(sum(n for _, n in g)) for g in groups]
    unit = "day" if per == 1 else f"{per} days"
    lines = [f"Preemptions per {unit} (UTC; {total} in all)"]
    if total == 0:
        return [*lines, "  no preemptions in this window"]
    bar = max(1, min(4, columns // len(groups)))  # columns per bar (one gap included)
    wide = [v for v in counts for _ in range(bar)]
    gaps = [bool((k + 1) % bar == 0 and bar > 1) for k in range(len(wide))]
    rows = _bars(wide, max(counts), BAR_HEIGHT)
    for r in rows:
        for k, gap in enumerate(gaps):
            if gap:
                r[k] = " "
    lines += _frame(rows, max(counts), duration=False)
    lines.append(" " * (AXIS - 1) + " +" + "-" * len(wide))
    first, last = groups[0][0][0], groups[-1][-1][0]
    dates = f"{first} .. {last}" if first != last else first
    lines.append(" " * (AXIS + 1) + dates)
    busiest = max(days, key=lambda d: (d[1], d[0]))
    lines.append(f"  busiest day: {busiest[0]} ({busiest[1]})")
    return lines


def format_plot(
    timeline: Timeline,
    *,
    until: float,
    since: float | None = None,
    width: int = 80,
    filters: dict[str, str] | None = None,
) -> str:
    """The three charts for ``timeline`` over ``[since or its oldest record, until]``, each
    line at most ``max(width, MIN_WIDTH)`` columns."""
    width = max(width, MIN_WIDTH)
    if timeline.empty():
        asked = ", ".join(f"{k}={v}" for k, v in (filters or {}).items() if v)
        return f"No capacity history matches {asked}.\n" if asked else EMPTY
    columns = width - AXIS - 1
    c = charts(timeline, until=until, since=since, bins=columns)
    head = f"Capacity history {utc_date(c.start)} .. {utc_date(c.end)} (UTC)"
    asked = ", ".join(f"{k}={v}" for k, v in (filters or {}).items() if v)
    lines = [head + (f", {asked}" if asked else ""), ""]
    lines += _waits(c, columns) + _chips(c, columns) + _preemptions(c, columns)
    out: list[str] = []
    for line in lines:  # chart rows fit; a long title or legend line wraps
        out += textwrap.wrap(line, width, subsequent_indent="    ") if len(line) > width else [line]
    return "\n".join(out) + "\n"
