"""The capacity history's series and pictures (pure): windows and bins, waits by zone, chips
held, preemptions per UTC day, and the text and HTML drawn from them."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from reconciler.core.capacity_chart import (
    DAY,
    GAVE_UP,
    MIN_SPAN,
    SERVED,
    WAITING,
    Holding,
    Timeline,
    WaitPoint,
    bin_of,
    charts,
    chips_of,
    chips_series,
    narrowed,
    open_timeline,
    preemptions_per_day,
    utc_date,
    wait_series,
    window,
)
from reconciler.core.capacity_html import format_html
from reconciler.core.capacity_plot import EMPTY, format_plot
from reconciler.core.history import RequestTrack

Z1, Z2 = "europe-west4-a", "us-east5-b"
T0 = dt.datetime(2026, 3, 1, tzinfo=dt.UTC).timestamp()


def at(text: str) -> float:
    return dt.datetime.fromisoformat(text).timestamp()


def wait(zone: str, queued: float, seconds: float, outcome: str = SERVED) -> WaitPoint:
    return WaitPoint(zone, "v6e-8", "spot", queued, seconds, outcome)


# -- windows and bins --------------------------------------------------------------------------
def test_an_empty_history_has_a_day_long_window_and_empty_series() -> None:
    c = charts(Timeline(), until=T0, bins=10)
    assert (c.start, c.end) == (T0 - DAY, T0)
    assert c.waits == () and c.chips == (0.0,) * 10 and c.chips_now == 0
    assert c.preemptions == (("2026-02-28", 0), ("2026-03-01", 0))


def test_one_point_gets_at_least_an_hour_around_it_and_lands_in_a_bin() -> None:
    t = Timeline((wait(Z1, T0, 120.0),))
    assert window(t, until=T0) == (T0 - MIN_SPAN, T0)  # the point is the window's end
    c = charts(t, until=T0, bins=6)
    (z,) = c.waits
    assert z.values == (None,) * 5 + (120.0,)  # the end belongs to the last bin
    assert (z.served, z.gave_up, z.waiting, z.median) == (1, 0, 0, 120.0)


def test_since_starts_the_window_and_records_outside_it_are_left_out() -> None:
    t = Timeline((wait(Z1, T0 - 10 * DAY, 5.0), wait(Z1, T0 - 0.5 * DAY, 7.0)))
    c = charts(t, until=T0, since=T0 - DAY, bins=2)
    assert c.start == T0 - DAY and c.waits[0].values == (None, 7.0)
    assert c.waits[0].served == 1
    late = charts(Timeline((wait(Z1, T0 + 60, 5.0),)), until=T0, bins=2)  # after until
    assert late.waits == ()


def test_bin_edges() -> None:
    assert bin_of(0.0, 0.0, 10.0, 5) == 0
    assert bin_of(1.999, 0.0, 10.0, 5) == 0
    assert bin_of(2.0, 0.0, 10.0, 5) == 1
    assert bin_of(10.0, 0.0, 10.0, 5) == 4
    assert bin_of(-0.1, 0.0, 10.0, 5) is None and bin_of(10.1, 0.0, 10.0, 5) is None
    with pytest.raises(ValueError):
        charts(Timeline(), until=T0, bins=0)


# -- the series --------------------------------------------------------------------------------
def test_waits_by_zone_are_medians_of_the_served_and_count_the_rest() -> None:
    waits = [
        wait(Z2, T0 + 1, 30.0),
        wait(Z1, T0 + 1, 10.0),
        wait(Z1, T0 + 2, 20.0),
        wait(Z1, T0 + 3, 90.0),
        wait(Z1, T0 + 4, 500.0, GAVE_UP),  # not a served wait: counted, never plotted
        wait(Z1, T0 + 60, 9.0, WAITING),
    ]
    z1, z2 = wait_series(waits, T0, T0 + 100, 2)
    assert z1.zone == Z1 and z2.zone == Z2  # by name
    assert z1.values == (20.0, None) and (z1.served, z1.gave_up, z1.waiting) == (3, 1, 1)
    assert z2.values == (30.0, None) and z2.median == 30.0


def test_chips_held_are_averaged_over_each_bin() -> None:
    held = [
        Holding(Z1, "v6e-8", "spot", T0 + 0, T0 + 150),  # 8 chips for a bin and a half
        Holding(Z2, "v4-8", "spot", T0 + 250, None),  # 4 chips (TensorCores / 2), still held
        Holding(Z2, "?", "spot", T0, T0 + 300),  # an accelerator never named: no chips
    ]
    assert chips_series(held, T0, T0 + 300, 3) == (8.0, 4.0, 2.0)
    c = charts(Timeline((), tuple(held)), until=T0 + 300, since=T0 - MIN_SPAN, bins=1)
    assert c.chips_now == 4
    assert chips_of("v6e-8") == 8 and chips_of("v4-32") == 16 and chips_of("?") == 0
    # a multislice is recorded under its own place: every slice's chips count
    assert chips_of("2xv4-32") == 32 and chips_of("4xv6e-64") == 256


def test_a_holding_from_before_the_window_counts_from_the_window_start() -> None:
    held = [Holding(Z1, "v6e-8", "spot", T0 - DAY, T0 + 50)]
    assert chips_series(held, T0, T0 + 100, 2) == (8.0, 0.0)


@pytest.mark.parametrize(
    ("start", "end", "days"),
    [
        ("2024-02-28T12:00:00+00:00", "2024-03-01T01:00:00+00:00", ["02-28", "02-29", "03-01"]),
        ("2026-12-31T23:00:00+00:00", "2027-01-01T00:30:00+00:00", ["12-31", "01-01"]),
        ("1969-12-31T23:00:00+00:00", "1970-01-01T01:00:00+00:00", ["12-31", "01-01"]),
        # A local offset does not move a UTC day: 01:30+02:00 is 23:30Z the day before.
        ("2026-03-29T01:30:00+02:00", "2026-03-29T03:00:00+02:00", ["03-28", "03-29"]),
    ],
)
def test_preemptions_per_utc_day_over_odd_dates(start: str, end: str, days: list[str]) -> None:
    a, b = at(start), at(end)
    held = [
        Holding(Z1, "v6e-8", "spot", a - 10, a + 1, preempted=True),
        Holding(Z1, "v6e-8", "spot", a - 10, b, preempted=True),
        Holding(Z1, "v6e-8", "spot", a - 10, b - 1, preempted=False),  # deleted: not counted
        Holding(Z1, "v6e-8", "spot", a - 10, None),  # still held: not counted
    ]
    got = preemptions_per_day(held, a, b)
    assert [d[5:] for d, _ in got] == days
    assert [n for _, n in got] == [1] + [0] * (len(days) - 2) + [1]
    assert utc_date(a) == got[0][0]


def test_what_is_still_in_progress_joins_the_timeline_and_filters_apply() -> None:
    tracks = {
        (Z1, "a"): RequestTrack("WAITING_FOR_RESOURCES", "v6e-8", "spot", queued_at=T0 - 60),
        (Z2, "b"): RequestTrack("ACTIVE", "v4-8", "spot", active_at=T0 - 30),
    }
    live = open_timeline(tracks, T0)
    assert live.waits == (WaitPoint(Z1, "v6e-8", "spot", T0 - 60, 60.0, WAITING),)
    assert live.holdings == (Holding(Z2, "v4-8", "spot", T0 - 30, None),)
    assert narrowed(live, zone=Z2).waits == () and len(narrowed(live, zone=Z2).holdings) == 1
    assert narrowed(live, accelerator="v6e-8").holdings == ()
    assert narrowed(live, since=T0 - 10).waits == ()  # queued before since


# -- text --------------------------------------------------------------------------------------
def week() -> Timeline:
    waits = tuple(
        wait(Z1 if i % 3 else Z2, T0 + i * 10800, 600.0 * (i % 7 + 1), SERVED if i % 4 else GAVE_UP)
        for i in range(56)
    )
    held = tuple(
        Holding(Z1, "v6e-8", "spot", T0 + i * 6 * 3600, T0 + i * 6 * 3600 + 4 * 3600, i % 2 == 0)
        for i in range(28)
    )
    return Timeline(waits, held)


def test_an_empty_history_plots_as_a_sentence() -> None:
    assert format_plot(Timeline(), until=T0) == EMPTY
    filtered = format_plot(Timeline(), until=T0, filters={"zone": Z1, "mode": ""})
    assert filtered == f"No capacity history matches zone={Z1}.\n"


@pytest.mark.parametrize("width", [1, 40, 80, 133, 240])
def test_every_line_fits_the_width_and_the_same_input_draws_the_same(width: int) -> None:
    t = week()
    text = format_plot(t, until=T0 + 7 * DAY, width=width)
    assert text == format_plot(t, until=T0 + 7 * DAY, width=width)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= max(width, 40)
    axis = next(line for line in lines if line.lstrip().startswith("+-"))
    assert len(axis) == max(width, 40)  # the charts use the whole width
    assert "a europe-west4-a:" in text and "b us-east5-b:" in text


def test_one_point_plots_its_letter_at_the_top_right() -> None:
    text = format_plot(Timeline((wait(Z1, T0, 100.0),)), until=T0, width=80)
    rows = text.splitlines()
    top = next(r for r in rows if "|" in r)
    assert top.startswith(" 1m40s |") and top.endswith("a")
    assert "no capacity held in this window" in text and "no preemptions" in text


def test_a_zone_where_nobody_got_capacity_is_counted_not_plotted() -> None:
    t = Timeline((wait(Z1, T0, 900.0, GAVE_UP), wait(Z2, T0 + 60, 30.0, WAITING)))
    text = format_plot(t, until=T0 + 120, width=80)
    assert "  no request got capacity in this window" in text
    assert "a europe-west4-a: 0 served, 1 gave up" in text
    assert "b us-east5-b: 0 served, 1 waiting" in text
    page = format_html(t, [], until=T0 + 120)
    assert "No request got capacity in this window." in page and "<circle" not in page


def test_many_days_share_a_bar() -> None:
    held = tuple(
        Holding(Z1, "v6e-8", "spot", T0 + d * DAY, T0 + d * DAY + 60, True) for d in range(200)
    )
    text = format_plot(Timeline((), held), until=T0 + 200 * DAY, width=80)
    assert "Preemptions per 3 days (UTC; 200 in all)" in text


# -- HTML --------------------------------------------------------------------------------------
def test_the_page_escapes_every_text_it_shows() -> None:
    evil = '<script>alert("x")</script>'
    t = Timeline((WaitPoint(evil, evil, "spot", T0, 60.0, SERVED),))
    ranking = {
        "accelerator": evil,
        "mode": "spot",
        "zones": [
            {"zone": evil, "expected_wait_seconds": 60.0, "samples": 1, "unserved": 0,
             "median_lifetime_seconds": None, "preemptions_per_day": None}
        ],
        "closed": [evil],
        "untried": [evil],
    }  # fmt: skip
    page = format_html(t, [ranking], until=T0 + 60, filters={"zone": evil}, generated=T0)
    assert "<script" not in page and "&lt;script&gt;" in page
    assert not re.search(r"<(link|img|iframe)|src=|url\(", page)
    assert page.count("<svg ") == 3 and "default-src 'none'" in page


def test_an_empty_page_still_says_what_it_is() -> None:
    page = format_html(Timeline(), [], until=T0)
    assert "No capacity history yet" in page and "<svg" not in page
    assert "Nothing to rank yet." in page
