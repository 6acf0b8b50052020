#!/usr/bin/env python3
"""The full reliability run as one command: every test under tests/reliability,
the slow ones included, with ``RELIABILITY_PROFILE=full`` (50 kill cycles, 5,000 fuzzed files,
...), then a table of what was done and what broke.

    scripts/reliability.py                 # the full run (~15 minutes on 2 cores)
    scripts/reliability.py --ci            # the short run CI does (pytest -m "not slow")
    scripts/reliability.py --write-doc     # also put the table into docs/reliability.md
    scripts/reliability.py -- -k crash     # extra arguments go to pytest

Figures come from the tests themselves (``$RELIABILITY_FIGURES``, one JSON line per test);
known violations are the strict xfails, each naming the code to fix. Exit status: pytest's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parents[1]
DOC: Final = REPO / "docs" / "reliability.md"
BEGIN: Final = "<!-- figures:begin (scripts/reliability.py --write-doc) -->"
END: Final = "<!-- figures:end -->"

#: (test name in the figures, what it is, the figures to show).
ROWS: Final = (
    ("crash-short", "kill -9 cycles (CI)", ("cycles", "faults_total", "api_requests")),
    (
        "crash-full",
        "kill -9 cycles",
        ("cycles", "faults_total", "api_requests", "accepted_creates", "deletes",
         "longest_need_polls", "converged_after_s", "stale_deletes_on_a_newer_incarnation"),
    ),
    ("edits", "concurrent intent edits",
     ("edits", "by_surface", "retries", "saves", "clobbered_by_editor", "lost")),
    ("fuzz-desired-text", "fuzzed desired files", ("cases", "parsed_valid", "slowest_parse_s")),
    ("fuzz-desired-bytes", "fuzzed desired bytes", ("cases", "parsed_valid")),
    ("fuzz-api-observe", "fuzzed API answers (observe)", ("cases", "outcomes")),
    ("fuzz-api-controller", "fuzzed API answers (controller)",
     ("passes", "observe_errors", "creates_refused_as_existing")),
    ("unsafe-names-desired", "unsafe names in desired.yaml", ("cases",)),
    ("unsafe-names-adapters", "unsafe names to adapters", ("cases",)),
    ("script-paths", "script paths", ("cases", "refused", "resolved")),
)  # fmt: skip


def run_pytest(args: argparse.Namespace, figures: Path, junit: Path) -> int:
    env = dict(os.environ)
    env["RELIABILITY_FIGURES"] = str(figures)
    env["RELIABILITY_PROFILE"] = "ci" if args.ci else "full"
    if args.cycles:
        env["RELIABILITY_CYCLES"] = str(args.cycles)
    marker = "not slow" if args.ci else "slow or not slow"
    argv = [sys.executable, "-m", "pytest", "tests/reliability", "-m", marker, "-q", "-rxX"]
    argv += ["--junitxml", str(junit), "-o", "junit_family=xunit1", *args.pytest]
    print("+ " + " ".join(argv), file=sys.stderr, flush=True)
    return subprocess.run(argv, cwd=REPO, env=env, check=False).returncode


def read_figures(path: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            record = json.loads(line)
            out[record["test"]] = record
    return out


def test_counts(junit: Path) -> dict[str, int]:
    """Tests run, failed (a failure is a violation too) and xfailed, from the JUnit report."""
    counts = {"run": 0, "failed": 0, "xfailed": 0, "skipped": 0}
    if not junit.exists():
        return counts
    for case in ET.parse(junit).iter("testcase"):
        counts["run"] += 1
        skipped = case.find("skipped")
        if case.find("failure") is not None or case.find("error") is not None:
            counts["failed"] += 1
        elif skipped is not None:
            counts["xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"] += 1
    return counts


def known_violations(junit: Path) -> list[str]:
    """The strict xfails that held (each a violation found and reported, not yet fixed)."""
    if not junit.exists():
        return []
    found = []
    for case in ET.parse(junit).iter("testcase"):
        skipped = case.find("skipped")
        if skipped is not None and skipped.get("type") == "pytest.xfail":
            found.append(f"{case.get('classname', '')}.{case.get('name', '')}")
    return found


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in sorted(value.items()))
    return str(value)


def table(
    figures: dict[str, dict[str, Any]],
    known: Iterable[str],
    seconds: float,
    tests: dict[str, int],
) -> str:
    lines = [
        "| what | figures | violations |",
        "| --- | --- | --- |",
    ]
    total = 0
    for name, label, keys in ROWS:
        record = figures.get(name)
        if record is None:
            continue
        shown = "; ".join(f"{k.replace('_', ' ')} {_cell(record[k])}" for k in keys if k in record)
        violations = int(record.get("violations", 0))
        total += violations
        lines.append(f"| {label} (`{name}`, {record.get('profile')}) | {shown} | {violations} |")
    crash = figures.get("crash-full") or figures.get("crash-short")
    if crash:
        lines += ["", f"Faults by kind ({crash['test']}): {_cell(crash.get('faults', {}))}."]
        lines += [f"Kills by moment: {_cell(crash.get('kills', {}))}."]
        lines += [f"Scenario events: {_cell(crash.get('scenario_events', {}))}."]
    known = list(known)
    lines += [
        "",
        f"Tests: {tests['run']} run, {tests['failed']} failed, {tests['xfailed']} strict xfails, "
        f"{tests['skipped']} skipped.",
        f"Violations in this run: {total + tests['failed']} (in figures {total}, failed tests "
        f"{tests['failed']}). Known violations (strict xfails): {len(known)}.",
    ]
    lines += [f"- `{k}`" for k in known]
    lines += ["", f"Run took {seconds / 60:.1f} minutes."]
    return "\n".join(lines)


def write_doc(text: str) -> None:
    doc = DOC.read_text()
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(doc):
        raise SystemExit(f"{DOC}: no {BEGIN} ... {END} block")
    DOC.write_text(pattern.sub(lambda _: f"{BEGIN}\n{text}\n{END}", doc))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ci", action="store_true", help="the short CI run instead")
    parser.add_argument("--cycles", type=int, help="kill cycles in the full crash test")
    parser.add_argument("--write-doc", action="store_true", help="update docs/reliability.md")
    parser.add_argument("pytest", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="reliability-") as tmp:
        figures_path, junit = Path(tmp) / "figures.jsonl", Path(tmp) / "junit.xml"
        code = run_pytest(args, figures_path, junit)
        figures, known = read_figures(figures_path), known_violations(junit)
        tests = test_counts(junit)
    text = table(figures, known, time.monotonic() - started, tests)
    print(text)
    if args.write_doc:
        write_doc(text)
    return code


if __name__ == "__main__":
    sys.exit(main())
