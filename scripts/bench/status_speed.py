"""Benchmark: ``tpu-reconciler status`` wall time with 1,000 slots, interpreter start included.

A real snapshot is made first: the controller runs (subprocess, REST) against an emulator
holding 1,000 ACTIVE slots until its snapshot shows them all, then stops. Each command is then
run ``--runs`` times after one warm-up (median reported), output to /dev/null, with hyperfine
when it is installed and plain subprocess timing otherwise:

- ``python -c pass`` (the interpreter alone: the floor);
- ``python -m reconciler -f desired.yaml --state-dir ... status`` and ``status --json``;
- the installed ``tpu-reconciler`` console script next to this interpreter, when present
  (and the one first on PATH if that is a different file, e.g. a pyenv shim);
- for comparison (not gated; ``--no-compare`` skips it), ``gcloud compute tpus
  queued-resources list`` of the busiest zone against the same emulator.

Target: ``status`` <= 100 ms median. Exit status 1 when it is missed.

    python scripts/bench/status_speed.py [--slots 1000] [--runs 10] [--no-compare] [--json F]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _rig

TARGET_MS = 100.0


def _time_subprocess(argv: list[str], env: dict[str, str], runs: int) -> list[float]:
    def once() -> float:
        t0 = time.perf_counter()
        done = subprocess.run(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, check=False, cwd=_rig.REPO,
        )  # fmt: skip
        took = time.perf_counter() - t0
        if done.returncode != 0:
            raise RuntimeError(f"{argv} failed: {done.stderr.decode(errors='replace')[-2000:]}")
        return took

    once()  # warm the page cache and .pyc files
    return [once() for _ in range(runs)]


def _time_hyperfine(
    hyperfine: str, argv: list[str], env: dict[str, str], runs: int, out: Path
) -> list[float]:
    subprocess.run(
        [hyperfine, "--warmup", "1", "--runs", str(runs), "-N", "--export-json", str(out),
         "--output", "null", subprocess.list2cmdline(argv)],
        env=env, check=True, stdout=subprocess.DEVNULL, cwd=_rig.REPO,
    )  # fmt: skip
    return [float(t) for t in json.loads(out.read_text())["results"][0]["times"]]


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
        times = _time_subprocess(argv, env, runs)
        report.add(
            f"gcloud ... queued-resources list --zone={zone} (one zone; for comparison): "
            f"median of {len(times)}",
            _rig.median(times) * 1000,
            "ms",
            "",
            None,
        )

    return compare


def measure(args: argparse.Namespace, report: _rig.Report) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-status-"))
    compare = _gcloud_listing(report, min(args.runs, 5)) if args.compare else None
    desired, state, env = make_snapshot(args.slots, root, compare)
    size = (state / "status.json").stat().st_size
    report.note(f"snapshot of {args.slots} slots: {size / 1e6:.2f} MB status.json")
    # An install compiles .pyc files; a work tree under PYTHONDONTWRITEBYTECODE=1 (set on
    # these machines) never gets them, and every run would compile the package again.
    where = "import os, reconciler; print(os.path.dirname(reconciler.__file__))"
    package = subprocess.run(
        [sys.executable, "-c", where], env=env, check=True, capture_output=True, text=True,
        cwd=_rig.REPO,
    ).stdout.strip()  # fmt: skip
    subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=True, env=env)
    report.note(f"package: {package} (.pyc compiled first, as an install does)")
    hyperfine = shutil.which("hyperfine")
    report.note(f"timer: {'hyperfine' if hyperfine else 'subprocess + perf_counter'}")
    common = ["-f", str(desired), "--state-dir", str(state)]
    py = sys.executable
    cases: list[tuple[str, list[str], bool]] = [
        ("python -c pass (interpreter floor)", [py, "-c", "pass"], False),
        ("python -m reconciler status", [py, "-m", "reconciler", *common, "status"], True),
        ("python -m reconciler status --json",
         [py, "-m", "reconciler", *common, "status", "--json"], True),
    ]  # fmt: skip
    script = Path(py).parent / "tpu-reconciler"
    if script.exists():
        cases.append(
            ("tpu-reconciler status (console script)", [str(script), *common, "status"], True)
        )
    on_path = shutil.which("tpu-reconciler")
    if on_path and Path(on_path).resolve() != script.resolve():
        cases.append((f"{on_path} status (first on PATH)", [on_path, *common, "status"], False))
    for i, (label, argv, gated) in enumerate(cases):
        if hyperfine:
            times = _time_hyperfine(hyperfine, argv, env, args.runs, root / f"hf-{i}.json")
        else:
            times = _time_subprocess(argv, env, args.runs)
        med = _rig.median(times) * 1000
        report.add(
            f"{label}: median of {len(times)}",
            med,
            "ms",
            f"<= {TARGET_MS:g} ms" if gated else "",
            med <= TARGET_MS if gated else None,
        )
    report.note(
        "gated rows include interpreter start; a PATH entry that is a pyenv shim adds the "
        "shim's own start-up and is shown for information"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--slots", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument(
        "--no-compare", dest="compare", action="store_false",
        help="skip the gcloud listing shown for comparison",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    report = _rig.start(
        "status_speed", f"status speed: {args.slots} slots, real commands in subprocesses"
    )
    measure(args, report)
    return _rig.finish(report, args.json)


if __name__ == "__main__":
    sys.exit(main())
