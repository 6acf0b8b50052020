"""The lab's timeline as a section of the ``history --html`` page: one inline SVG (no script,
nothing fetched) with a row per slot under its group, the spans in colour (estimates paler and
dashed), the marks, the UTC axis and a line at ``as_of``; then the legend, what is scheduled and
the estimates in words, as ``timeline`` prints them. Every text is escaped.

May: build text. May not: do I/O, read a clock (``as_of`` is the timeline's), or print.
"""

from __future__ import annotations

import datetime as _dt
import html
from typing import Final

from reconciler.core.timeline import END, EXPECTED, MAINTENANCE, START_AT, STARTS, LabTimeline, Row
from reconciler.core.timeline_past import (
    DEAD,
    EST_HELD,
    EST_QUEUED,
    HELD,
    PREEMPTION,
    QUEUED_SPAN,
    RUN_ENDED,
    WAITING,
)
from reconciler.core.timeline_text import STEPS, estimate_words, scheduled, waiting

WIDTH: Final = 760
LEFT: Final = 170  # the slot names
RIGHT: Final = 12
TOP: Final = 28  # the axis labels
ROW: Final = 18
GROUP: Final = 20
#: Okabe-Ito colours (distinguishable for most colour blindness), by span kind.
FILL: Final = {
    HELD: "#009e73",
    QUEUED_SPAN: "#e69f00",
    WAITING: "#cc79a7",
    DEAD: "#999999",
    EST_QUEUED: "#e69f00",
    EST_HELD: "#009e73",
}
WORDS: Final = {
    HELD: "held",
    QUEUED_SPAN: "queued",
    WAITING: "waiting for quota or a cap",
    DEAD: "suspended, failed or being deleted (still counted)",
    EST_QUEUED: "expected queue wait (estimate)",
    EST_HELD: "held (estimate)",
}
PREEMPTED: Final = "#d55e00"
ESTIMATE: Final = ' fill-opacity="0.35" stroke-dasharray="3 2"'


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _n(value: float) -> str:
    text = f"{value:.1f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _when(moment: float, fmt: str = "%m-%d %H:%M") -> str:
    return _dt.datetime.fromtimestamp(moment, _dt.UTC).strftime(fmt)


class _X:
    def __init__(self, start: float, end: float) -> None:
        self.start, self.end = start, end
        self.width = WIDTH - LEFT - RIGHT

    def __call__(self, moment: float) -> float:
        clipped = min(max(moment, self.start), self.end)
        return LEFT + (clipped - self.start) / (self.end - self.start) * self.width


