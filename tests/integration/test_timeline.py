"""``tpu-reconciler timeline`` end to end, on the fixed lab of ``tests/support/timeline_world``
(a snapshot in absolute time and a real SQLite capacity history): the text at 80 and 160
columns with ``--since`` / ``--until`` against goldens, ``--json``, ``--by``, the wrong inputs,
the MCP ``timeline`` tool through the SDK's own client (the same document), and the section of
the ``history --html`` page opened in headless Chromium with no network.

``UPDATE_GOLDEN=1 pytest tests/integration/test_timeline.py`` rewrites the goldens; review the
diff before committing it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests.integration.test_golden import golden
from tests.integration.test_history_pictures import open_in_chromium
from tests.support.cli import Cli, clean_env
from tests.support.png import pixels
from tests.support.timeline_world import Lab, make_lab

pytestmark = pytest.mark.integration

WINDOW = ("--since", "2026-03-01T18:00:00Z", "--until", "2026-03-02T18:00:00Z")
#: ``core.timeline_svg``'s held green, and its waiting pink.
HELD, WAITING = (0x00, 0x9E, 0x73), (0xCC, 0x79, 0xA7)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    return make_lab(tmp_path_factory.mktemp("lab"))


def cli(lab: Lab, columns: int = 80) -> Cli:
    env = clean_env({"COLUMNS": str(columns), "NO_COLOR": "1"})
    return Cli("--file", str(lab.path), "--state-dir", str(lab.state.root), env=env)


@pytest.mark.parametrize("columns", [80, 160])
def test_text_at_80_and_160_columns_is_the_golden(lab: Lab, columns: int) -> None:
    done = cli(lab, columns)("timeline", *WINDOW)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    assert lines[0] == "Lab timeline as of 03-02 00:00 UTC, by owner"
    assert "\x1b" not in done.stdout
    golden(f"timeline-{columns}.txt", done.stdout)


def test_by_zone_and_quota_and_the_width_flag(lab: Lab) -> None:
    run = cli(lab, 200)
    zone = run("timeline", "--by", "zone", "--width", "100")
    assert zone.returncode == 0, zone.stderr
    assert max(len(line) for line in zone.stdout.splitlines()) <= 100
    assert [line for line in zone.stdout.splitlines() if line in ("us-east5-b", "us-central2-b")]
    quota = run("timeline", "--by", "quota", "--until", "12h")
    assert "spot v6e chips in europe-west4-a" in quota.stdout.splitlines()
    assert "03-01 18:00 to 03-02 12:00 UTC, one column" in quota.stdout  # 12h on, 6h back


def test_json_is_the_document_and_names_the_estimates(lab: Lab) -> None:
    done = cli(lab)("timeline", "--json", *WINDOW)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema_version"] == "tpu-reconciler.timeline.v1"
    assert (doc["as_of"], doc["since"], doc["until"]) == (
        "2026-03-02T00:00:00Z", "2026-03-01T18:00:00Z", "2026-03-02T18:00:00Z",
    )  # fmt: skip
    slots = {s["name"]: s for s in doc["slots"]}
    assert slots["bob-v6e8"]["estimate"]["earliest_start"] == "2026-03-02T03:00:00Z"
    assert slots["carol-v6e64"]["estimate"]["never"].startswith("needs 64 spot v6e chips")
    # the history's past: the slot spot-v6e8-eua-2 was queued and held before it waited
    kinds = [s["kind"] for s in slots["spot-v6e8-eua-2"]["spans"]]
    assert kinds[-3:] == ["waiting", "queued (estimate)", "held (estimate)"]
    assert slots["spot-v6e8-eua-2"]["expected_wait"]["samples"] >= 3  # from the store
    gone = [s for s in doc["slots"] if not s["managed"] and s["state"] is None]
    assert gone, "requests only the history knows keep a row"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--since", "yesterday"), "--since: expected a duration like 12h"),
        (("--until", "2026-03-02 06:00"), "UTC offset"),
        (("--since", "1h", "--until", "2026-03-01T00:00:00Z"), "is not before"),
        (("--width", "0"), "--width: must be a positive number"),
    ],
)
def test_wrong_input_is_one_line_and_exit_2(lab: Lab, args: tuple[str, ...], words: str) -> None:
    done = cli(lab)("timeline", *args)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error: ") and words in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_by_is_checked_by_the_parser(lab: Lab) -> None:
    done = cli(lab)("timeline", "--by", "colour")
    assert done.returncode == 2 and "invalid choice: 'colour'" in done.stderr


def test_without_a_snapshot_or_a_history_it_shows_the_file_and_says_so(tmp_path: Path) -> None:
    fresh = make_lab(tmp_path, history=False)
    fresh.state.status.unlink()
    done = cli(fresh)("timeline")
    assert done.returncode == 0, done.stderr
    assert "note: no snapshot yet: start the controller" in done.stdout
    assert "bob-v6e8" in done.stdout and "Waiting for a quota" not in done.stdout


async def test_the_mcp_tool_returns_the_same_document(lab: Lab) -> None:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    args = ["-m", "reconciler.surfaces.mcp_server", "--file", str(lab.path)]
    params = StdioServerParameters(
        command=sys.executable,
        args=[*args, "--state-dir", str(lab.state.root)],
        env=clean_env(),
    )
    with (lab.root / "mcp.err").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            tools = {t.name: t for t in (await s.list_tools()).tools}
            result = await s.call_tool(
                "timeline", {"by": "quota", "since": WINDOW[1], "until": WINDOW[3]}
            )
            bad = await s.call_tool("timeline", {"until": "next week"})
    assert tools["timeline"].annotations.read_only_hint is True
    assert not result.is_error, result.content
    doc = result.structured_content
    assert doc["schema_version"] == "tpu-reconciler.mcp.v1"
    assert doc["document"] == "tpu-reconciler.timeline.v1" and doc["snapshot"]["present"]
    printed = json.loads(cli(lab)("timeline", "--json", "--by", "quota", *WINDOW).stdout)
    envelope = ("schema_version", "document", "snapshot")
    body = {k: v for k, v in doc.items() if k not in envelope}
    assert body == {k: v for k, v in printed.items() if k != "schema_version"}
    assert bad.is_error and "expected a duration like 1d" in bad.content[0].text  # type: ignore[union-attr]


def test_the_page_section_renders_offline_in_chromium(lab: Lab, tmp_path: Path) -> None:
    page = tmp_path / "lab.html"
    done = cli(lab)("history", "--html", str(page), "--until", "2026-03-02T00:00:00Z")
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert not re.search(r"<script|<link|<img|<iframe|@import|url\(|src=", text, re.I)
    assert "<h2>Who holds what, when</h2>" in text
    assert "bob-v6e8 (bob): ~03-02 03:00 (in 3h)" in text

    dom = open_in_chromium(page, tmp_path, "--dump-dom")
    assert re.search(r'<svg [^>]*id="timeline-chart"', dom.stdout)
    assert dom.stdout.count('class="tl-row slot"') == len(json.loads(
        cli(lab)("timeline", "--json").stdout
    )["slots"])  # fmt: skip
    assert 'id="tl-now"' in dom.stdout
    assert dom.console == [] and dom.requests == []

    shot = tmp_path / "shot.png"
    drawn = open_in_chromium(
        page, tmp_path, f"--screenshot={shot}", "--window-size=820,3000", "--hide-scrollbars"
    )
    assert drawn.console == [] and drawn.requests == []
    _, _, colours = pixels(shot)
    assert colours[HELD] > 3000, "no held spans drawn"
    assert colours[WAITING] > 500, "no waiting spans drawn"


def test_history_html_narrows_the_section_to_its_filters(lab: Lab, tmp_path: Path) -> None:
    page = tmp_path / "zone.html"
    done = cli(lab)("history", "--html", str(page), "--zone", "us-central2-b")
    assert done.returncode == 0, done.stderr
    section = page.read_text().split("<h2>Who holds what, when</h2>")[1]
    assert 'data-slot="dave-later"' in section and 'data-slot="bob-v6e8"' not in section


def test_an_unreadable_history_leaves_the_past_out_and_says_so(tmp_path: Path) -> None:
    broken = make_lab(tmp_path, history=False)
    broken.state.history.write_bytes(b"not a database, " * 64)
    done = cli(broken)("timeline", *WINDOW)
    assert done.returncode == 0 and done.stderr == "", done.stderr  # said once, in the notes
    assert "note: the capacity history cannot be read" in done.stdout
    assert "bob-v6e8 (bob) starts ~03-02 03:00 (in 3h)" in done.stdout  # the estimate stands
