"""Bad desired files: never a traceback, never an action, always ``FILE:LINE:COL: message``.

Hypothesis draws files (``_fuzz.desired_texts``): valid files truncated anywhere, spliced with
junk, values swapped for wrong types, huge numbers, unicode and deep nesting, YAML features
(anchors, tags, merge keys, several documents), whole lines dropped or swapped, structures
invented from the schema's own words; and raw bytes with flips (invalid UTF-8). For each:

- ``parse_desired`` returns a ``Desired`` or raises ``InvalidDesiredState`` — nothing else;
- every diagnostic is one line ``FILE:LINE:COL: message`` with LINE and COL inside the file;
- through ``DesiredLoader``, a file that does not parse leaves the last valid intent in force
  (the very same object), so the planner cannot act on it;
- a file that *does* parse (a truncation at a slot boundary, say) never makes the planner
  delete a QR the file does not explicitly release (slots cut off become unmanaged).

Counts: ``RELIABILITY_PROFILE=full`` runs 5,000 drawn files (and 5,000 byte-level ones); CI
runs 300 of each.
"""

from __future__ import annotations

import collections
import copy
import re
import time
from pathlib import Path
from typing import Final

import pytest
from hypothesis import example, given

from reconciler.core.plan import Kind, plan
from reconciler.errors import InvalidDesiredState
from reconciler.model.capacity import MANAGED_LABEL, MANAGED_VALUE, CapacityRequest, RequestState
from reconciler.model.desired import Desired
from reconciler.model.load import parse_desired
from reconciler.model.observed import Observation
from reconciler.runtime.desired_loader import DesiredLoader
from tests.reliability._fuzz import VALID_FILES, desired_texts, fuzz_settings, raw_bytes
from tests.reliability._harness import REPO, run_recorded
from tests.support.cli import run_cli

SOURCE: Final = "/work/intent/desired.yaml"
DIAGNOSTIC: Final = re.compile(
    r"(?P<file>[^\n]+?):(?P<line>[0-9]+):(?P<col>[0-9]+): (?P<msg>\S[^\n]*)"
)


def _base(text: str) -> Desired:
    return parse_desired(text, SOURCE)


BASES: Final = {text: _base(text) for text in VALID_FILES}


def _world(desired: Desired) -> Observation:
    """Every slot of ``desired`` held ACTIVE (ours), plus one unmanaged QR."""
    qrs = [
        CapacityRequest(
            name=s.name,
            zone=s.zone,
            state=RequestState.ACTIVE,
            accelerator=s.accelerator,
            labels={MANAGED_LABEL: MANAGED_VALUE},
            create_time=f"2026-01-01T00:00:{i:02d}Z",
        )
        for i, s in enumerate(desired.slots)
    ]
    qrs.append(CapacityRequest(name="not-ours", zone="us-central2-b", state=RequestState.ACTIVE))
    return Observation(requests=tuple(qrs))


def diagnostic_problems(text: str, rendered: list[str]) -> list[str]:
    """Why these rendered diagnostics break ``FILE:LINE:COL: message`` for ``text``."""
    if not rendered:
        return ["invalid, but no diagnostic"]
    lines = max(1, len(text.splitlines()) + 1)
    out = []
    for d in rendered:
        m = DIAGNOSTIC.fullmatch(d)
        if m is None:
            out.append(f"not FILE:LINE:COL: message: {d!r}")
            continue
        if m["file"] != SOURCE and not m["file"].startswith("$TPU_RECONCILER_"):
            out.append(f"names {m['file']!r}, not the file: {d!r}")
        line, col = int(m["line"]), int(m["col"])
        if not 1 <= line <= lines + 1 or not 1 <= col <= len(text) + 1:
            out.append(f"position {line}:{col} outside the file ({lines} lines): {d!r}")
        if "Traceback" in d:
            out.append(f"traceback in a diagnostic: {d!r}")
    return out


def parse_outcome(text: str) -> tuple[Desired | None, list[str], str | None]:
    """(desired, rendered diagnostics, crash) — crash is set when anything else was raised."""
    try:
        return parse_desired(text, SOURCE), [], None
    except InvalidDesiredState as e:
        return None, [str(d) for d in e.diagnostics], None
    except Exception as e:  # the violation this suite looks for
        return None, [], f"{type(e).__name__}: {e}"


def unreleased_deletes(desired: Desired, world: Observation) -> list[str]:
    """Deletes the planner makes in ``world`` that ``desired`` does not ask for."""
    out = []
    for action in plan(desired, world).actions:
        if action.kind not in (Kind.DELETE, Kind.REPLACE):
            continue
        spec = desired.slot(action.slot)
        qr = world.request(action.zone, action.slot)
        if spec is not None and spec.race_group is not None:
            continue  # a race with count < candidates releases the losers, as asked
        if spec is not None and spec.want == "released":
            continue
        if spec is None and desired.settings.prune and qr is not None and qr.managed:
            continue
        out.append(f"{action.symbol} {action.slot}: {action.reason}")
    return out


