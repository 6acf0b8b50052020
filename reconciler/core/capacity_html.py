"""The capacity history as one self-contained HTML page: ``history --html FILE``.

Three inline SVG charts of ``core.capacity_chart``'s series (waits by zone, chips held,
preemptions per UTC day) and the zone rankings ``recommend`` prints (one table per
accelerator and mode), for sharing with a team. Nothing is fetched when the page is opened:
no script, no external stylesheet, font or image (one inline ``<style>``, system fonts), and
the page says so in its Content-Security-Policy. Every text from the history (zone names,
accelerators, the filters) is escaped; the SVG is written by hand.

May: build text. May not: do I/O, read a clock (``until`` and ``generated`` are given), or
print.
"""

from __future__ import annotations

import datetime as _dt
import html
from collections.abc import Mapping, Sequence
from typing import Any, Final

from reconciler.core.capacity_chart import (
    Charts,
    Timeline,
    axis_label,
    charts,
    peak,
    utc_date,
    zone_line,
)
from reconciler.model.durations import format_duration
from reconciler.model.times import utc_text

BINS: Final = 120
WIDTH: Final = 760
HEIGHT: Final = 240
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 36
#: Distinguishable on white and for most colour blindness (Okabe-Ito), then greys.
COLOURS: Final = ("#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#f0e442",
                  "#000000", "#666666", "#999999")  # fmt: skip

