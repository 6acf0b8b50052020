"""The capacity history over time, as series a picture can draw: waits by zone, chips held,
preemptions per day.

The history store hands this module a ``Timeline``: every queued request's wait (when it was
queued, how long it waited, whether it got capacity) and every node instance's holding (from
READY until preempted or deleted, or still held). ``charts`` cuts a window ``[start, until]``
into equal bins and computes, per bin:

- **waits by zone**: the median wait to ACTIVE of the requests queued in that bin and served
  (a bin with none is empty); each zone also counts the requests that gave up or still wait;
- **chips held**: the average number of chips held during the bin (chip-seconds held inside
  the bin over its length), so a short holding counts for the part of the bin it covers;

and, per UTC day of the window, the **preemptions** (holdings that ended preempted that day).

The window ends at ``until`` (the caller's now, or a time it was given: the same history and
``until`` give the same series); it starts at ``since`` or at the oldest record. Records
outside the window are left out; a holding that began before it counts from its start.

May: compute. May not: do I/O, read a clock (``until`` is given), or draw.
"""

from __future__ import annotations

import datetime as _dt
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from reconciler.core.capacity import median
from reconciler.core.history import RequestTrack
from reconciler.errors import UnsafeName
from reconciler.model import multislice
from reconciler.model.capacity import DEFAULT_API
from reconciler.model.durations import format_duration

DAY: Final = 86400.0
#: The shortest window drawn: one point in time still gets an hour around it.
MIN_SPAN: Final = 3600.0

SERVED: Final = "served"
GAVE_UP: Final = "gave up"
WAITING: Final = "waiting"


@dataclass(frozen=True, slots=True)
class WaitPoint:
    """One queued request: queued at ``queued_at``, waited ``seconds`` (to ACTIVE when
    ``outcome`` is served; else at least that long)."""

    zone: str
    accelerator: str
    mode: str
    queued_at: float
    seconds: float
    outcome: str  # SERVED | GAVE_UP | WAITING
    api: str = DEFAULT_API

    @property
    def series(self) -> str:
        """The wait chart's series it belongs to: its zone (`` (compute)`` after another
        API's: another queue)."""
        return self.zone if self.api == DEFAULT_API else f"{self.zone} ({self.api})"


@dataclass(frozen=True, slots=True)
class Holding:
    """One node instance's capacity: READY at ``start`` until ``end`` (None: still held)."""

    zone: str
    accelerator: str
    mode: str
    start: float
    end: float | None
    preempted: bool = False
    api: str = DEFAULT_API


@dataclass(frozen=True, slots=True)
class Timeline:
    waits: tuple[WaitPoint, ...] = ()
    holdings: tuple[Holding, ...] = ()

    def empty(self) -> bool:
        return not self.waits and not self.holdings


@dataclass(frozen=True, slots=True)
class ZoneWaits:
    zone: str
    values: tuple[float | None, ...]  # median served wait per bin, seconds
    served: int
    gave_up: int
    waiting: int
    median: float | None  # of every served wait in the window


@dataclass(frozen=True, slots=True)
class Charts:
    start: float
    end: float
    bins: int
    waits: tuple[ZoneWaits, ...]
    chips: tuple[float, ...]  # average chips held per bin
    chips_now: int  # chips held at ``end``
    preemptions: tuple[tuple[str, int], ...]  # (UTC date, count) per day of the window

    @property
    def step(self) -> float:
        return (self.end - self.start) / self.bins


def open_timeline(tracks: Mapping[tuple[str, str], RequestTrack], now: float) -> Timeline:
    """What the recorder's tracker still has in progress at ``now``: requests still queued
    (waiting so far) and nodes still held."""
    waits: list[WaitPoint] = []
    holdings: list[Holding] = []
    for (zone, _slot), t in sorted(tracks.items()):
        if t.queued_at is not None:
            waits.append(
                WaitPoint(
                    zone, t.accelerator, t.mode, t.queued_at, max(0.0, now - t.queued_at),
                    WAITING, t.api,
                )
            )  # fmt: skip
        if t.active_at is not None:
            holdings.append(Holding(zone, t.accelerator, t.mode, t.active_at, None, api=t.api))
    return Timeline(tuple(waits), tuple(holdings))


def merged(*timelines: Timeline) -> Timeline:
    return Timeline(
        tuple(w for t in timelines for w in t.waits),
        tuple(h for t in timelines for h in t.holdings),
    )


def narrowed(
    timeline: Timeline,
    *,
    zone: str | None = None,
    accelerator: str | None = None,
    mode: str | None = None,
    since: float | None = None,
    api: str | None = None,
) -> Timeline:
    """The waits queued and holdings going on at or after ``since`` in the places that pass
    the filters (a filter left None passes everything)."""
    wanted = (zone, accelerator, mode, api)

    def fits(p: WaitPoint | Holding) -> bool:
        got = (p.zone, p.accelerator, p.mode, p.api)
        return all(w is None or w == v for w, v in zip(wanted, got, strict=True))

    return Timeline(
        tuple(w for w in timeline.waits if fits(w) and (since is None or w.queued_at >= since)),
        tuple(
            h
            for h in timeline.holdings
            if fits(h) and (since is None or h.end is None or h.end >= since)
        ),
    )


