"""The lab's timeline as text: ``tpu-reconciler timeline``, and the TUI's timeline pane (which
styles the same cells), plus its JSON document.

One line per slot under its group's heading, one column per equal slice of the window
``[start, end]`` (the timeline's own ``[since, until]`` unless a view is given: the TUI scrolls
and zooms it); an axis of UTC times above; then what is scheduled and the estimates, in words.
Plain ASCII and one meaning per character, so it reads the same on a dark or a light terminal
and without colour (``NO_COLOR``); every line at most ``width`` columns (80 works).

The characters (``LEGEND``): ``#`` held, ``=`` queued in the cloud, ``.`` waiting for a quota or
a member's cap (not sent), ``_`` suspended, failed or being deleted (still counted), ``~`` the
expected queue wait (estimate), ``+`` held (estimate), ``x`` preempted, ``]`` a scheduled end,
``[`` ``start_at``, ``*`` an estimated start, ``m`` maintenance, ``>`` goes on past the window,
``|`` now.

Each cell comes with a style name (``Cell``): the TUI colours by it, the CLI prints only text.

May: build text. May not: do I/O, read a clock (``as_of`` is the timeline's), or print.
"""

from __future__ import annotations

import datetime as _dt
import textwrap
from collections.abc import Sequence
from typing import Any, Final

from reconciler.core.timeline import (
    END,
    EXPECTED,
    MAINTENANCE,
    SCHEMA,
    START_AT,
    STARTS,
    LabTimeline,
    Row,
)
from reconciler.core.timeline_estimate import Estimate
from reconciler.core.timeline_past import (
    DEAD,
    EST_HELD,
    EST_QUEUED,
    HELD,
    PREEMPTION,
    QUEUED_SPAN,
    RUN_ENDED,
    WAITING,
    Span,
)
from reconciler.model.durations import format_duration
from reconciler.model.times import utc_text

MIN_WIDTH: Final = 40
MIN_COLUMNS: Final = 10
#: A span's character and style, by kind.
SPANS: Final = {
    HELD: ("#", "held"),
    QUEUED_SPAN: ("=", "queued"),
    WAITING: (".", "waiting"),
    DEAD: ("_", "dead"),
    EST_QUEUED: ("~", "estimate"),
    EST_HELD: ("+", "estimate"),
}
#: A mark's character and style, by kind; the first listed wins a shared column.
MARKS: Final = {
    PREEMPTION: ("x", "preempted"),
    RUN_ENDED: ("]", "mark"),
    END: ("]", "mark"),
    STARTS: ("*", "estimate"),
    EXPECTED: ("*", "estimate"),
    START_AT: ("[", "mark"),
    MAINTENANCE: ("m", "maintenance"),
}
NOW: Final = ("|", "now")
GOES_ON: Final = ">"
LEGEND: Final = (
    "# held",
    "= queued",
    ". waiting for quota or a cap",
    "_ suspended/failed, still counted",
    "~ queue wait (estimate)",
    "+ held (estimate)",
    "x preempted",
    "] scheduled end",
    "[ start_at",
    "* estimated start",
    "m maintenance",
    "> goes on",
    "| now",
)
#: Tick spacings to choose from: the smallest that leaves room for a label wins.
STEPS: Final = (
    300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 2 * 86400, 7 * 86400,
)  # fmt: skip
LABEL: Final = 5  # "HH:MM" or "MM-DD"

Cell = tuple[str, str]  # (text, style name: "" for none)
Line = list[Cell]


def _when(moment: float, fmt: str = "%m-%d %H:%M") -> str:
    return _dt.datetime.fromtimestamp(moment, _dt.UTC).strftime(fmt)


def _in(seconds: float) -> str:
    return "now" if seconds <= 0 else f"in {format_duration(seconds)}"


