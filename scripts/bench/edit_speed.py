"""Benchmark: an intent edit (``hold``, ``release``) and ``validate`` on a big desired file,
against parsing the same file with PyYAML's libyaml loader, interpreter start included.

For each size (``--slots``, default 200 and 1,000) a desired file is written as people write
one: a header comment, settings and defaults, block-style slots with a comment every ten and a
``want: held  # ...`` on most, and two race groups (flow and block). For each interpreter
measured (``--python``, repeatable; by default the one running this script, on this work
tree), these commands run with output to /dev/null, each on its own copy of the files:

- the floor: ``python -c "import sys, yaml; yaml.load(open(sys.argv[1]),
  Loader=yaml.CSafeLoader)" desired.yaml`` (that interpreter, PyYAML with libyaml);
- ``python -m reconciler -f desired.yaml validate``;
- ``python -m reconciler -f desired.yaml --state-dir S release --yes SLOT``, then
  ``... hold SLOT`` (the slot in the middle of the file: each changes the file, and the two
  leave it as it was, but for the spaces before the want line's comment: checked after the
  first round).

**Interleaved, in one run**: one untimed round of every command, then ``--runs`` rounds, each
running every command of every interpreter and size once in turn, so a change in the shared
machine's load falls on all of them alike. Each interpreter's package is byte-compiled first
(these machines set ``PYTHONDONTWRITEBYTECODE=1``), as an install does. The interpreter
running this script measures this work tree (``PYTHONPATH``); any other, e.g. a venv made with
``pip install .`` of another checkout (``--python main=/tmp/venv-main/bin/python``: before and
after in one run), measures what is installed in it (it needs PyYAML for the floor).

Shown, not gated: an edit in one process, as the TUI and the MCP server make one (their editor
kept, no interpreter start): ``--in-process`` release+hold pairs, the median.

Targets, for each interpreter and size, the median against the floor's median: ``hold`` and
``release`` <= 8x, ``validate`` <= 4x. Exit status 1 when one is missed.

    python scripts/bench/edit_speed.py [--slots 200 1000] [--runs 10]
        [--in-process 5] [--python [NAME=]PYTHON ...] [--json F] [--markdown F]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import TypeAlias

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _rig

#: Each command's median may take at most this many times the floor's.
TARGETS = {"hold": 8.0, "release": 8.0, "validate": 4.0}
FLOOR = "libyaml load (floor)"
IN_PROCESS = "in one process"
_LOAD = "import sys, yaml; yaml.load(open(sys.argv[1], encoding='utf-8'), Loader=yaml.CSafeLoader)"
#: As the TUI and the MCP server edit: one process, its editor kept, release then hold N times;
#: prints the median seconds of an edit (shown, not gated: no interpreter start in it).
_IN_PROCESS = """
import shutil, statistics, sys, tempfile, time
from pathlib import Path
from reconciler.adapters.statedir import StateDir
from reconciler.intent.edits import Hold, Release
from reconciler.intent.engine import IntentEditor
source, slot, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
tmp = Path(tempfile.mkdtemp())
shutil.copy(source, tmp / "desired.yaml")
editor = IntentEditor(tmp / "desired.yaml", StateDir(tmp / "state"), env={})
took = []
for _ in range(n + 1):
    for edit in (Release(slot), Hold(slot)):
        t0 = time.perf_counter()
        editor.apply(edit, source="mcp", confirmed=True)
        took.append(time.perf_counter() - t0)