class Tally:
    def __init__(self) -> None:
        self.cases = 0
        self.kinds: collections.Counter[str] = collections.Counter()
        self.valid = 0
        self.slowest = 0.0
        self.loaders: dict[str, DesiredLoader] = {}  # per base: a store that loaded it

    def figures(self) -> dict[str, object]:
        return {
            "cases": self.cases,
            "kinds": dict(self.kinds),
            "parsed_valid": self.valid,
            "slowest_parse_s": round(self.slowest, 3),
        }


def check_text(base: str, text: str, path: Path, tally: Tally) -> list[str]:
    started = time.monotonic()
    desired, rendered, crash = parse_outcome(text)
    tally.slowest = max(tally.slowest, time.monotonic() - started)
    if crash is not None:
        return [f"parse_desired raised {crash}"]
    problems: list[str] = []
    if desired is None:
        problems += diagnostic_problems(text, rendered)
    else:
        tally.valid += 1
        problems += unreleased_deletes(desired, _world(BASES[base]))
    # Through the store, as the controller reads it: the last valid intent stays in force.
    # Each case starts from a copy of a store that loaded its base (parsed once per base, not
    # once per case): the state a fresh store is in after that load, the base in force.
    prepared = tally.loaders.get(base)
    if prepared is None:
        prepared = DesiredLoader(path, {}, source=SOURCE)
        path.write_text(base)
        assert prepared.load().desired is not None
        tally.loaders[base] = prepared
    store = copy.copy(prepared)
    before = store.current
    assert before is not None
    try:
        path.write_bytes(text.encode("utf-8"))
    except UnicodeEncodeError:
        return problems  # not a file anyone can save
    result = store.load()
    if desired is None and not text.startswith("\ufeff"):
        if result.desired is not before or result.current_valid:
            problems.append("an invalid file replaced the intent in force")
        problems += diagnostic_problems(text, [str(d) for d in result.errors])
    return problems


def test_fuzzed_desired_files_never_crash_nor_act(tmp_path: Path) -> None:
    tally = Tally()
    path = tmp_path / "desired.yaml"

    @fuzz_settings()
    @given(desired_texts())
    @example(
        ("truncate", VALID_FILES[0], VALID_FILES[0][: VALID_FILES[0].index("  - name: gone-b")])
    )
    @example(("truncate", VALID_FILES[1], ""))
    @example(("truncate", VALID_FILES[1], VALID_FILES[1][:-40]))
    def check(case: tuple[str, str, str]) -> None:
        how, base, text = case
        tally.cases += 1
        tally.kinds[how] += 1
        problems = check_text(base, text, path, tally)
        assert not problems, f"{how}: {text!r}\n" + "\n".join(problems)

    run_recorded("fuzz-desired-text", check, tally.figures)


def test_fuzzed_bytes_keep_the_last_valid_intent(tmp_path: Path) -> None:
    tally = Tally()
    path = tmp_path / "desired.yaml"
    store = DesiredLoader(path, {}, source=SOURCE)
    path.write_text(VALID_FILES[0])
    first = store.load().desired
    assert first is not None

    @fuzz_settings()
    @given(raw_bytes())
    @example(b"\xff\xfe" + VALID_FILES[0].encode())
    @example(VALID_FILES[0].encode()[:-3] + b"\xe2\x82")
    def check(data: bytes) -> None:
        tally.cases += 1
        before = store.current
        path.write_bytes(data)
        result = store.load()
        if result.current_valid:
            tally.valid += 1
            assert result.desired is not None and result.desired is store.current
            return
        assert result.desired is before, "an unreadable file replaced the intent in force"
        text = data.decode("utf-8", "replace")
        problems = diagnostic_problems(text, [str(d) for d in result.errors])
        assert not problems, f"{data!r}\n" + "\n".join(problems)

    run_recorded("fuzz-desired-bytes", check, tally.figures)


