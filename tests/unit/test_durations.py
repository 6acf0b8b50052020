"""Durations as users write them, and the compact form status shows."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.model.durations import (
    MAX_SECONDS,
    duration_text,
    format_duration,
    parse_duration,
)


@pytest.mark.parametrize(
    ("written", "seconds"),
    [
        (30, 30.0),
        (2.5, 2.5),
        ("30", 30.0),
        ("30s", 30.0),
        ("2m", 120.0),
        ("6h", 21600.0),
        ("1d", 86400.0),
        ("1.5h", 5400.0),
        (" 10 s ", 10.0),
        ("366d", float(MAX_SECONDS)),
    ],
)
def test_accepted(written: object, seconds: float) -> None:
    assert parse_duration(written) == seconds


@pytest.mark.parametrize(
    ("written", "words"),
    [
        (True, "boolean"),
        (0, "more than 0"),
        (-5, "more than 0"),
        ("0s", "more than 0"),
        ("367d", "at most 366 days"),
        ("5x", "like 30"),
        ("", "like 30"),
        ("h", "like 30"),
        ("-1m", "like 30"),
        ("1h30m", "like 30"),
        (None, "like 30"),
        ([30], "like 30"),
    ],
)
def test_refused_with_a_message_for_the_user(written: object, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_duration(written)


@given(st.integers(1, 300), st.sampled_from([("s", 1), ("m", 60), ("h", 3600), ("d", 86400)]))
def test_units_multiply(n: int, unit: tuple[str, int]) -> None:
    assert parse_duration(f"{n}{unit[0]}") == n * unit[1]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-3, "0s"),
        (0, "0s"),
        (45, "45s"),
        (60, "1m"),
        (90, "1m30s"),
        (600, "10m"),
        (630, "10m"),
        (3600, "1h"),
        (7500, "2h5m"),
        (86400, "1d"),
        (97200, "1d3h"),
    ],
)
def test_compact_form(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@given(st.floats(0, MAX_SECONDS))
def test_compact_form_is_short_and_parses_back_to_no_more_than_the_input(seconds: float) -> None:
    text = format_duration(seconds)
    assert len(text) <= 7
    # The leading unit alone is a valid duration no larger than what was formatted.
    head = text[: next(i for i, c in enumerate(text) if c.isalpha()) + 1]
    if head != "0s":
        assert parse_duration(head) <= seconds


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (365 * 86400.0, "365d"),
        (60.0, "1m"),
        (90.0, "90s"),
        (5400, "90m"),
        (3600, "1h"),
        (0.5, "0.5s"),
    ],
)
def test_exact_form_uses_the_largest_unit_that_divides(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


@given(st.floats(0.001, MAX_SECONDS))
def test_exact_form_reads_back_as_a_duration(seconds: float) -> None:
    seconds = round(seconds, 6)
    assert parse_duration(duration_text(seconds)) == pytest.approx(seconds, abs=1e-6)
