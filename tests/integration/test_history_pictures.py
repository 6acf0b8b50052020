"""Pictures of the capacity history, end to end: a real SQLite store filled through the
project's own store API (``tests/support/history_world``), the real CLI drawing it
(``history --plot``, ``history --html FILE``), and the page opened in headless Chromium
(Debian's ``chromium``) inside a network namespace with only loopback (``unshare -n``).

Chromium's net log names every request it starts; the ones a page starts carry the page as
their initiator (the browser's own update and time checks carry none), so "no network request"
is checked there, and console messages come out on stderr (``--enable-logging=stderr``). A
page that fetches an image and logs an error is opened the same way first, so the checks are
seen to catch what they look for.

``UPDATE_GOLDEN=1 pytest tests/integration/test_history_pictures.py`` rewrites the golden
plot; review the diff before committing it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler.adapters.statedir import StateDir
from tests.support.cli import Cli, clean_env
from tests.support.history_world import UNTIL_TEXT, fill_history
from tests.support.png import pixels
from tests.support.tools import require_tool

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "history-plot.txt"
#: The chart colours of ``core.capacity_html``: the preemption bars and the chips area.
BARS, AREA = (0xD5, 0x5E, 0x00), (154, 210, 242)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("history")
    state = StateDir(root / "state").ensure()
    assert fill_history(state.history) > 100
    return root


def cli(root: Path) -> Cli:
    env = clean_env({"COLUMNS": "200", "NO_COLOR": "1"})
    return Cli("--file", str(root / "desired.yaml"), "--state-dir", str(root / "state"), env=env)


def test_plot_at_80_columns_is_the_golden_and_the_same_every_time(store: Path) -> None:
    run = cli(store)
    args = ("history", "--plot", "--until", UNTIL_TEXT, "--width", "80")
    first, second = run(*args), run(*args)
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    lines = first.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    for title in ("Wait to ACTIVE by zone", "Chips held", "Preemptions per day"):
        assert any(line.startswith(title) for line in lines), title
    assert any("#" in line for line in lines) and "europe-west4-a" in first.stdout
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(first.stdout)
    assert first.stdout == GOLDEN.read_text(), "history --plot changed (UPDATE_GOLDEN=1)"


def test_plot_takes_the_terminal_width_and_the_filters(store: Path) -> None:
    run = cli(store)
    wide = run("history", "--plot", "--until", UNTIL_TEXT, env={"COLUMNS": "132"})
    assert wide.returncode == 0, wide.stderr
    assert max(len(line) for line in wide.stdout.splitlines()) == 132
    narrow = run("history", "--plot", "--until", UNTIL_TEXT, "--zone", "us-east5-b")
    assert "us-east5-b" in narrow.stdout and "europe-west4-a" not in narrow.stdout
    none = run("history", "--plot", "--zone", "asia-east1-c")
    assert none.returncode == 0 and "No capacity history matches zone=asia-east1-c" in none.stdout
    bad = run("history", "--plot", "--until", "2026-03-02 00:00")
    assert bad.returncode == 2 and "--until" in bad.stderr and "UTC offset" in bad.stderr
    both = run("history", "--plot", "--json")
    assert both.returncode == 2 and "--json" in both.stderr and both.stdout == ""


def test_one_early_preemption_is_not_extrapolated_to_a_daily_rate(tmp_path: Path) -> None:
    """One spot TPU preempted 24 minutes after it came up: ``history`` says what was seen
    (``1 in 24m held``), not 60 a day."""
    from reconciler.adapters.history_db import HistoryDB
    from reconciler.adapters.tpu_api_parse import request_state
    from reconciler.core.history import Seen, Tracker

    state = StateDir(tmp_path / "state").ensure()
    tracker, records, t = Tracker(), [], 1_771_804_800.0
    for after, at in (("WAITING_FOR_RESOURCES", 0), ("ACTIVE", 600), ("SUSPENDED", 2040)):
        seen = Seen("s-1", "us-east5-b", after, "v6e-8", "spot", request=request_state(after))
        records += tracker.step([seen], t + at)
    db = HistoryDB(state.history)
    try:
        db.write(records)
    finally:
        db.close()
    done = cli(tmp_path)("history", "--until", "2026-02-23T01:00:00Z")
    assert done.returncode == 0, done.stderr
    (row,) = [line for line in done.stdout.splitlines() if line.startswith("us-east5-b")]
    assert "1 in 24m held" in row and "60.00" not in row and "59.99" not in row, row
    doc = json.loads(cli(tmp_path)("history", "--json", "--until", "2026-02-23T01:00:00Z").stdout)
    assert doc["places"][0]["preemptions"] == 1  # the JSON keeps the figures


def test_plot_without_a_store_says_so(tmp_path: Path) -> None:
    done = cli(tmp_path)("history", "--plot")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("No capacity history to plot yet")


@dataclass
class Opened:
    stdout: str
    console: list[str]
    requests: list[str]


def open_in_chromium(page: Path, work: Path, *mode: str) -> Opened:
    """``page`` in headless Chromium with no network but loopback; what it printed, its
    console messages and the requests the page started."""
    chromium = require_tool("chromium")
    unshare = require_tool("unshare")
    netlog = work / f"net-{len(list(work.glob('net-*')))}.json"
    isolate = [unshare, "-n"] if os.geteuid() == 0 else [unshare, "-rn"]
    argv = [
        *isolate,
        chromium,
        "--headless=new",
        "--no-sandbox",  # root in CI; the network namespace is the isolation that matters here
        "--disable-gpu",
        f"--user-data-dir={work / 'profile'}",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--v=0",
        f"--log-net-log={netlog}",
        *mode,
        page.as_uri(),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    log = json.loads(netlog.read_text())
    kinds = {number: name for name, number in log["constants"]["logEventTypes"].items()}
    requests = [
        e["params"]["url"]
        for e in log["events"]
        if kinds.get(e["type"]) == "URL_REQUEST_START_JOB"
        and e.get("params", {}).get("initiator", "not an origin") != "not an origin"
    ]
    return Opened(done.stdout, console, requests)


def test_the_checks_catch_a_page_that_fetches_and_logs_an_error(tmp_path: Path) -> None:
    page = tmp_path / "bad.html"
    page.write_text(
        '<!DOCTYPE html><html><body><img src="http://198.51.100.7/a.png">'
        '<script>console.error("boom")</script></body></html>'
    )
    opened = open_in_chromium(page, tmp_path, "--dump-dom")
    assert any("198.51.100.7" in url for url in opened.requests), opened.requests
    assert any("boom" in line for line in opened.console), opened.console


def test_html_page_renders_its_charts_offline_in_chromium(store: Path, tmp_path: Path) -> None:
    page = tmp_path / "capacity.html"
    done = cli(store)("history", "--html", str(page), "--until", UNTIL_TEXT)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"wrote {page}\n"
    text = page.read_text()
    # One file: nothing it could fetch, whatever the browser.
    assert not re.search(r"<script|<link|<img|<iframe|@import|url\(|src=", text, re.I)
    assert re.findall(r"https?://[^\"' ]+", text) == ["http://www.w3.org/2000/svg"] * 3
    for heading in ("v4-8 (spot)", "v6e-8 (spot)"):  # the rankings of `recommend`
        assert f"<h3>{heading}</h3>" in text

    dom = open_in_chromium(page, tmp_path, "--dump-dom")
    for chart in ("waits-chart", "chips-chart", "preemptions-chart"):
        assert re.search(rf'<svg [^>]*id="{chart}"', dom.stdout), chart
    assert dom.stdout.count("<circle") > 20 and dom.stdout.count("<rect") >= 5
    assert dom.stdout.count('class="zone"') == 3
    assert "us-central2-b" in dom.stdout and "~" in dom.stdout  # a ranked zone, its wait
    assert dom.console == [] and dom.requests == []

    shot = tmp_path / "shot.png"
    drawn = open_in_chromium(
        page, tmp_path, f"--screenshot={shot}", "--window-size=820,1200", "--hide-scrollbars"
    )
    assert drawn.console == [] and drawn.requests == []
    width, height, colours = pixels(shot)
    assert (width, height) == (820, 1200)
    assert colours[BARS] > 2000, "no preemption bars drawn"
    assert colours[AREA] > 2000, "no chips area drawn"
    assert sum(n for rgb, n in colours.items() if rgb != (255, 255, 255)) > 0.05 * width * height


def test_html_refuses_bad_options_and_says_when_it_cannot_write(
    store: Path, tmp_path: Path
) -> None:
    page = tmp_path / "escaped.html"
    done = cli(store)("history", "--html", str(page), "--since", "<b>7d</b>")
    assert done.returncode == 2  # refused before anything is written
    assert not page.exists()
    done = cli(store)("history", "--html", str(tmp_path / "no" / "dir.html"))
    assert done.returncode == 1 and "cannot write" in done.stderr
