"""model/stamps: ``epoch`` reads a stamp exactly as ``datetime.fromisoformat`` does.

Its integer fast path for ``YYYY-MM-DDTHH:MM:SSZ`` must never disagree with datetime: not on
any date (leap years, month ends, year 1 and 9999), not on text that only looks like a stamp.
"""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.model.stamps import _plain_utc, epoch


def by_datetime(stamp: str) -> float | None:
    try:
        return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def by_epoch(stamp: str) -> float | None:
    try:
        return epoch(stamp)
    except ValueError:
        return None


@given(st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)))
def test_every_utc_stamp_reads_as_datetime_reads_it(moment: dt.datetime) -> None:
    stamp = moment.replace(microsecond=0).isoformat(timespec="seconds") + "Z"
    assert _plain_utc(stamp) is not None  # the fast path took it
    assert epoch(stamp) == by_datetime(stamp)


@pytest.mark.parametrize(
    "stamp",
    [
        "2024-02-29T23:59:59Z",  # a leap day
        "2023-02-29T00:00:00Z",  # not one
        "1900-02-29T00:00:00Z",  # a century that is not a leap year
        "2000-02-29T00:00:00Z",  # one that is
        "2026-04-31T00:00:00Z",
        "2026-12-31T23:59:59Z",
        "2026-13-01T00:00:00Z",
        "2026-00-10T00:00:00Z",
        "0000-01-01T00:00:00Z",
        "2026-12-01T24:00:00Z",
        "2026-12-01T23:60:00Z",
        "2026-12-01T23:59:60Z",  # a leap second: datetime refuses it
        "2026-12-01T08:41:2\uff19Z",  # a digit that is not ASCII (fullwidth nine)
        "2026-12-01T08:41:+9Z",
        "2026-12-01 08:41:29Z",  # a space for the T: datetime's path
        "2026-12-01T08:41:29.238919Z",  # a fraction: datetime's path
        "2026-12-01T09:41:29+01:00",  # an offset: datetime's path
        "2026-12-01T08:41:29z",
        "2026-12-01",
        "",
        "yesterday",
    ],
)
def test_edge_stamps_read_as_datetime_reads_them(stamp: str) -> None:
    assert by_epoch(stamp) == by_datetime(stamp)


def test_status_stamps_need_no_datetime() -> None:
    """The point of the fast path: the form the state files hold never imports datetime."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from reconciler.model.stamps import epoch\n"
        "assert epoch('2026-12-01T08:41:29Z') == 1796114489.0\n"
        "print('datetime' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_utc_text_writes_the_one_form_and_epoch_reads_it_back() -> None:
    from reconciler.model.times import api_time, utc_text

    ts = 1796114489.987654  # 2026-12-01T08:41:29.987654Z
    assert utc_text(ts) == "2026-12-01T08:41:29Z"  # truncated, never rounded up a second
    assert utc_text(ts, milliseconds=True) == api_time(ts) == "2026-12-01T08:41:29.987Z"
    assert epoch(utc_text(ts)) == 1796114489.0
    paris = dt.datetime(2026, 12, 1, 9, 41, 29, 987654, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert utc_text(paris) == "2026-12-01T08:41:29Z"
    assert utc_text(paris, milliseconds=True) == "2026-12-01T08:41:29.987Z"
