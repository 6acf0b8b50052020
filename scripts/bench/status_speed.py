"""Benchmark: ``tpu-reconciler status`` at 1,000 slots, against the interpreter's own start.

A real snapshot is made first: the controller runs (subprocess, REST) against an emulator
holding 1,000 ACTIVE slots until its snapshot shows them all, then stops. Then, for each
interpreter measured (``--python``, repeatable; by default the one running this script, on
this work tree), these commands run with output to /dev/null:

- ``python -c pass`` (that interpreter alone: the floor);
- ``python -m reconciler -f desired.yaml --state-dir ... status`` and ``status --json``.

**Interleaved, in one run**: one untimed round of every command, then ``--runs`` rounds, each
running every command of every interpreter once in turn, so a change in the shared machine's
load falls on all of them alike (absolute times here move by tens of percent from one minute
to the next; ratios within one run do not).

Each interpreter reads its own copy of the state directory, whose snapshot its own package
has rewritten first (``read_status`` then ``write_status``: as its own controller would have
left it). The interpreter running this script measures this work tree (``PYTHONPATH``); any
other, e.g. a venv made with ``pip install .`` (the setting of the target), measures what is
installed in it. Commands run from the temporary directory, so ``-m`` never picks up a work
tree from the current directory.

Target: for each interpreter, the median of ``status`` <= 4x the median of its own
``python -c pass`` in the same run. Exit status 1 when it is missed. Shown, not gated:
``status --json``, and (unless ``--no-compare``) gcloud's listing of the busiest zone.

    python scripts/bench/status_speed.py [--slots 1000] [--runs 20] [--no-compare]
        [--python [NAME=]PYTHON ...] [--json F]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _rig

#: ``status`` may take at most this many times ``python -c pass`` of the same interpreter.
TARGET_RATIO = 4.0

_REWRITE = (
    "import sys\n"
    "from pathlib import Path\n"
    "from reconciler.adapters.status_file import read_status, write_status\n"
    "path = Path(sys.argv[1])\n"
    "write_status(path, read_status(path))\n"
)


def make_snapshot(
    n: int, root: Path, compare: Callable[[dict[str, str], str], None] | None = None
) -> tuple[Path, Path, dict[str, str]]:
    """The controller's own snapshot of ``n`` ACTIVE slots; ``compare(env, zone)`` runs while
    the emulator still serves them (gcloud's listing of the busiest zone, for comparison)."""
    world = _rig.slots(n)
    desired = root / "desired.yaml"
    state = root / "state"
    with _rig.emulator_process(root / "emu", _rig.scenario_yaml(world), speed=1.0) as emu:
        env = _rig.cloud_env(emu.url, root)
        _rig.write_atomic(desired, _rig.desired_yaml(world))
        with _rig.controller_process(desired, state, env) as ctl:

            def done() -> bool:
                doc = ctl.snapshot()
                rows = doc.get("slots", []) if doc else []
                return len(rows) == n and all(r.get("state") == "ACTIVE" for r in rows)

            _rig.wait_until("a snapshot of every slot ACTIVE", done, timeout=120, interval=0.1)
        if compare is not None:
            compare(env, world[0][0])
    return desired, state, env


def _gcloud_listing(report: _rig.Report, runs: int) -> Callable[[dict[str, str], str], None]:
    """What people compare ``status`` with: ``gcloud compute tpus queued-resources list`` of
    one zone (a quarter of the slots here), against the same emulator. Shown, not gated."""

    def compare(env: dict[str, str], zone: str) -> None:
        gcloud = _rig.gcloud_path()
        if gcloud is None:
            report.note("gcloud not installed: no comparison row")
            return
        argv = [gcloud, "compute", "tpus", "queued-resources", "list", f"--zone={zone}",
                "--format=json"]  # fmt: skip
        _rig.run_once(argv, env, _rig.REPO)  # warm-up
        times = [_rig.run_once(argv, env, _rig.REPO) for _ in range(runs)]
        report.add(
            f"gcloud ... queued-resources list --zone={zone} (one zone; for comparison): "
            f"median of {len(times)}",
            _rig.median(times) * 1000,
            "ms",
        )

    return compare


def _prepare(
    name: str, python: str, root: Path, state: Path, env: dict[str, str], report: _rig.Report
) -> tuple[Path, dict[str, str]]:
    """The state directory ``python`` reads (a copy, its snapshot rewritten by that package)
    and its environment; its package's ``.pyc`` compiled, as an install does."""
    own_env = _rig.interpreter_env(python, env)
    own = root / f"state-{len(list(root.glob('state-*')))}"
    shutil.copytree(state, own)
    package = _rig.compile_package(python, own_env, root)
    _rig.python_output(python, own_env, root, "-c", _REWRITE, str(own / "status.json"))
    report.note(f"{name}: {python}, package {package}, state {own}")
    return own, own_env


def measure(args: argparse.Namespace, report: _rig.Report) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-status-"))
    compare = _gcloud_listing(report, min(args.runs, 5)) if args.compare else None
    desired, state, env = make_snapshot(args.slots, root, compare)
    size = (state / "status.json").stat().st_size
    report.note(f"snapshot of {args.slots} slots: {size / 1e6:.2f} MB status.json")
    # (name, interpreter, command label, argv, env)
    cases: list[tuple[str, str, str, list[str], dict[str, str]]] = []
    for name, python in _rig.interpreters(args.python):
        own, own_env = _prepare(name, python, root, state, env, report)
        common = [python, "-m", "reconciler", "-f", str(desired), "--state-dir", str(own)]
        cases += [
            (name, python, "python -c pass", [python, "-c", "pass"], own_env),
            (name, python, "status", [*common, "status"], own_env),
            (name, python, "status --json", [*common, "status", "--json"], own_env),
        ]
    for _, _, _, argv, case_env in cases:  # one untimed round: page cache, .pyc
        _rig.run_once(argv, case_env, root)
    times: list[list[float]] = [[] for _ in cases]
    for _ in range(args.runs):
        for i, (_, _, _, argv, case_env) in enumerate(cases):
            times[i].append(_rig.run_once(argv, case_env, root))
    report.note(f"timer: subprocess + perf_counter, {args.runs} interleaved rounds")
    medians = {
        (name, label): _rig.median(t) * 1000
        for (name, _, label, _, _), t in zip(cases, times, strict=True)
    }
    for (name, _, label, _, _), t in zip(cases, times, strict=True):
        med = medians[name, label]
        report.add(f"[{name}] {label}: median of {len(t)}", med, "ms")
        if label != "python -c pass":
            ratio = med / medians[name, "python -c pass"]
            gated = label == "status"
            report.add(
                f"[{name}] {label} / python -c pass",
                ratio,
                "x",
                f"<= {TARGET_RATIO:g}x" if gated else "",
                ratio <= TARGET_RATIO if gated else None,
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--slots", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument(
        "--no-compare", dest="compare", action="store_false",
        help="skip the gcloud listing shown for comparison",
    )  # fmt: skip
    _rig.add_python_option(parser)
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    report = _rig.start(
        "status_speed", f"status speed: {args.slots} slots, real commands in subprocesses"
    )
    measure(args, report)
    return _rig.finish(report, args.json)


if __name__ == "__main__":
    sys.exit(main())