@functools.lru_cache(maxsize=256)
def chips_of(accelerator: str) -> int:
    """Chips of a place's accelerator (every slice of a multislice ``2xv6e-64``); 0 for one the
    history could not name (``?``)."""
    try:
        return multislice.chips(*multislice.split_place(accelerator))
    except UnsafeName:
        return 0


def window(timeline: Timeline, until: float, since: float | None = None) -> tuple[float, float]:
    """``[start, until]``: from ``since``, else from the oldest record, at least ``MIN_SPAN``."""
    if since is not None:
        start = since
    else:
        times = [w.queued_at for w in timeline.waits] + [h.start for h in timeline.holdings]
        times = [t for t in times if t <= until]
        start = min(times) if times else until - DAY
    return (min(start, until - MIN_SPAN), until)


def bin_of(moment: float, start: float, end: float, bins: int) -> int | None:
    """The bin holding ``moment`` (the last bin includes ``end``); None outside the window."""
    if moment < start or moment > end:
        return None
    return min(int((moment - start) / (end - start) * bins), bins - 1)


def wait_series(
    waits: Iterable[WaitPoint], start: float, end: float, bins: int
) -> tuple[ZoneWaits, ...]:
    """Per zone (by name; a zone of another API than the TPU API's is a series of its own,
    ``us-central1-a (compute)``), the median served wait of the requests queued in each bin."""
    served: dict[str, list[list[float]]] = {}
    counts: dict[str, dict[str, int]] = {}
    every: dict[str, list[float]] = {}
    for w in waits:
        i = bin_of(w.queued_at, start, end, bins)
        if i is None:
            continue
        zone = w.series
        per = counts.setdefault(zone, {SERVED: 0, GAVE_UP: 0, WAITING: 0})
        per[w.outcome] = per.get(w.outcome, 0) + 1
        cells = served.get(zone)
        if cells is None:
            cells = served[zone] = [[] for _ in range(bins)]
        if w.outcome == SERVED:
            cells[i].append(w.seconds)
            every.setdefault(zone, []).append(w.seconds)
    return tuple(
        ZoneWaits(
            zone=zone,
            values=tuple(median(cell) for cell in served[zone]),
            served=counts[zone][SERVED],
            gave_up=counts[zone][GAVE_UP],
            waiting=counts[zone][WAITING],
            median=median(every.get(zone, ())),
        )
        for zone in sorted(served)
    )


def chips_series(
    holdings: Iterable[Holding], start: float, end: float, bins: int
) -> tuple[float, ...]:
    """The average chips held in each bin (a still-held node counts until ``end``)."""
    step = (end - start) / bins
    out = [0.0] * bins
    for h in holdings:
        chips = chips_of(h.accelerator)
        first, last = max(h.start, start), min(end if h.end is None else h.end, end)
        if chips == 0 or last <= first:
            continue
        i = min(int((first - start) / step), bins - 1)
        while i < bins:
            lo, hi = start + i * step, start + (i + 1) * step
            covered = min(hi, last) - max(lo, first)
            if covered > 0:
                out[i] += chips * covered / step
            if hi >= last:
                break
            i += 1
    return tuple(out)


def utc_date(moment: float) -> str:
    """``2026-02-29``: the UTC calendar date of an epoch second (before 1970 too)."""
    day = int(moment // DAY)
    return (_dt.date(1970, 1, 1) + _dt.timedelta(days=day)).isoformat()


def preemptions_per_day(
    holdings: Iterable[Holding], start: float, end: float
) -> tuple[tuple[str, int], ...]:
    """(UTC date, preemptions that day) for every day of ``[start, end]``, zeros included."""
    first, last = int(start // DAY), int(end // DAY)
    counts = dict.fromkeys(range(first, last + 1), 0)
    for h in holdings:
        if h.preempted and h.end is not None and start <= h.end <= end:
            counts[int(h.end // DAY)] += 1
    return tuple((utc_date(day * DAY), n) for day, n in sorted(counts.items()))


def charts(
    timeline: Timeline, *, until: float, since: float | None = None, bins: int = 60
) -> Charts:
    """The three series of ``timeline`` over ``[since or oldest record, until]``."""
    if bins < 1:
        raise ValueError(f"bins must be at least 1, got {bins}")
    start, end = window(timeline, until, since)
    held_now = sum(
        chips_of(h.accelerator)
        for h in timeline.holdings
        if h.start <= end and (h.end is None or h.end > end)
    )
    return Charts(
        start=start,
        end=end,
        bins=bins,
        waits=wait_series(timeline.waits, start, end, bins),
        chips=chips_series(timeline.holdings, start, end, bins),
        chips_now=held_now,
        preemptions=preemptions_per_day(timeline.holdings, start, end),
    )


def zone_line(z: ZoneWaits) -> str:
    """``14 served, median 2h10m, 2 gave up, 1 waiting`` (a legend's words for a zone)."""
    parts = [f"{z.served} served"]
    if z.median is not None:
        parts.append(f"median {format_duration(z.median)}")
    if z.gave_up:
        parts.append(f"{z.gave_up} gave up")
    if z.waiting:
        parts.append(f"{z.waiting} waiting")
    return ", ".join(parts)


def axis_label(value: float, *, duration: bool) -> str:
    """A y-axis label: a duration (``2h10m``) or a count (``12``, ``2.5``); ``0`` for zero."""
    if duration:
        return format_duration(value) if value > 0 else "0"
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def peak(values: Sequence[float | None]) -> float:
    return max((v for v in values if v is not None), default=0.0)