HOSTILE: Final[dict[str, str]] = {
    "empty": "",
    "whitespace": "  \n\t\n",
    "comments only": "# nothing\n# at all\n",
    "NUL byte": "project: test-project\x00\n",
    "list at top": "- project: test-project\n",
    "scalar at top": "test-project\n",
    "nested 1,000 deep": "project: " + "[" * 1000 + "]" * 1000 + "\n",
    "nested 100,000 deep": "project: " + "[" * 100_000 + "]" * 100_000 + "\n",
    "maps nested 3,000 deep": "project: test-project\nsettings: "
    + "{a: " * 3000
    + "1"
    + "}" * 3000,
    "5,000-digit number": "project: test-project\nsettings: {concurrency: " + "9" * 5000 + "}\n",
    "1e400 seconds": "project: test-project\nsettings: {poll_interval: 1e400}\n",
    "python object tag": "project: !!python/object/apply:os.system ['touch /tmp/pwned']\n",
    "over 4 MiB": "project: test-project\n" + "# padding\n" * 450_000,
    "two documents": "project: test-project\n---\nproject: other-project\n",
    "duplicate key": "project: test-project\nproject: test-project\n",
    "alias cycle": "project: test-project\nslots: &s [*s]\n",
    "alias bomb, 9^8 nodes, under slots": "\n".join(
        ["project: test-project", 'x0: &x0 ["lol","lol","lol","lol","lol","lol","lol","lol"]']
        + [f"x{i}: &x{i} [" + ",".join([f"*x{i - 1}"] * 9) + "]" for i in range(1, 8)]
        + ["slots: *x7", ""]
    ),
    "generator of 512,000 duplicates": (
        "project: test-project\ngenerate:\n  - {zones: ["
        + ", ".join(["us-central2-b"] * 2000)
        + "], accelerators: {v4-8: 256}, want: held}\n"
    ),
}


#: Slow to refuse (seconds each): the full run only.
SLOW_HOSTILE: Final = frozenset({"nested 100,000 deep"})


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_HOSTILE else n for n in HOSTILE],
)
def test_hostile_file_is_refused_with_a_position(name: str, tmp_path: Path) -> None:
    text = HOSTILE[name]
    started = time.monotonic()
    desired, rendered, crash = parse_outcome(text)
    elapsed = time.monotonic() - started
    assert crash is None, crash
    assert desired is None, "a hostile file parsed"
    assert not diagnostic_problems(text, rendered)
    assert elapsed < 30, f"took {elapsed:.1f}s"
    path = tmp_path / "desired.yaml"
    store = DesiredLoader(path, {}, source=SOURCE)
    path.write_text(VALID_FILES[1])
    before = store.load().desired
    path.write_text(text)
    result = store.load()
    assert result.desired is before and not result.current_valid
    assert len(rendered) <= 10_000, f"{len(rendered)} diagnostics for one file"


@pytest.mark.parametrize("name", ["NUL byte", "python object tag", "nested 1,000 deep", "empty"])
def test_validate_prints_positions_not_tracebacks(name: str, tmp_path: Path) -> None:
    path = tmp_path / "desired.yaml"
    path.write_text(HOSTILE[name])
    run = run_cli("-f", str(path), "validate", cwd=REPO)
    assert run.returncode == 1
    out = run.stdout + run.stderr
    assert "Traceback" not in out
    assert re.search(re.escape(str(path)) + r":[0-9]+:[0-9]+: \S", out), out


def test_unacceptable_character_is_reported_on_one_line_where_it_is() -> None:
    text = "project: test-project\nslots:\n  - name: a\x07b\n"
    desired, rendered, crash = parse_outcome(text)
    assert crash is None and desired is None
    assert len(rendered) == 1
    m = DIAGNOSTIC.fullmatch(rendered[0])
    assert m is not None, rendered[0]
    assert (m["line"], m["col"]) == ("3", "12")


def _alias_bomb(levels: int) -> str:
    lines = ["project: test-project", 'x0: &x0 ["lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"x{i}: &x{i} [" + ",".join([f"*x{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def _fastest_refusal(text: str, tries: int = 3) -> float:
    best = float("inf")
    for _ in range(tries):
        started = time.monotonic()
        desired, rendered, crash = parse_outcome(text)
        best = min(best, time.monotonic() - started)
        assert crash is None and desired is None and rendered
    return best


def test_alias_bomb_costs_no_more_than_its_size() -> None:
    five, six = _alias_bomb(5), _alias_bomb(6)
    assert len(six) < 400
    # One more level is 9x the nodes when aliases are expanded, ~45 more bytes when not.
    t5, t6 = _fastest_refusal(five), _fastest_refusal(six)
    assert t6 < 3 * t5 + 0.05, f"5 levels: {t5:.3f}s, 6 levels: {t6:.3f}s"


def test_generator_asking_for_100k_slots_is_refused() -> None:
    zones = ", ".join(f"zz-zone{i}-a" for i in range(100))
    text = (
        "project: test-project\ngenerate:\n  - {zones: [" + zones + "], accelerators: "
        "{v4-8: 256, v4-16: 256, v4-32: 256, v4-64: 256}, want: held}\n"
    )
    assert len(text) < 1500
    desired, rendered, crash = parse_outcome(text)
    assert crash is None
    assert desired is None, f"{len(desired.slots)} slots from {len(text)} bytes"
    assert not diagnostic_problems(text, rendered)