shutil.rmtree(tmp)
print(statistics.median(took[2:]))
"""
_ZONES = ("us-central2-b", "europe-west4-a", "us-east1-d", "us-east5-a")  # all offer v6e


def desired_text(n: int) -> str:
    """A valid desired file of ``n`` slots, written as a person keeps one."""
    out = [
        "# The lab's TPUs: kept in git, edited by hand and by tpu-reconciler.",
        f"project: {_rig.PROJECT}",
        "settings:",
        "  poll_interval: 30s   # how often the controller looks",
        "  fast_poll_interval: 5s",
        "defaults:",
        "  mode: spot",
        "  setup: {bootstrap: false, tailscale: false, tmux: false}",
        "",
        "slots:",
    ]
    for i in range(n):
        if i % 10 == 0:
            out.append(f"  # rack {i // 10}")
        out += [f"  - name: slot-{i:05d}", f"    zone: {_ZONES[i % 4]}", "    accelerator: v6e-8"]
        if i >= 8:
            out.append("    want: held  # keep it")
    out += [
        "",
        "race_groups:",
        "  - name: first-four",
        "    count: 1",
        "    slots: [slot-00000, slot-00001, slot-00002, slot-00003]",
        "  - name: next-four",
        "    count: 2",
        "    slots:",
        *[f"      - slot-{i:05d}" for i in range(4, 8)],
    ]
    return "\n".join(out) + "\n"


def measure(args: argparse.Namespace, report: _rig.Report) -> Results:
    root = Path(tempfile.mkdtemp(prefix="bench-edit-"))
    # (interpreter name, slots, label, argv, env); release before hold in every round
    cases: list[tuple[str, int, str, list[str], dict[str, str]]] = []
    files: list[tuple[Path, str]] = []
    for k, (name, python) in enumerate(_rig.interpreters(args.python)):
        env = _rig.interpreter_env(python, dict(os.environ))
        report.note(f"{name}: {python}, package {_rig.compile_package(python, env, root)}")
        for n in args.slots:
            where = root / f"{k}-{n}"
            where.mkdir()
            desired = where / "desired.yaml"
            text = desired_text(n)
            desired.write_text(text, encoding="utf-8")
            files.append((desired, text))
            common = [python, "-m", "reconciler", "-f", str(desired)]
            edit = [*common, "--state-dir", str(where / "state")]
            slot = f"slot-{n // 2:05d}"
            cases += [
                (name, n, FLOOR, [python, "-c", _LOAD, str(desired)], env),
                (name, n, "validate", [*common, "validate"], env),
                (name, n, "release", [*edit, "release", "--yes", slot], env),
                (name, n, "hold", [*edit, "hold", slot], env),
            ]
    for _, _, _, argv, env in cases:  # one untimed round: page cache, the state directories
        _rig.run_once(argv, env, root)
    for desired, text in files:  # only the slot's want line moved (ruamel keeps its comment's
        before, after = text.splitlines(), desired.read_text(encoding="utf-8").splitlines()
        changed = [b for a, b in zip(before, after, strict=False) if a != b]  # column)
        if len(before) != len(after) or not all(b.startswith("    want: held") for b in changed):
            raise RuntimeError(f"release then hold did not give {desired} back: {changed}")
    walls: list[list[float]] = [[] for _ in cases]
    cpus: list[list[float]] = [[] for _ in cases]
    for _ in range(args.runs):
        for i, (_, _, _, argv, env) in enumerate(cases):
            wall, cpu = _rig.run_timed(argv, env, root)
            walls[i].append(wall)
            cpus[i].append(cpu)
    report.note(f"timer: subprocess, perf_counter and the child's CPU, {args.runs} rounds")
    got: Results = {
        (c[0], c[1], c[2]): (_rig.median(w), _rig.median(u))
        for c, w, u in zip(cases, walls, cpus, strict=True)
    }
    for (name, n, label), (wall, cpu) in got.items():
        report.add(f"[{name}] {n} slots, {label}: median", wall * 1000, "ms")
        report.add(f"[{name}] {n} slots, {label}: CPU, median", cpu * 1000, "ms")
        if label == FLOOR:
            continue
        floor, floor_cpu = got[name, n, FLOOR]
        target = TARGETS[label]
        ratio = wall / floor
        report.add(
            f"[{name}] {n} slots, {label} / floor", ratio, "x", f"<= {target:g}x", ratio <= target
        )
        report.add(f"[{name}] {n} slots, {label} / floor, CPU", cpu / floor_cpu, "x")
    for name, python in _rig.interpreters(args.python) if args.in_process else ():
        env = _rig.interpreter_env(python, dict(os.environ))
        for n in args.slots:
            desired = root / f"in-process-{n}.yaml"
            desired.write_text(desired_text(n), encoding="utf-8")
            argv = ["-c", _IN_PROCESS, str(desired), f"slot-{n // 2:05d}", str(args.in_process)]
            took = float(_rig.python_output(python, env, root, *argv))
            report.add(f"[{name}] {n} slots, {IN_PROCESS} (TUI, MCP): median", took * 1000, "ms")
            got[name, n, IN_PROCESS] = (took, took)
    return got


#: (interpreter, slots, command) -> medians of (wall, CPU) seconds
Results: TypeAlias = dict[tuple[str, int, str], tuple[float, float]]


def markdown(got: Results) -> str:
    """One row per interpreter and size: the floor, then each command's wall time, its ratio
    to the floor's (the gated one) and the ratio of their CPU times; an edit in one process."""
    head = "| tree | slots | libyaml load (floor) | validate | release | hold | edit in-process |"
    out = [head, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, n in dict.fromkeys((k[0], k[1]) for k in got):
        floor, floor_cpu = got[name, n, FLOOR]
        cells = [f"{floor * 1000:.0f} ms"]
        for label in ("validate", "release", "hold"):
            wall, cpu = got[name, n, label]
            mark = "" if wall / floor <= TARGETS[label] else " (over)"
            cells.append(
                f"{wall * 1000:.0f} ms = **{wall / floor:.1f}x**{mark} (CPU {cpu / floor_cpu:.1f}x)"
            )
        inside = got.get((name, n, IN_PROCESS))
        cells.append(f"{inside[0] * 1000:.0f} ms" if inside else "")
        out.append(f"| {name} | {n:,} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--slots", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument(
        "--in-process", type=int, default=5, metavar="N",
        help="also time N release+hold pairs in one process, as the TUI and MCP edit (0: no)",
    )  # fmt: skip
    _rig.add_python_option(parser)
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--markdown", type=Path, default=None, help="write the table here")
    args = parser.parse_args()
    report = _rig.start(
        "edit_speed",
        f"edit speed: hold, release and validate at {' and '.join(map(str, args.slots))} "
        "slots against libyaml's load, real commands in subprocesses",
    )
    table = markdown(measure(args, report))
    print("\n" + table)
    if args.markdown is not None:
        args.markdown.write_text(table, encoding="utf-8")
    return _rig.finish(report, args.json)


if __name__ == "__main__":
    sys.exit(main())