class _Axis:
    """Columns over ``[start, end]``: which column a moment falls in."""

    def __init__(self, start: float, end: float, columns: int) -> None:
        self.start, self.end, self.columns = start, end, columns
        self.step = (end - start) / columns

    def column(self, moment: float) -> int | None:
        if moment < self.start or moment > self.end:
            return None
        return min(int((moment - self.start) / self.step), self.columns - 1)

    def cells(self, row: Row, as_of: float) -> Line:
        out: Line = [(" ", "")] * self.columns
        for i in range(self.columns):
            lo, hi = self.start + i * self.step, self.start + (i + 1) * self.step
            best, cover = None, 0.0
            for s in row.spans:
                covered = min(hi, self.end if s.end is None else s.end) - max(lo, s.start)
                if covered > cover:
                    best, cover = s, covered
            if best is not None:
                out[i] = SPANS.get(best.kind, ("?", ""))
        last = self.columns - 1
        if any(_goes_on(s, self.end) for s in row.spans) and out[last][0] != " ":
            out[last] = (GOES_ON, out[last][1])
        order = list(MARKS)
        for m in sorted(
            (m for m in row.marks if m.kind in MARKS), key=lambda m: -order.index(m.kind)
        ):
            lo, hi = m.at, m.at if m.until is None else m.until
            first, last_ = self.column(max(lo, self.start)), self.column(min(hi, self.end))
            if hi < self.start or lo > self.end or first is None or last_ is None:
                continue
            for i in range(first, last_ + 1):
                out[i] = MARKS[m.kind]
        now = self.column(as_of)
        if now is not None and out[now][0] == " ":
            out[now] = NOW
        return out

    def ticks(self) -> tuple[list[tuple[int, str]], Line]:
        """The labelled tick columns and the axis line (``+`` at ticks, ``|`` at now)."""
        step = next((s for s in STEPS if s / self.step >= LABEL + 2), STEPS[-1])
        first = -(-self.start // step) * step
        labels = []
        t = first
        while t <= self.end:
            col = self.column(t)
            if col is not None:
                daily = step >= 86400 or _when(t, "%H:%M") == "00:00"
                labels.append((col, _when(t, "%m-%d" if daily else "%H:%M")))
            t += step
        line: Line = [("-", "axis")] * self.columns
        for col, _ in labels:
            line[col] = ("+", "axis")
        return labels, line


def _goes_on(s: Span, end: float) -> bool:
    return s.end is None or s.end > end


def _label_width(timeline: LabTimeline, width: int) -> int:
    names = [len(r.slot) + 2 for r in timeline.rows()]  # a group has a line of its own
    return max(10, min(max(names, default=10), width // 4, 32))


def _label(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "~"


def _name(text: str, width: int) -> str:
    """A slot's name in ``width`` columns: names of a lab differ at the end (zone, index),
    so a long one keeps its start and its end (``spot~-use1d-1``)."""
    if len(text) <= width:
        return text
    head = max(1, (width - 1) // 3)
    return text[:head] + "~" + text[len(text) - (width - 1 - head) :]


def chart(
    timeline: LabTimeline,
    width: int,
    *,
    start: float | None = None,
    end: float | None = None,
    selected: str | None = None,
) -> list[Line]:
    """The title, the axis and one line per slot, over ``[start, end]`` (default: the
    timeline's window), each at most ``width`` columns. ``selected``: a slot drawn as
    chosen (style ``selected`` on its name)."""
    width = max(MIN_WIDTH, width)
    start = timeline.since if start is None else start
    end = timeline.until if end is None else end
    name_width = _label_width(timeline, width)
    axis = _Axis(start, end, max(MIN_COLUMNS, width - name_width - 1))
    pad = " " * (name_width + 1)
    title = f"Lab timeline as of {_when(timeline.as_of)} UTC, by {timeline.by}"
    lines: list[Line] = [[(_label(title, width), "title")]]
    for note in timeline.notes:
        lines += [[(text, "note")] for text in _wrap(f"note: {note}", width)]
    span = f"{_when(start)} to {_when(end)} UTC, one column {format_duration(axis.step)}"
    lines.append([(_label(span, width), "note")])
    labels, ticks = axis.ticks()
    text = [" "] * axis.columns
    taken = -1
    for col, label in labels:
        at = min(col, axis.columns - len(label))
        if at > taken:
            text[at : at + len(label)] = label
            taken = at + len(label)
    lines.append([(pad + "".join(text).rstrip(), "axis")])
    now = axis.column(timeline.as_of)
    if now is not None:
        ticks[now] = NOW
    lines.append([(pad, ""), *ticks])
    if not timeline.groups:
        lines.append([("no slots yet: add them to desired.yaml (tpu-reconciler add-slot)", "note")])
    for group in timeline.groups:
        lines.append([(_label(group.name, width), "group")])
        for row in group.rows:
            name = f"  {_name(row.slot, name_width - 2)}".ljust(name_width + 1)
            style = "selected" if row.slot == selected else "label"
            lines.append([(name, style), *axis.cells(row, timeline.as_of)])
    return lines


def _wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, subsequent_indent="    ", break_on_hyphens=False) or [""]


def _who(row: Row) -> str:
    return f"{row.slot} ({row.owner})" if row.owner else row.slot


def scheduled(timeline: LabTimeline) -> list[tuple[float, str]]:
    """(moment, words) of every scheduled moment after ``as_of``, in time order."""
    out = []
    for row in timeline.rows():
        for m in row.marks:
            if m.at < timeline.as_of and (m.until or m.at) < timeline.as_of:
                continue
            if m.kind == END:
                words = f"{_who(row)} {end_words(m.text)}"
            elif m.kind == START_AT:
                words = f"{_who(row)} start_at: capacity not before then"
            elif m.kind == MAINTENANCE:
                until = f" to {_when(m.until)}" if m.until is not None else ""
                words = f"{_who(row)} maintenance {m.text}{until}".replace("  ", " ")
            else:
                continue
            out.append((m.at, words))
    return sorted(out)


def end_words(reason: str) -> str:
    """``released (hold_until)``, ``flex-start run ends``: a scheduled end in words."""
    return f"released ({reason})" if reason in ("hold_until", "hold_for") else reason


def end_time(at: float, as_of: float) -> str:
    """``03-02 03:00 (in 3h)``."""
    return f"{_when(at)} ({_in(at - as_of)})"


def estimate_words(row: Row, e: Estimate, as_of: float) -> str:
    """``~03-01 13:00 (in 4h), when b-1 (bob) ends (hold_for); after b-2; then ~2h in the
    queue (p50 of 14)`` or ``never: ...``."""
    if e.start is None:
        return f"never: {e.never}"
    words = f"~{end_time(e.start, as_of)}, {e.because}"
    if e.ahead:
        words += f"; after {', '.join(e.ahead)}"
    hint = row.expected_wait
    if hint is not None:
        words += f"; then ~{format_duration(hint.p50_seconds)} in the queue (p50 of {hint.samples})"
    return words


def _queued_words(row: Row, as_of: float) -> str | None:
    """``queued 1h; p50 5h5m (9 samples): ACTIVE ~03-02 04:05`` for a request in the cloud's
    queue whose place has a history."""
    hint = row.expected_wait
    queued = [s for s in row.spans if s.kind == QUEUED_SPAN and not s.estimate]
    if hint is None or not queued or queued[-1].end not in (None, as_of):
        return None
    since = row.since if row.since is not None else queued[-1].start
    waited = f"queued {format_duration(as_of - since)}"
    p50 = f"p50 {format_duration(hint.p50_seconds)} ({hint.samples} samples)"
    expected = next((m.at for m in row.marks if m.kind == EXPECTED), None)
    if expected is not None:
        return f"{waited}; {p50}: ACTIVE ~{_when(expected)} ({_in(expected - as_of)})"
    return f"{waited}, longer than the {p50}"


def _items(items: Sequence[str], width: int) -> list[str]:
    """``items`` two spaces apart, as many to a line as fit (an item is never split)."""
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + 2 + len(item) <= width:
            lines[-1] += "  " + item
        else:
            lines.append(item)
    return lines


def waiting(timeline: LabTimeline) -> list[tuple[Row, Estimate]]:
    """The rows with an estimate, soonest first (never last)."""
    found = [(r, r.estimate) for r in timeline.rows() if r.estimate is not None]
    return sorted(found, key=lambda item: (item[1].start is None, item[1].start or 0.0))


def notes(timeline: LabTimeline, width: int) -> list[str]:
    """The words under the chart: the legend, what is scheduled, the estimates."""
    width = max(MIN_WIDTH, width)
    out = _items(LEGEND, width)
    if moments := scheduled(timeline):
        out += ["", *_wrap("Scheduled (UTC):", width)]
        for at, words in moments:
            out += _wrap(f"  {_when(at)}  {words}", width)
    if found := waiting(timeline):
        out += ["", *_wrap("Waiting for a quota or a cap (estimates, in the fair order):", width)]
        for row, e in found:
            label = (
                "next run" if e.renewal else "starts" if e.start is not None else "never starts:"
            )
            words = estimate_words(row, e, timeline.as_of).removeprefix("never: ")
            out += _wrap(f"  {_who(row)} {label} {words}", width)
    queued = [(r, w) for r in timeline.rows() if (w := _queued_words(r, timeline.as_of))]
    if queued:
        out += ["", *_wrap("Queued for capacity (the history's expected wait):", width)]
        for row, words in queued:
            out += _wrap(f"  {_who(row)} {words}", width)
    return out


def format_timeline(timeline: LabTimeline, width: int = 80) -> str:
    """``tpu-reconciler timeline``: the chart and the words under it."""
    lines = plain(chart(timeline, width))
    return "\n".join([*lines, "", *notes(timeline, width)]) + "\n"


def plain(lines: Sequence[Line]) -> list[str]:
    """The text of styled lines (trailing blanks dropped)."""
    return ["".join(text for text, _ in line).rstrip() for line in lines]


# --- JSON --------------------------------------------------------------------------------------


def _time(moment: float | None) -> str | None:
    return None if moment is None else utc_text(moment)


def _estimate_doc(e: Estimate, row: Row, as_of: float) -> dict[str, Any]:
    wait = row.expected_wait.p50_seconds if row.expected_wait is not None else None
    return {
        "estimate": True,
        "waits_on": e.waits_on,
        "earliest_start": _time(e.start),
        "in_seconds": None if e.start is None else round(max(0.0, e.start - as_of)),
        "never": e.never,
        "because": e.because or None,
        "ahead": list(e.ahead),
        "expected_active": None if e.start is None or wait is None else _time(e.start + wait),
        "renewal": e.renewal,
    }


def _row_doc(row: Row, as_of: float) -> dict[str, Any]:
    hint = row.expected_wait
    return {
        "name": row.slot,
        "owner": row.owner,
        "zone": row.zone,
        "accelerator": row.accelerator,
        "mode": row.mode,
        "api": row.api,
        "chips": row.chips,
        "state": row.state,
        "managed": row.managed,
        "quota": row.limit,
        "ends_at": _time(row.ends_at),
        "end_reason": row.end_reason,
        "expected_wait": None
        if hint is None
        else {"p50_seconds": round(hint.p50_seconds, 1), "samples": hint.samples},
        "estimate": None if row.estimate is None else _estimate_doc(row.estimate, row, as_of),
        "spans": [
            {"kind": s.kind, "start": _time(s.start), "end": _time(s.end), "estimate": s.estimate}
            for s in row.spans
        ],
        "marks": [
            {"kind": m.kind, "at": _time(m.at), "until": _time(m.until), "text": m.text}
            for m in row.marks
        ],
    }


def timeline_doc(timeline: LabTimeline) -> dict[str, Any]:
    """``timeline --json`` (``tpu-reconciler.timeline.v1``) and the MCP ``timeline`` tool."""
    t = timeline
    return {
        "schema_version": SCHEMA,
        "as_of": utc_text(t.as_of),
        "since": utc_text(t.since),
        "until": utc_text(t.until),
        "by": t.by,
        "notes": list(t.notes),
        "groups": [{"name": g.name, "slots": [r.slot for r in g.rows]} for g in t.groups],
        "slots": [_row_doc(r, t.as_of) for r in t.rows()],
    }
