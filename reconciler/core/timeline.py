"""The lab's timeline: who holds what, when — past, now and scheduled — as one value that the
text (``core.timeline_text``), the page (``core.timeline_svg``), the JSON and the TUI draw.

Made from what the surfaces already read, never from the cloud: the controller's status
snapshot (each slot's state and since when, its scheduled release ``releases_at``, a flex-start
run's end ``ends_at``, its node's maintenance window, the quota it waits on, the limits and
their use), the desired file (holds in time, flex-start runs, members' caps and priorities,
file order) and the capacity history (each request's past states, ``core.timeline_past``, and
the expected queue wait per place, ``core.capacity.wait_hints``).

One ``Row`` per slot (managed, unmanaged, or gone from the file but in the window's history),
grouped by owner, zone or quota (``BY``). A row's spans: the past from the history, the
present from the snapshot up to ``as_of`` (the moment the snapshot was made: the picture is as
the controller last saw it), the scheduled future (held until its release or its run's end,
a suspended request still counted after a flex-start run) and, for a slot whose create waits
for a quota or a member's cap, the estimate of ``core.timeline_estimate`` (waiting, then the
history's expected queue wait, then held until its own end), marked as an estimate.

May: compute. May not: do I/O, read a clock (``as_of`` is given), or draw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from reconciler.core import timeline_estimate as est
from reconciler.core.capacity import Place, WaitHint
from reconciler.core.capacity_chart import chips_of as place_chips
from reconciler.core.history import StateOf
from reconciler.core.quota import limit_words
from reconciler.core.timeline_facts import (
    FLEX_END,
    RELEASING,
    WAITING_STATES,
    Facts,
    counted,
    end_of,
    estimates,
    need_of,
    run_seconds,
    snapshot_limits,
)
from reconciler.core.timeline_past import (
    DEAD,
    EST_HELD,
    EST_QUEUED,
    QUEUED_SPAN,
    WAITING,
    Mark,
    Past,
    Span,
    kind_of,
)
from reconciler.model.accelerators import TPU_API
from reconciler.model.desired import Desired, QuotaSpec, SlotSpec
from reconciler.model.durations import format_duration, parse_duration
from reconciler.model.stamps import epoch_or_none
from reconciler.model.status import SlotStatus, StatusSnapshot
from reconciler.model.times import parse_instant, utc_text

SCHEMA: Final = "tpu-reconciler.timeline.v1"
BY: Final = ("owner", "zone", "quota")
NO_OWNER: Final = "(no owner)"
NO_LIMIT: Final = "(no chip limit)"
HOUR: Final = 3600.0
#: The default window: at least this far ahead, at most a week; half as far back.
MIN_AHEAD: Final = 6 * HOUR
MAX_AHEAD: Final = 7 * 86400.0

# Marks on a row.
END: Final = "end"  # a scheduled end: hold_until, hold_for, a flex-start run's end
START_AT: Final = "start_at"  # capacity not before this (start_at)
MAINTENANCE: Final = "maintenance"
STARTS: Final = "starts"  # an estimated start
EXPECTED: Final = "expected"  # the history's expected ACTIVE for a queued request


@dataclass(frozen=True, slots=True)
class Row:
    """One slot's line. ``limit``: the first chip limit its chips count under; ``ends_at``
    and ``end_reason``: its scheduled end; ``estimate``: when a waiting create can go."""

    slot: str
    owner: str | None
    zone: str | None
    accelerator: str | None
    mode: str | None
    chips: int
    state: str | None
    managed: bool
    spans: tuple[Span, ...] = ()
    marks: tuple[Mark, ...] = ()
    limit: str | None = None
    ends_at: float | None = None
    end_reason: str | None = None
    estimate: est.Estimate | None = None
    expected_wait: WaitHint | None = None
    since: float | None = None  # in its present state since (the snapshot's ``state_since``)
    note: str = ""
    api: str = TPU_API  # the API that holds it ("tpu", "compute")


@dataclass(frozen=True, slots=True)
class Group:
    name: str
    rows: tuple[Row, ...]


@dataclass(frozen=True, slots=True)
class LabTimeline:
    """The picture: ``[since, until]`` around ``as_of``, rows grouped ``by``, and notes on
    what it rests on (no controller, no observation, an invalid file)."""

    as_of: float
    since: float
    until: float
    by: str
    groups: tuple[Group, ...]
    notes: tuple[str, ...] = ()

    def rows(self) -> list[Row]:
        return [r for g in self.groups for r in g.rows]


def limit_label(spec: QuotaSpec) -> str:
    """``spot v6e chips in europe-west4-a`` (`` on Compute Engine`` after that API's)."""
    return limit_words(spec)


# --- rows ------------------------------------------------------------------------------------


def _own_end(spec: SlotSpec | None, active: float) -> float | None:
    """When a slot that is ACTIVE from ``active`` on is released or its run ends."""
    if spec is None:
        return None
    run = run_seconds(spec)
    ends = [t for t in (spec.hold.hold_until, active + run if run else None) if t is not None]
    return max(active, min(ends)) if ends else None


def _active(spec: SlotSpec | None, sent: float, hint: WaitHint | None) -> float:
    """When a request sent at ``sent`` is expected ACTIVE: after the history's queue wait, not
    before its ``start_at`` or ``start_after``."""
    wait = hint.p50_seconds if hint is not None else 0.0
    if spec is None:
        return sent + wait
    return est.active_from(sent, wait, spec.hold.start_at, spec.hold.start_after_seconds)


def _before(spans: Sequence[Span], moment: float) -> list[Span]:
    """The past spans up to ``moment`` (an open one closed there): the snapshot goes on."""
    out = []
    for s in spans:
        if s.start >= moment:
            continue
        end = moment if s.end is None else min(s.end, moment)
        out.append(replace(s, end=end))
    return out


def _merged(spans: Sequence[Span]) -> tuple[Span, ...]:
    """Spans in order, one where two of a kind meet (the history's, then the snapshot's)."""
    out: list[Span] = []
    for s in spans:
        if s.end is not None and s.end <= s.start:
            continue  # nothing to draw
        prev = out[-1] if out else None
        if (
            prev is not None
            and (prev.kind, prev.estimate) == (s.kind, s.estimate)
            and prev.end == s.start
        ):
            out[-1] = replace(prev, end=s.end)
        else:
            out.append(s)
    return tuple(out)


def _estimated(
    spans: list[Span],
    marks: list[Mark],
    spec: SlotSpec | None,
    start: float,
    hint: WaitHint | None,
    why: str,
) -> None:
    """From an estimated ``start``: the expected queue wait, then held until its own end."""
    active = _active(spec, start, hint)
    if active > start:
        spans.append(Span(EST_QUEUED, start, active, estimate=True))
    spans.append(Span(EST_HELD, active, _own_end(spec, active), estimate=True))
    marks.append(Mark(STARTS, start, text=why))


def _row(
    row: SlotStatus,
    facts: Facts,
    past: Past | None,
    estimate: est.Estimate | None,
    limits: Sequence[QuotaSpec],
) -> Row:
    spec = facts.spec(row.name)
    as_of = facts.as_of
    hint = facts.hint(row)
    spans = list(past.spans) if past is not None else []
    marks = list(past.marks) if past is not None else []
    since = epoch_or_none(row.state_since)
    api = row.api or TPU_API
    kind = kind_of(row.state, facts.state_of, row.request, api) if counted(row) else None
    ends, why = end_of(row, spec) if row.managed else (None, None)
    if row.managed and row.want == "released" and kind is not None:
        ends, why = as_of, RELEASING
    if kind is not None:
        tail = spans[-1] if spans and spans[-1].end is None and spans[-1].kind == kind else None
        created = epoch_or_none(row.create_time)
        start = since if since is not None else tail.start if tail is not None else created or as_of
        spans = _before(spans, start)
        sent = epoch_or_none(row.create_time) or start
        expected = _active(spec, sent, hint) if hint is not None else None
        if kind == QUEUED_SPAN and hint is not None and expected is not None and expected > as_of:
            spans.append(Span(QUEUED_SPAN, start, as_of))
            spans.append(Span(EST_QUEUED, as_of, expected, estimate=True))
            spans.append(Span(EST_HELD, expected, _own_end(spec, expected), estimate=True))
            marks.append(Mark(EXPECTED, expected, text=_p50(hint)))
        else:
            spans.append(Span(kind, start, ends))
            if ends is not None and why is not None:
                marks.append(Mark(END, ends, text=why))
                if why == FLEX_END and estimate is not None and estimate.start is not None:
                    _estimated(spans, marks, spec, estimate.start, hint, "next run")
                elif why == FLEX_END:
                    spans.append(Span(DEAD, ends, None))
    elif row.quota is not None and row.quota.state in WAITING_STATES:
        start = since if since is not None and since <= as_of else as_of
        spans = _before(spans, start)
        if estimate is not None and estimate.start is not None:
            spans.append(Span(WAITING, start, estimate.start))
            _estimated(spans, marks, spec, estimate.start, hint, "estimated start")
        else:
            spans.append(Span(WAITING, start, None))
    else:
        spans = _before(spans, since if since is not None else as_of)
    start_at = spec.hold.start_at if spec is not None else None
    if start_at is not None and start_at > as_of and row.want != "released":
        marks.append(Mark(START_AT, start_at, text="start_at"))
    m = row.maintenance
    window = epoch_or_none(m.window_start) if m is not None else None
    if m is not None and window is not None:
        text = " ".join(w for w in (m.kind, m.status) if w)
        marks.append(Mark(MAINTENANCE, window, epoch_or_none(m.window_end), text))
    need = need_of(row, spec)
    limit = next(
        (s for s in limits if need is not None and need.under(s)),
        None,
    )
    return Row(
        slot=row.name,
        owner=row.owner,
        zone=row.zone,
        accelerator=row.accelerator,
        mode=row.mode,
        chips=need.chips if need is not None else 0,
        state=row.state,
        managed=bool(row.managed),
        spans=_merged(spans),
        marks=tuple(sorted(marks, key=lambda m: m.at)),
        limit=limit_label(limit) if limit is not None else None,
        ends_at=ends,
        end_reason=why,
        estimate=estimate,
        expected_wait=hint,
        since=since,
        api=api,
    )


def _p50(hint: WaitHint) -> str:
    return f"p50 {format_duration(hint.p50_seconds)} ({hint.samples} samples)"


def _gone(where: tuple[str, str], past: Past, facts: Facts, since: float) -> Row | None:
    """A request the history knows and the snapshot does not (gone, or a slot left the file),
    when it did something in the window. A last state the history left open (its recorder
    stopped watching before the request went) is not drawn: how long it lasted is not known."""
    zone, slot = where
    spans = _before([s for s in past.spans if s.end is not None], facts.as_of)
    if not any(s.end is not None and s.end > since for s in spans):
        return None
    spec = facts.spec(slot)
    n = place_chips(past.accelerator)
    return Row(
        slot=slot,
        owner=spec.owner if spec is not None and spec.zone == zone else None,
        zone=zone,
        accelerator=past.accelerator if past.accelerator != "?" else None,
        mode=past.mode if past.mode != "?" else None,
        chips=n,
        state=None,
        managed=False,
        spans=tuple(spans),
        marks=past.marks,
    )


# --- the window, the groups and the whole ---------------------------------------------------


def window(
    rows: Sequence[Row], as_of: float, since: float | None, until: float | None
) -> tuple[float, float]:
    """``[since, until]``: as given, else far enough ahead to show every scheduled moment
    (``MIN_AHEAD`` to ``MAX_AHEAD``, to the hour) and half as far back (at least
    ``MIN_AHEAD``). ValueError when ``since`` is not before ``until``."""
    if until is None:
        later = [m.at for r in rows for m in r.marks if m.at > as_of]
        later += [s.end for r in rows for s in r.spans if s.end is not None and s.end > as_of]
        ahead = max(MIN_AHEAD, min(MAX_AHEAD, (max(later) - as_of) * 1.1 if later else 0.0))
        until = -(-(as_of + ahead) // HOUR) * HOUR
    if since is None:  # to the hour, as ``until``
        since = (min(as_of, until) - max(MIN_AHEAD, abs(until - as_of) / 2)) // HOUR * HOUR
    if since >= until:
        raise ValueError(f"{utc_text(since)} is not before {utc_text(until)}")
    return since, until


def moment(text: str, as_of: float, *, ahead: bool) -> float:
    """``--since`` / ``--until`` as a moment: a duration back from ``as_of`` (``ahead``: on
    from it), e.g. ``12h`` or ``2d``, or an ISO 8601 time with an offset. ValueError
    (user-facing) otherwise."""
    try:
        seconds = parse_duration(text)
    except ValueError:
        pass
    else:
        return as_of + seconds if ahead else as_of - seconds
    try:
        return parse_instant(text)
    except ValueError as e:
        if any(c.isdigit() for c in text) and ("-" in text or ":" in text):
            raise  # a time, mistyped: its own words say what is wrong
        example = "1d" if ahead else "12h"
        raise ValueError(
            f"expected a duration like {example} or a time like 2026-12-24T19:00:00Z, got {text!r}"
        ) from e


def _key(row: Row, by: str) -> str:
    if by == "owner":
        return row.owner or NO_OWNER
    if by == "zone":
        return row.zone or "?"
    return row.limit or NO_LIMIT


def _groups(rows: Sequence[Row], by: str, limits: Sequence[QuotaSpec]) -> tuple[Group, ...]:
    found: dict[str, list[Row]] = {}
    for row in rows:
        found.setdefault(_key(row, by), []).append(row)
    if by == "quota":
        order = {limit_label(s): i for i, s in reversed(list(enumerate(limits)))}
        names = sorted(found, key=lambda k: (order.get(k, len(order)), k))
    else:
        last = NO_OWNER if by == "owner" else "?"
        names = sorted(found, key=lambda k: (k == last, k))
    return tuple(Group(name, tuple(found[name])) for name in names)


def build(
    snapshot: StatusSnapshot,
    desired: Desired | None,
    *,
    as_of: float,
    hints: Mapping[Place, WaitHint] | None = None,
    past: Mapping[tuple[str, str], Past] | None = None,
    since: float | None = None,
    until: float | None = None,
    by: str = "owner",
    state_of: StateOf,
) -> LabTimeline:
    """The timeline of ``snapshot`` (with ``desired``, the history's ``past`` per (zone,
    slot) and expected waits ``hints``) as of ``as_of``, over ``window``'s ``[since,
    until]``; ``state_of`` reads a request's state in its API's word."""
    if by not in BY:
        raise ValueError(f"by must be one of {', '.join(BY)}, not {by!r}")
    facts = Facts(snapshot, desired, hints or {}, as_of, state_of)
    found, notes = estimates(facts)
    specs = [lim.spec for lim in snapshot_limits(snapshot)]
    past = past or {}
    rows = [
        _row(r, facts, past.get((r.zone or "", r.name)), found.get(r.name), specs)
        for r in snapshot.slots
    ]
    since, until = window(rows, as_of, since, until)
    shown = {(r.zone, r.slot) for r in rows}
    for where in sorted(past):
        gone = _gone(where, past[where], facts, since) if where not in shown else None
        if gone is not None:
            rows.append(gone)
    head = [snapshot.note] if snapshot.note else []
    if not snapshot.controller.running and not snapshot.note:
        head.append(
            "no controller is running: this is its last look, and nothing starts until one runs"
        )
    return LabTimeline(as_of, since, until, by, _groups(rows, by, specs), tuple(head + notes))


def only(
    timeline: LabTimeline,
    *,
    zone: str | None = None,
    accelerator: str | None = None,
    mode: str | None = None,
    owner: str | None = None,
    api: str | None = None,
) -> LabTimeline:
    """The rows that pass every filter given (the estimate was made with all of them)."""
    wanted = {"zone": zone, "accelerator": accelerator, "mode": mode, "owner": owner, "api": api}

    def keeps(row: Row) -> bool:
        return all(v is None or getattr(row, k) == v for k, v in wanted.items())

    groups = tuple(
        Group(g.name, rows)
        for g in timeline.groups
        if (rows := tuple(r for r in g.rows if keeps(r)))
    )
    return replace(timeline, groups=groups)