def _axis(x: _X, bottom: float) -> list[str]:
    step = next((s for s in STEPS if s / (x.end - x.start) * x.width >= 56), STEPS[-1])
    out = ['<g class="tl-axis">']
    t = -(-x.start // step) * step
    while t <= x.end:
        daily = step >= 86400 or _when(t, "%H:%M") == "00:00"
        at = _n(x(t))
        out.append(f'<line x1="{at}" y1="{TOP - 4}" x2="{at}" y2="{_n(bottom)}" stroke="#eee"/>')
        label = _when(t, "%m-%d" if daily else "%H:%M")
        out.append(f'<text x="{at}" y="{TOP - 8}" text-anchor="middle">{label}</text>')
        t += step
    out.append("</g>")
    return out


def _row(row: Row, x: _X, y: float, as_of: float) -> list[str]:
    out = [
        f'<g class="tl-row slot" data-slot="{_e(row.slot)}">',
        f"<title>{_e(_tooltip(row, as_of))}</title>",
        f'<text x="{LEFT - 6}" y="{_n(y + ROW / 2)}" text-anchor="end" '
        f'dominant-baseline="middle">{_e(row.slot)}</text>',
    ]
    for s in row.spans:
        end = x.end if s.end is None else s.end
        if end < x.start or s.start > x.end:
            continue
        left, right = x(s.start), x(end)
        colour = FILL.get(s.kind, "#666666")
        extra = f' stroke="{colour}"{ESTIMATE}' if s.estimate else ""
        out.append(
            f'<rect x="{_n(left)}" y="{_n(y + 3)}" width="{_n(max(1.0, right - left))}" '
            f'height="{ROW - 6}" fill="{colour}"{extra}><title>{_e(WORDS.get(s.kind, s.kind))}: '
            f"{_when(s.start)} to {_e(_when(s.end) if s.end else 'on')}</title></rect>"
        )
    for m in row.marks:
        if (m.until or m.at) < x.start or m.at > x.end:
            continue
        out.append(_mark(m.kind, m.at, m.until, m.text, x, y))
    out.append("</g>")
    return out


def _mark(kind: str, at: float, until: float | None, text: str, x: _X, y: float) -> str:
    cx = _n(x(at))
    title = f"<title>{_e(kind)} {_when(at)}{(' ' + _e(text)) if text else ''}</title>"
    if kind in (PREEMPTION,):
        return f'<path d="M{cx} {_n(y + 2)} l-4 -0 l4 7 l4 -7 z" fill="{PREEMPTED}">{title}</path>'
    if kind == MAINTENANCE:
        right = x(until) if until is not None else x(at) + 3
        return (
            f'<rect x="{cx}" y="{_n(y + 1)}" width="{_n(max(2.0, right - x(at)))}" '
            f'height="{ROW - 2}" fill="none" stroke="#000" stroke-dasharray="2 2">{title}</rect>'
        )
    if kind in (END, RUN_ENDED, START_AT):
        return (
            f'<line x1="{cx}" y1="{_n(y + 1)}" x2="{cx}" y2="{_n(y + ROW - 1)}" '
            f'stroke="#000" stroke-width="2">{title}</line>'
        )
    if kind in (STARTS, EXPECTED):
        return f'<circle cx="{cx}" cy="{_n(y + ROW / 2)}" r="3" fill="#000">{title}</circle>'
    return ""


def _tooltip(row: Row, as_of: float) -> str:
    parts = [row.slot]
    if row.owner:
        parts.append(f"owner {row.owner}")
    parts += [p for p in (row.accelerator, row.zone, row.state) if p]
    if row.estimate is not None:
        parts.append("starts " + estimate_words(row, row.estimate, as_of))
    return ", ".join(parts)


def svg(timeline: LabTimeline) -> str:
    """The chart: rows under their groups over ``[since, until]``, a line at ``as_of``."""
    x = _X(timeline.since, timeline.until)
    height = TOP + sum(GROUP + ROW * len(g.rows) for g in timeline.groups) + 8
    body: list[str] = []
    y = float(TOP)
    for group in timeline.groups:
        body.append(
            f'<text font-weight="bold" x="4" y="{_n(y + GROUP - 6)}">{_e(group.name)}</text>'
        )
        y += GROUP
        for row in group.rows:
            body += _row(row, x, y, timeline.as_of)
            y += ROW
    now = _n(x(timeline.as_of))
    if timeline.since <= timeline.as_of <= timeline.until:
        body.append(
            f'<line id="tl-now" x1="{now}" y1="{TOP - 4}" x2="{now}" y2="{_n(y)}" '
            'stroke="#000" stroke-dasharray="4 3"><title>now (as of the snapshot)</title></line>'
        )
    return "\n".join(
        [
            f'<svg id="timeline-chart" xmlns="http://www.w3.org/2000/svg" role="img" '
            f'width="{WIDTH}" height="{_n(height)}" viewBox="0 0 {WIDTH} {_n(height)}">',
            "<title>Who holds what, when</title>",
            *_axis(x, y),
            *body,
            "</svg>",
        ]
    )


def section(timeline: LabTimeline) -> str:
    """The page's section: heading, note, the chart, the legend and the words under it."""
    t = timeline
    note = (
        f"As of {_when(t.as_of)} UTC (the controller's last snapshot), {_when(t.since)} to "
        f"{_when(t.until)} UTC, by {t.by}; the dashed line is now."
    )
    parts = [
        "<h2>Who holds what, when</h2>",
        f'<p class="note">{_e(note)}</p>',
        *(f'<p class="note">{_e(n)}</p>' for n in t.notes),
    ]
    if not t.groups:
        parts.append('<p class="note">No slots yet.</p>')
        return "\n".join(parts)
    parts.append(svg(t))
    items = [
        f'<li><span class="swatch" style="background:{FILL[k]}'
        f'{";opacity:.4" if k in (EST_HELD, EST_QUEUED) else ""}"></span>{_e(w)}</li>'
        for k, w in WORDS.items()
    ]
    items.append(f'<li><span class="swatch" style="background:{PREEMPTED}"></span>preempted</li>')
    items.append("<li>| a scheduled end or start_at, • an estimated start, ▭ maintenance</li>")
    parts.append('<ul class="legend">' + "".join(items) + "</ul>")
    moments = scheduled(t)
    if moments:
        parts.append("<h3>Scheduled (UTC)</h3><ul>")
        parts += [f"<li>{_e(_when(at))} {_e(words)}</li>" for at, words in moments]
        parts.append("</ul>")
    if found := waiting(t):
        parts.append("<h3>Waiting for a quota or a cap (estimates)</h3><ul>")
        for row, e in found:
            owner = f" ({row.owner})" if row.owner else ""
            words = ("next run " if e.renewal else "") + estimate_words(row, e, t.as_of)
            parts.append(f"<li>{_e(row.slot + owner)}: {_e(words)}</li>")
        parts.append("</ul>")
    return "\n".join(parts)
