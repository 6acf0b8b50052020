"""Capacity statistics: percentiles, Kaplan-Meier waits, lifetimes, ranking (pure)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.core.capacity import (
    Open,
    PlaceStats,
    Samples,
    code_of,
    km_quantile,
    percentile,
    queue_closed,
    rank,
    stats_for,
    wait_hints,
    with_open,
)


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([], 50, None),
        ([7.0], 50, 7.0),
        ([7.0], 90, 7.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        ([4.0, 1.0, 3.0, 2.0], 50, 2.5),  # order does not matter
        ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], 90, 9.1),
        ([10.0, 20.0], 0, 10.0),
        ([10.0, 20.0], 100, 20.0),
    ],
)
def test_percentile_table(values: list[float], q: float, expected: float | None) -> None:
    got = percentile(values, q)
    assert got == expected if expected is None else got == pytest.approx(expected)


def test_percentile_rejects_out_of_range() -> None:
    with pytest.raises(ValueError, match=r"0\.\.100"):
        percentile([1.0], 101)


@pytest.mark.parametrize(
    ("served", "censored", "expected"),
    [
        ([], [], None),
        ([5.0, 10.0, 20.0], [], 10.0),  # no censoring: the ordinary (lower) median
        ([5.0], [1.0, 1.0, 1.0], 5.0),  # early give-ups leave 1 at risk: served at 5 -> done
        ([100.0], [50.0, 60.0, 70.0], 100.0),
        ([], [3600.0, 7200.0], None),  # never served: no finite wait
        ([10.0], [20.0, 30.0, 40.0], None),  # 1 of 4 served before the rest gave up: < 50 %
        ([10.0, 10.0], [10.0], 10.0),  # a tie: served first
    ],
)
def test_kaplan_meier_table(
    served: list[float], censored: list[float], expected: float | None
) -> None:
    assert km_quantile(served, censored) == expected


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=50))
def test_percentiles_are_ordered_and_bounded(values: list[float]) -> None:
    p50, p90 = percentile(values, 50), percentile(values, 90)
    assert p50 is not None and p90 is not None
    assert min(values) <= p50 <= p90 <= max(values)


@given(
    st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=40),
    st.lists(st.floats(0, 1e6, allow_nan=False), max_size=40),
)
def test_censoring_never_shortens_the_expected_wait(
    served: list[float], censored: list[float]
) -> None:
    """Adding requests that never got capacity can only make the median wait longer (or
    undefined), never shorter; and without censoring it is a served wait."""
    plain = km_quantile(served, [])
    assert plain in served
    with_censored = km_quantile(served, censored)
    assert with_censored is None or with_censored >= plain


@given(st.lists(st.floats(0, 1e5, allow_nan=False), min_size=1, max_size=30))
def test_expected_wait_without_censoring_is_a_lower_median(values: list[float]) -> None:
    got = km_quantile(values, [])
    ordered = sorted(values)
    assert got == ordered[math.ceil(len(ordered) / 2) - 1]


def test_stats_lifetime_and_preemptions_per_day() -> None:
    s = stats_for(
        ("europe-west4-a", "v6e-8", "spot", "tpu"),
        Samples(
            to_provisioning=(60.0, 120.0, 180.0),
            to_active=(90.0, 150.0, 210.0),
            lifetimes_preempted=(3600.0, 7200.0),
            held_seconds=43200.0,  # half a day held, two preemptions -> 4 a day
            failures={8: 2},
        ),
    )
    assert (s.samples, s.p50_active, s.median_lifetime) == (3, 150.0, 5400.0)
    assert s.p50_provisioning == 120.0 and s.p90_active == pytest.approx(198.0)
    assert s.preemptions == 2 and s.preemptions_per_day == pytest.approx(4.0)
    assert s.failures == {"8": 2}


def _stats(
    zone: str,
    wait: float | None,
    samples: int,
    *,
    closed: bool = False,
    unserved: int = 0,
    mode: str = "spot",
) -> PlaceStats:
    return PlaceStats(
        zone,
        "v6e-8",
        mode,
        samples,
        unserved,
        wait,
        wait,
        wait,
        wait,
        wait,
        None,
        0,
        None,
        {},
        closed,
        None,
    )


def test_rank_orders_by_expected_wait_and_drops_closed_queues() -> None:
    ranked = rank(
        [
            _stats("us-east5-b", 600.0, 4),
            _stats("europe-west4-a", 60.0, 9),
            _stats("us-central2-b", 5.0, 9, closed=True),
            _stats("asia-northeast1-b", None, 0, unserved=5),
            _stats("us-east1-d", None, 0, unserved=1),
            _stats("europe-west4-b", 1.0, 9, mode="on-demand"),
        ],
        "v6e-8",
        "spot",
    )
    assert [r.zone for r in ranked] == [
        "europe-west4-a",
        "us-east5-b",
        "us-east1-d",
        "asia-northeast1-b",
    ]
    assert [r.zone for r in rank([_stats("a-b1-c", 1.0, 1)], "v6e-8", "spot", count=0)] == []


def test_ties_break_on_more_samples() -> None:
    ranked = rank([_stats("z-a1-a", 60.0, 2), _stats("z-b1-b", 60.0, 20)], "v6e-8", "spot")
    assert [r.zone for r in ranked] == ["z-b1-b", "z-a1-a"]


def test_wait_hints_need_a_few_samples() -> None:
    hints = wait_hints([_stats("z-a1-a", 60.0, 2), _stats("z-b1-b", 7800.0, 14)])
    assert list(hints) == [("z-b1-b", "v6e-8", "spot", "tpu")]
    assert hints[("z-b1-b", "v6e-8", "spot", "tpu")].samples == 14


@pytest.mark.parametrize(
    ("message", "code", "closed"),
    [
        ("PERMISSION_DENIED: no permission to submit into this queue", 7, True),
        ("RESOURCE_EXHAUSTED: quota", 8, False),
        ("something odd", None, False),
    ],
)
def test_refusal_codes(message: str, code: int | None, closed: bool) -> None:
    assert code_of(message) == code and queue_closed(message) is closed


def _naive_km(served: list[float], censored: list[float], q: float = 0.5) -> float | None:
    """The textbook estimator, one event time at a time (the reference for the fast one)."""
    events = sorted([(t, 0) for t in served] + [(t, 1) for t in censored])
    at_risk, survival, i = len(events), 1.0, 0
    while i < len(events):
        t, d, c = events[i][0], 0, 0
        while i < len(events) and events[i][0] == t:
            d, c, i = d + (events[i][1] == 0), c + (events[i][1] == 1), i + 1
        if d:
            survival *= 1 - d / at_risk
            if 1 - survival >= q - 1e-12:
                return t
        at_risk -= d + c
    return None


@given(
    st.lists(st.integers(0, 50), max_size=60),
    st.lists(st.integers(0, 50), max_size=60),
    st.sampled_from([0.5, 0.9, 0.25]),
)
def test_fast_kaplan_meier_equals_the_textbook_one(
    served: list[int], censored: list[int], q: float
) -> None:
    s, c = [float(x) for x in served], [float(x) for x in censored]
    assert km_quantile(s, c, q) == _naive_km(s, c, q)


def test_waiting_slots_get_their_places_expected_wait() -> None:
    from reconciler.adapters.tpu_api_parse import QRState
    from reconciler.core.capacity import WaitHint, waiting_hints
    from reconciler.core.capacity_report import format_waits, waits_list
    from reconciler.model.observed import Observation
    from tests.support.worlds import desired, qr, slot

    want = desired(
        slot("queued", zone="europe-west4-a", accelerator="v6e-8"),
        slot("to-create", zone="europe-west4-a", accelerator="v6e-8"),
        slot("held", zone="europe-west4-a", accelerator="v6e-8"),
        slot("released", zone="europe-west4-a", accelerator="v6e-8", want="released"),
        slot("no-history", zone="us-east5-b", accelerator="v6e-8"),
    )
    seen = Observation(
        requests=(
            qr("queued", zone="europe-west4-a", state=QRState.WAITING_FOR_RESOURCES),
            qr("held", zone="europe-west4-a", state=QRState.ACTIVE),
        )
    )
    hints = {("europe-west4-a", "v6e-8", "spot", "tpu"): WaitHint(7800.0, 14)}
    waits = waiting_hints(want, seen, hints)
    assert [w.slot for w in waits] == ["queued", "to-create"]
    assert waits[0].text() == "p50 2h10m here, 14 samples"
    assert waits_list(waits)[0]["expected_wait"] == {"p50_seconds": 7800.0, "samples": 14}
    assert "queued     europe-west4-a   p50 2h10m here, 14 samples" in format_waits(waits)


def test_status_shows_expected_wait_on_waiting_slots_only() -> None:
    """The snapshot's optional ``expected_wait`` (JSON) and the NOTE text, from a summary value
    handed to ``build_status``; without history the document is unchanged."""
    from reconciler.adapters.tpu_api_parse import QRState
    from reconciler.core.capacity import WaitHint
    from reconciler.core.memory import Memory
    from reconciler.core.render import format_status
    from reconciler.core.status import build_status
    from reconciler.model.observed import Observation
    from reconciler.model.status import from_json, to_json
    from tests.support.worlds import desired, qr, slot

    want = desired(
        slot("waiting", zone="europe-west4-a", accelerator="v6e-8"),
        slot("running", zone="europe-west4-a", accelerator="v6e-8"),
    )
    seen = Observation(
        requests=(
            qr("waiting", zone="europe-west4-a", accelerator="v6e-8",
               state=QRState.WAITING_FOR_RESOURCES),
            qr("running", zone="europe-west4-a", accelerator="v6e-8", state=QRState.ACTIVE),
        )
    )  # fmt: skip

    def snapshot(hints: dict[tuple[str, str, str], WaitHint] | None) -> dict[str, object]:
        built = build_status(desired=want, desired_file="d.yaml", errors=(), observation=seen,
                             observed_at=0.0, memory=Memory(), plan=None, now=60.0,
                             backend="rest", wait_hints=hints)  # fmt: skip
        return to_json(built)

    doc = snapshot({("europe-west4-a", "v6e-8", "spot", "tpu"): WaitHint(7800.0, 14)})
    rows = {r["name"]: r for r in doc["slots"]}  # type: ignore[attr-defined]
    assert rows["waiting"]["expected_wait"] == {"p50_seconds": 7800.0, "samples": 14}
    assert "expected_wait" not in rows["running"]
    assert "p50 2h10m here, 14 samples" in format_status(from_json(doc), 60.0)
    plain = snapshot(None)
    assert all("expected_wait" not in r for r in plain["slots"])  # type: ignore[attr-defined]
    assert "history_error" not in plain


DAY = 86400.0


@pytest.mark.parametrize(
    ("served", "unserved", "waiting", "expected", "count"),
    [
        # two served in 10 min, five queued for days: most requests here never got capacity
        ((600.0, 600.0), (), (3 * DAY,) * 5, None, 5),
        # the same served ones, nothing still queued: the median of the served
        ((600.0, 600.0), (), (), 600.0, 0),
        # one still queued for half a minute only: the served ones still decide
        ((60.0, 120.0, 900.0), (), (30.0,), 120.0, 1),
        # still waiting counts like an ended censored wait: 120 without either, 900 with both
        ((60.0, 120.0, 900.0), (3600.0,), (3600.0,), 900.0, 1),
    ],
)
def test_requests_still_queued_are_censored_waits(
    served: tuple[float, ...],
    unserved: tuple[float, ...],
    waiting: tuple[float, ...],
    expected: float | None,
    count: int,
) -> None:
    s = stats_for(
        ("us-east5-b", "v6e-8", "spot", "tpu"),
        Samples(to_active=served, to_provisioning=served, unserved=unserved, waiting=waiting),
    )
    assert s.expected_wait == expected and s.waiting == count
    assert s.samples == len(served) and s.unserved == len(unserved)  # unserved: ended only


def test_a_zone_queued_for_days_ranks_after_one_that_serves() -> None:
    place = ("us-east5-b", "v6e-8", "spot", "tpu")
    other = ("europe-west4-a", "v6e-8", "spot", "tpu")
    per_place = {
        place: Samples(to_active=(600.0, 600.0), to_provisioning=(500.0, 500.0)),
        other: Samples(to_active=(5400.0,), to_provisioning=(5000.0,)),
    }
    plain = [stats_for(k, v) for k, v in per_place.items()]
    before = [r.zone for r in rank(plain, "v6e-8", "spot")]
    assert before == ["us-east5-b", "europe-west4-a"]
    opened = with_open(per_place, {place: Open(waiting=(3 * DAY,) * 5)})
    ranked = rank([stats_for(k, v) for k, v in opened.items()], "v6e-8", "spot")
    assert [r.zone for r in ranked] == ["europe-west4-a", "us-east5-b"]
    assert (ranked[1].expected_wait, ranked[1].waiting, ranked[1].samples) == (None, 5, 2)


def test_a_place_known_only_by_open_waits_is_shown() -> None:
    place = ("asia-northeast1-b", "v6e-8", "spot", "tpu")
    (s,) = [stats_for(k, v) for k, v in with_open({}, {place: Open(waiting=(DAY,))}).items()]
    assert (s.place, s.samples, s.waiting, s.expected_wait) == (place, 0, 1, None)


_waits = st.lists(st.floats(0, 1e6, allow_nan=False), max_size=20)


@given(_waits, _waits, _waits)
def test_still_waiting_never_shortens_the_expected_wait(
    served: list[float], unserved: list[float], waiting: list[float]
) -> None:
    """An open request adds evidence of waiting, never of capacity: the estimate with it is
    never sooner than without it (None = never served, the latest of all)."""
    place = ("z-a1-a", "v6e-8", "spot", "tpu")
    base = Samples(to_active=tuple(served), unserved=tuple(unserved))
    without = stats_for(place, base).expected_wait
    with_ = stats_for(place, with_open({place: base}, {place: Open(tuple(waiting))})[place])
    if with_.expected_wait is not None:
        assert without is not None and with_.expected_wait >= without
    assert with_.waiting == len(waiting)


@pytest.mark.parametrize(
    ("held", "held_open", "expected"),
    [
        (43200.0, 0.0, 4.0),  # two preemptions in half a day of ended holdings
        (43200.0, 43200.0, 2.0),  # plus half a day of a node still alive: half the rate
        (0.0, 86400.0, 2.0),  # only a node still alive (the preempted ones' time is held)
        (0.0, 0.0, None),  # nothing held at all: no rate
    ],
)
def test_preemptions_per_day_count_nodes_still_alive(
    held: float, held_open: float, expected: float | None
) -> None:
    s = stats_for(
        ("europe-west4-a", "v6e-8", "spot", "tpu"),
        Samples(lifetimes_preempted=(3600.0, 7200.0), held_seconds=held, held_open=held_open),
    )
    assert s.preemptions_per_day == (None if expected is None else pytest.approx(expected))


@given(st.floats(1.0, 1e7), st.floats(0.0, 1e7), st.integers(0, 50))
def test_a_node_still_alive_never_raises_the_preemption_rate(
    held: float, alive: float, preemptions: int
) -> None:
    place = ("z-a1-a", "v6e-8", "spot", "tpu")
    base = Samples(lifetimes_preempted=(60.0,) * preemptions, held_seconds=held)
    without = stats_for(place, base).preemptions_per_day
    with_ = stats_for(place, with_open({place: base}, {place: Open(held=alive)})[place])
    assert without is not None and with_.preemptions_per_day is not None
    assert with_.preemptions_per_day <= without + 1e-9
    assert with_.preemptions_per_day == pytest.approx(preemptions * 86400.0 / (held + alive))


def test_a_preemption_rate_is_a_rate_only_after_a_day_held() -> None:
    from reconciler.core.capacity_report import rate_text

    assert rate_text(1, 60.0) == "1 in 24m held"  # one in 24 minutes is not 60 a day
    assert rate_text(1, 0.5) == "0.50 (n=1)"
    assert rate_text(6, 1.5) == "1.50"
    assert rate_text(0, 0.0) == "0.00" and rate_text(0, None) == "-"
