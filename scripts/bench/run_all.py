"""Run every benchmark in one go and print a summary table (bounded: ~10 minutes).

Each benchmark runs as its own subprocess, one after the other (never two at once: they would
measure each other), with a timeout each and a deadline for the whole run: a benchmark that
would start after the deadline is skipped and listed as such. The polling benchmarks write
their rows as JSON (``--json``); the others' own output is kept and its last lines shown.
Everything lands in ``--out`` (default: a new directory under /tmp): one ``.log`` per
benchmark, the JSON rows, and ``summary.md`` (the table, in Markdown, for docs/performance.md).

    python scripts/bench/run_all.py                 # all of them
    python scripts/bench/run_all.py --only poll_cost status_speed
    python scripts/bench/run_all.py --quick         # fewer samples, shorter steady window

Exit status 1 when any benchmark missed a target, failed or timed out.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _rig

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Bench:
    name: str
    args: tuple[str, ...]
    quick: tuple[str, ...]
    timeout: float
    rows: bool  # writes --json rows (ours); else its printed output is the result


BENCHES = (
    Bench("poll_cost", (), ("--rest-repeat", "20", "--gcloud-repeat", "1"), 180, True),
    Bench("calls_per_poll", (), (), 180, True),
    Bench("compute_calls_per_poll", (), ("--sizes", "10", "100"), 240, True),
    Bench("status_speed", (), ("--runs", "5"), 180, True),
    Bench("edit_speed", ("--runs", "5"), ("--runs", "3"), 240, True),
    Bench("reaction", (), ("--samples", "8", "--gcloud-samples", "2"), 300, True),
    Bench("race_latency", (), ("--races", "4"), 240, True),
    Bench("steady_state", ("--window", "150"), ("--window", "60"), 300, True),
    Bench("plan_bench", (), (), 180, False),
    Bench("mcp_latency", (), ("--calls", "30"), 180, False),
    Bench("tui_speed", (), ("--runs", "8", "--starts", "3", "--idle", "15"), 240, False),
    Bench(
        "bootstrap_fanout", ("--repeat", "1"), ("--repeat", "1", "--sizes", "1", "16"), 300, False
    ),
    Bench("workload_fanout", ("--repeat", "2"), ("--repeat", "1", "--passes", "10"), 300, False),
    Bench("workload_reaction", (), ("--rounds", "2"), 300, False),
    Bench("history_cost", ("--passes", "20"), ("--passes", "8"), 300, True),
    Bench("history_query", (), ("--transitions", "200000"), 400, False),
    Bench("quiet_poll", (), ("--window", "15"), 300, True),
)


@dataclass
class Outcome:
    bench: Bench
    status: str  # ok | missed | failed | timeout | skipped | missing
    seconds: float
    rows: list[dict[str, Any]]
    tail: list[str]
    command: str


def run_one(bench: Bench, out: Path, quick: bool) -> Outcome:
    script = HERE / f"{bench.name}.py"
    if not script.exists():
        return Outcome(bench, "missing", 0.0, [], [], "")
    extra = bench.quick if quick else bench.args
    argv = [sys.executable, str(script), *extra]
    if bench.rows:
        argv += ["--json", str(out / f"{bench.name}.json")]
    shown = " ".join(["python", f"scripts/bench/{bench.name}.py", *extra])
    log = out / f"{bench.name}.log"
    print(f"== {shown}", flush=True)
    started = time.monotonic()
    with log.open("w") as sink:
        proc = subprocess.Popen(
            argv, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=_rig.REPO
        )
        try:
            code = proc.wait(timeout=bench.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = None
    took = time.monotonic() - started
    text = log.read_text(errors="replace").splitlines()
    rows: list[dict[str, Any]] = []
    if bench.rows and (out / f"{bench.name}.json").exists():
        rows = json.loads((out / f"{bench.name}.json").read_text())["rows"]
    if code is None:
        status = "timeout"
    elif code == 0:
        status = "ok"
    elif rows or (code == 1 and not bench.rows and not any("Traceback" in t for t in text)):
        status = "missed"
    else:
        status = "failed"
    print(f"   {status} in {took:.0f} s (log: {log})", flush=True)
    return Outcome(bench, status, took, rows, text[-12:], shown)


def _fmt(value: float) -> str:
    if value != value:  # NaN: not measured
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def summary(outcomes: list[Outcome]) -> str:
    lines = [
        "| benchmark | metric | value | target | result |",
        "| --- | --- | ---: | --- | --- |",
    ]
    for o in outcomes:
        if o.rows:
            for r in o.rows:
                verdict = "" if r["ok"] is None else ("pass" if r["ok"] else "**MISS**")
                value = f"{_fmt(r['value'])} {r['unit']}"
                lines.append(
                    f"| {o.bench.name} | {r['metric']} | {value} | {r['target']} | {verdict} |"
                )
        else:
            lines.append(f"| {o.bench.name} | (see its log) | | | {o.status} |")
    lines.append("")
    lines.append("| benchmark | command | status | seconds |")
    lines.append("| --- | --- | --- | ---: |")
    for o in outcomes:
        lines.append(f"| {o.bench.name} | `{o.command}` | {o.status} | {o.seconds:.0f} |")
    for o in outcomes:
        if not o.rows and o.tail:
            lines += ["", f"`{o.bench.name}` (last lines of its output):", "```", *o.tail, "```"]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--only", nargs="+", default=None, metavar="NAME")
    parser.add_argument("--quick", action="store_true", help="fewer samples, shorter windows")
    parser.add_argument("--deadline", type=float, default=600.0, help="seconds for the whole run")
    parser.add_argument("--out", type=Path, default=None, help="directory for logs and results")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-run-"))
    out.mkdir(parents=True, exist_ok=True)
    _rig.header("all benchmarks, one after the other")
    chosen = [b for b in BENCHES if args.only is None or b.name in args.only]
    started = time.monotonic()
    outcomes: list[Outcome] = []
    for bench in chosen:
        left = args.deadline - (time.monotonic() - started)
        if left < 30:
            outcomes.append(Outcome(bench, "skipped", 0.0, [], [], ""))
            print(f"== {bench.name}: skipped (deadline)", flush=True)
            continue
        outcomes.append(run_one(bench, out, args.quick))
    table = summary(outcomes)
    machine = "\n".join(f"- {k}: {v}" for k, v in _rig.machine().items())
    (out / "summary.md").write_text(f"{machine}\n\n{table}", encoding="utf-8")
    print()
    print(table)
    print(f"total {time.monotonic() - started:.0f} s; results in {out}")
    return 0 if all(o.status in ("ok", "missing") for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