STYLE: Final = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em auto; max-width: 800px; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
svg { display: block; background: #fff; border: 1px solid #ddd; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
.axis { stroke: #888; stroke-width: 1; } .grid { stroke: #eee; stroke-width: 1; }
table { border-collapse: collapse; margin: .5em 0 1em; }
th, td { border-bottom: 1px solid #ddd; padding: .2em .8em; text-align: left; }
td.n { text-align: right; } .note { color: #666; } ul.legend { list-style: none; padding: 0; }
.swatch { display: inline-block; width: .9em; height: .9em; margin-right: .4em; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _n(value: float) -> str:
    """A coordinate: two decimals at most, no ``-0``."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


class _Plot:
    """The drawing area of one chart: maps (bin, value) to SVG coordinates."""

    def __init__(self, c: Charts, top: float) -> None:
        self.c, self.top = c, top if top > 0 else 1.0
        self.w, self.h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(self, bin_: float) -> float:
        return LEFT + bin_ / self.c.bins * self.w

    def y(self, value: float) -> float:
        return TOP + self.h - value / self.top * self.h

    def frame(self, label: Any, dates: Sequence[tuple[float, str, str]] | None = None) -> list[str]:
        """Axes, three horizontal grid lines with their labels, and under the x axis
        ``dates`` (x, anchor, text), by default the window's start, middle and end."""
        out = []
        for k in range(3):
            value = self.top * k / 2
            y = _n(self.y(value))
            out.append(f'<line class="grid" x1="{LEFT}" y1="{y}" x2="{WIDTH - RIGHT}" y2="{y}"/>')
            out.append(
                f'<text x="{LEFT - 6}" y="{y}" text-anchor="end" dominant-baseline="middle">'
                f"{_e(label(value))}</text>"
            )
        base = _n(self.y(0))
        out.append(f'<line class="axis" x1="{LEFT}" y1="{base}" x2="{WIDTH - RIGHT}" y2="{base}"/>')
        out.append(f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{base}"/>')
        span = self.c.end - self.c.start
        fmt = "%Y-%m-%d" if span >= 3 * 86400 else "%m-%d %H:%M"
        if dates is None:
            dates = [
                (
                    LEFT + self.w * k / 2,
                    anchor,
                    _dt.datetime.fromtimestamp(self.c.start + span * k / 2, _dt.UTC).strftime(fmt),
                )
                for k, anchor in ((0, "start"), (1, "middle"), (2, "end"))
            ]
        for x, anchor, text in dates:
            out.append(
                f'<text x="{_n(x)}" y="{HEIGHT - BOTTOM + 16}" text-anchor="{anchor}">'
                f"{_e(text)}</text>"
            )
        return out


def _svg(ident: str, title: str, body: Sequence[str]) -> str:
    return "\n".join(
        [
            f'<svg id="{_e(ident)}" xmlns="http://www.w3.org/2000/svg" role="img" '
            f'width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}">',
            f"<title>{_e(title)}</title>",
            *body,
            "</svg>",
        ]
    )


def _duration(value: float) -> str:
    return axis_label(value, duration=True)


def _count(value: float) -> str:
    return axis_label(value, duration=False)


def waits_svg(c: Charts) -> str:
    """One line (and dots) per zone through the bins that have a served wait."""
    plot = _Plot(c, max((peak(z.values) for z in c.waits), default=0.0))
    body = plot.frame(_duration)
    for i, z in enumerate(c.waits):
        colour = COLOURS[i % len(COLOURS)]
        points = [(b + 0.5, v) for b, v in enumerate(z.values) if v is not None]
        coords = " ".join(f"{_n(plot.x(b))},{_n(plot.y(v))}" for b, v in points)
        body.append(f'<g class="zone" data-zone="{_e(z.zone)}"><title>{_e(z.zone)}</title>')
        if len(points) > 1:
            body.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{coords}"/>'
            )
        body += [
            f'<circle cx="{_n(plot.x(b))}" cy="{_n(plot.y(v))}" r="2.5" fill="{colour}"/>'
            for b, v in points
        ]
        body.append("</g>")
    return _svg("waits-chart", "Wait to ACTIVE by zone", body)


def chips_svg(c: Charts) -> str:
    """The average chips held per bin, as a filled step area."""
    plot = _Plot(c, peak(c.chips))
    body = plot.frame(_count)
    base = plot.y(0)
    edge = [f"{_n(plot.x(0))},{_n(base)}"]
    for b, v in enumerate(c.chips):
        y = _n(plot.y(v))
        edge += [f"{_n(plot.x(b))},{y}", f"{_n(plot.x(b + 1))},{y}"]
    edge.append(f"{_n(plot.x(c.bins))},{_n(base)}")
    body.append(
        f'<polygon fill="#56b4e9" fill-opacity="0.6" stroke="#0072b2" points="{" ".join(edge)}"/>'
    )
    return _svg("chips-chart", "Chips held", body)


def preemptions_svg(c: Charts) -> str:
    """One bar per UTC day."""
    days = c.preemptions
    plot = _Plot(c, float(max((n for _, n in days), default=0)))
    slot = plot.w / max(1, len(days))
    ends = [(LEFT + slot / 2, "middle", days[0][0])] if days else []
    if len(days) > 1:  # the first and the last day, under their bars
        ends = [(LEFT, "start", days[0][0]), (LEFT + plot.w, "end", days[-1][0])]
    body = plot.frame(_count, ends)
    for k, (day, n) in enumerate(days):
        if n == 0:
            continue
        x, y = LEFT + k * slot + slot * 0.1, plot.y(n)
        body.append(
            f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(slot * 0.8)}" '
            f'height="{_n(plot.y(0) - y)}" fill="#d55e00"><title>{_e(day)}: {n}</title></rect>'
        )
    return _svg("preemptions-chart", "Preemptions per day", body)


def _legend(c: Charts) -> str:
    items = [
        f'<li><span class="swatch" style="background:{COLOURS[i % len(COLOURS)]}"></span>'
        f"{_e(z.zone)}: {_e(zone_line(z))}</li>"
        for i, z in enumerate(c.waits)
    ]
    return '<ul class="legend">' + "".join(items) + "</ul>"


def _ranking(doc: Mapping[str, Any]) -> list[str]:
    """One ``recommend`` document as a table (the same order and figures ``recommend``
    prints)."""
    out = [f"<h3>{_e(doc['accelerator'])} ({_e(doc['mode'])})</h3>"]
    zones = doc.get("zones") or []
    if not zones:
        out.append('<p class="note">no history for this accelerator and mode yet</p>')
    else:
        out.append(
            "<table><tr><th>#</th><th>zone</th><th>expected wait</th><th>samples</th>"
            "<th>gave up</th><th>median lifetime</th><th>preemptions/day</th></tr>"
        )
        for i, z in enumerate(zones, 1):
            wait, life = z["expected_wait_seconds"], z["median_lifetime_seconds"]
            per_day = z["preemptions_per_day"]
            cells = (
                str(i),
                z["zone"],
                f"~{format_duration(wait)}" if wait is not None else "never served yet",
                str(z["samples"]),
                str(z["unserved"]),
                format_duration(life) if life is not None else "-",
                "-" if per_day is None else f"{per_day:.2f}",
            )
            out.append(
                "<tr>"
                + "".join(
                    f'<td class="n">{_e(v)}</td>' if k in (0, 3, 4, 6) else f"<td>{_e(v)}</td>"
                    for k, v in enumerate(cells)
                )
                + "</tr>"
            )
        out.append("</table>")
    if doc.get("closed"):
        closed = ", ".join(doc["closed"])
        out.append(f"<p>Left out (queue closed to this project): {_e(closed)}</p>")
    if doc.get("untried"):
        out.append(f"<p>No history yet, known to offer it: {_e(', '.join(doc['untried']))}</p>")
    return out


def format_html(
    timeline: Timeline,
    rankings: Sequence[Mapping[str, Any]],
    *,
    until: float,
    since: float | None = None,
    generated: float | None = None,
    filters: Mapping[str, str] | None = None,
    lab: str = "",
) -> str:
    """The page: the three charts over ``[since or the oldest record, until]`` and the
    ``rankings`` (``tpu-reconciler.recommend.v1`` documents); ``lab``, the lab's
    timeline section (``core.timeline_svg.section``), after them."""
    asked = ", ".join(f"{k}={v}" for k, v in (filters or {}).items() if v)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>tpu-reconciler capacity history</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>Capacity history</h1>",
    ]
    if timeline.empty():
        parts.append(
            '<p class="note">'
            + (
                _e(f"No capacity history matches {asked}.")
                if asked
                else "No capacity history yet (the controller records it while it runs)."
            )
            + "</p>"
        )
    else:
        c = charts(timeline, until=until, since=since, bins=BINS)
        note = f"{utc_text(c.start)} to {utc_text(c.end)}" + (f"; {asked}" if asked else "")
        if generated is not None:
            note += f"; generated {utc_text(generated)}"
        parts.append(f'<p class="note">{_e(note)}</p>')
        parts.append("<h2>Wait to ACTIVE by zone</h2>")
        parts.append(
            '<p class="note">The median wait of the requests queued at that time and served.</p>'
        )
        if not any(peak(z.values) > 0 for z in c.waits):
            parts.append('<p class="note">No request got capacity in this window.</p>')
        parts += [waits_svg(c), _legend(c)]
        parts.append("<h2>Chips held</h2>")
        parts.append(f'<p class="note">Average per interval; {c.chips_now} held at the end.</p>')
        parts.append(chips_svg(c))
        total = sum(n for _, n in c.preemptions)
        first, last = utc_date(c.start), utc_date(c.end)
        parts.append("<h2>Preemptions per day</h2>")
        parts.append(f'<p class="note">{_e(f"UTC days {first} to {last}; {total} in all.")}</p>')
        parts.append(preemptions_svg(c))
    if lab:
        parts.append(lab)
    parts.append("<h2>Zones ranked by expected time to capacity</h2>")
    if not rankings:
        parts.append('<p class="note">Nothing to rank yet.</p>')
    for doc in rankings:
        parts += _ranking(doc)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
