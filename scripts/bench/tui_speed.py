"""Benchmark: the TUI with a 1,000-slot snapshot, as a user runs it — in a real terminal.

``python -m reconciler -f desired.yaml --state-dir DIR tui`` runs in a pane of a private tmux
server (150x45, its own socket, no user config); what it draws is read from a copy of the
pane's output (read every 2 ms), the file by reading it every 1 ms. No controller runs: the
snapshot and the file are written by this script (``tests/support/tui_world.big_world``).

- start: from the exec of the TUI to the first output that holds the header, the first slot
  rows and the key footer (interpreter start and Textual's import included); the pane's
  output is copied to a file (``pipe-pane``) and read there, so drawing is timed from the
  bytes the terminal got, with no tmux polling competing for CPU;
- key -> file: ``S`` (run setup again: a generation bump, so every press writes) to
  desired.yaml's bytes changing on disk;
- snapshot -> table: status.json rewritten (atomically, as the controller does) with the
  first slot's state flipped ACTIVE <-> PROVISIONING, to the new state on screen;
- idle CPU: utime+stime of the TUI process (``/proc/<pid>/stat``) over ``--idle`` seconds
  with nothing changing, as % of one core.

Targets: start <= 800 ms, key -> file <= 100 ms, snapshot -> table <= 150 ms (medians),
idle <= 1 % of a core. Exit status 1 when one is missed.

    python scripts/bench/tui_speed.py [--slots 1000] [--runs 15] [--idle 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common

_common.ensure_repo_on_path()

from tests.support.tui_world import World, big_world  # noqa: E402

TARGETS = {"start_ms": 800.0, "key_to_file_ms": 100.0, "snapshot_to_table_ms": 150.0}
IDLE_TARGET_PCT = 1.0
TICKS = os.sysconf("SC_CLK_TCK")


class Pane:
    """A tmux pane whose output bytes are copied to a file (``pipe-pane``): what the TUI
    drew, when, read without polling tmux itself (``capture-pane`` runs would compete for the
    two cores with what they measure)."""

    def __init__(self, socket: str, out: Path) -> None:
        self.socket = socket
        self.out = out
        self.offset = 0

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return done.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "tui")

    def until(self, check: Callable[[str], bool], timeout: float = 20.0) -> float:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            if check(self.screen()):
                return time.perf_counter()
            time.sleep(0.005)
        raise TimeoutError(f"screen never matched; last:\n{self.screen()}")

    def mark(self) -> None:
        """Output from now on is what the next ``drawn`` looks at."""
        self.offset = self.out.stat().st_size if self.out.exists() else 0

    def drawn(self, *needles: bytes, timeout: float = 20.0) -> float:
        """When every needle has appeared in the output since ``mark``."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            with self.out.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
            if all(n in data for n in needles):
                return time.perf_counter()
            time.sleep(0.002)
        raise TimeoutError(f"never drew {needles}; the screen:\n{self.screen()}")

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, check=False)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _start(world: World, pane: Pane) -> tuple[float, float]:
    env = {
        "PYTHONPATH": str(_common.REPO),
        "HOME": os.environ.get("HOME", "/root"),
        "PATH": os.environ.get("PATH", ""),
        "TERM": "xterm-256color",
    }
    argv = [sys.executable, "-m", "reconciler", "--file", str(world.path)]
    argv += ["--state-dir", str(world.state.root), "tui"]
    env_args = [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
    # A shell that waits for Enter, then execs the TUI: the output copy is in place first.
    wait = ["sh", "-c", 'read _ && exec "$@"', "sh", *argv]
    pane.tmux("new-session", "-d", "-s", "tui", "-x", "150", "-y", "45", *env_args, *wait)
    pane.tmux("pipe-pane", "-O", "-t", "tui", f"cat >> {pane.out}")
    time.sleep(0.2)
    pane.mark()
    t0 = time.perf_counter()
    pane.tmux("send-keys", "-t", "tui", "Enter")
    t1 = pane.drawn(b"1000 slots", b"slot-00005", b"quit")
    pid = int(pane.tmux("display", "-p", "-t", "tui", "#{pane_pid}").strip())
    cpu = _cpu_seconds(pid) * 1000
    screen = pane.screen()
    assert "slot-00005" in screen and "quit" in screen, screen
    return (t1 - t0) * 1000, cpu


def _key_to_file(world: World, pane: Pane, runs: int, pid: int) -> tuple[list[float], list[float]]:
    out, cpu = [], []
    for _ in range(runs):
        before = world.path.read_bytes()
        c0 = _cpu_seconds(pid)
        t0 = time.perf_counter()
        pane.tmux("send-keys", "-t", "tui", "S")
        deadline = t0 + 5
        while world.path.read_bytes() == before:
            if time.perf_counter() > deadline:
                raise TimeoutError("S did not change desired.yaml")
            time.sleep(0.001)
        out.append((time.perf_counter() - t0) * 1000)
        time.sleep(0.3)  # the TUI redraws its footer and reloads; counted in the CPU
        cpu.append((_cpu_seconds(pid) - c0) * 1000)
    return out, cpu


def _snapshot_to_table(
    world: World, pane: Pane, runs: int, pid: int
) -> tuple[list[float], list[float]]:
    doc = json.loads(world.state.status.read_text())
    out, cpu = [], []
    for i in range(runs):
        state = "PROVISIONING" if i % 2 == 0 else "SUSPENDED"  # on screen nowhere else
        doc["slots"][0]["state"] = state
        text = json.dumps(doc)
        tmp = world.state.status.with_suffix(".bench")
        tmp.write_text(text)
        c0 = _cpu_seconds(pid)
        pane.mark()
        t0 = time.perf_counter()
        tmp.replace(world.state.status)
        out.append((pane.drawn(state.encode()) - t0) * 1000)
        cpu.append((_cpu_seconds(pid) - c0) * 1000)
        time.sleep(0.1)
    return out, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of idle measured")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        print("tmux is required (apt-get install tmux)", file=sys.stderr)
        return 2
    _common.print_header(f"TUI with {args.slots} slots, in a 150x45 tmux pane")
    root = Path(tempfile.mkdtemp(prefix="tui-bench-"))
    world = big_world(root, args.slots)
    starts: list[float] = []
    start_cpu: list[float] = []
    try:
        for _ in range(args.starts):
            pane = Pane(f"tuibench-{uuid.uuid4().hex[:8]}", root / f"out-{len(starts)}")
            try:
                wall, cpu = _start(world, pane)
                starts.append(wall)
                start_cpu.append(cpu)
            finally:
                pane.kill()
        pane = Pane(f"tuibench-{uuid.uuid4().hex[:8]}", root / "out-main")
        try:
            _start(world, pane)
            time.sleep(0.5)
            pid = int(pane.tmux("display", "-p", "-t", "tui", "#{pane_pid}").strip())
            keys, key_cpu = _key_to_file(world, pane, args.runs, pid)
            snaps, snap_cpu = _snapshot_to_table(world, pane, args.runs, pid)
            time.sleep(1.0)
            c0, t0 = _cpu_seconds(pid), time.perf_counter()
            time.sleep(args.idle)
            idle = (_cpu_seconds(pid) - c0) / (time.perf_counter() - t0) * 100
        finally:
            pane.kill()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows = {
        "start_ms": _common.median(starts),
        "key_to_file_ms": _common.median(keys),
        "snapshot_to_table_ms": _common.median(snaps),
    }
    cpu = {
        "start_cpu_ms": _common.median(start_cpu),
        "key_cpu_ms": _common.median(key_cpu),
        "snapshot_cpu_ms": _common.median(snap_cpu),
    }
    print(
        f"start to first full frame: median {rows['start_ms']:.0f} ms wall "
        f"(min {min(starts):.0f}, max {max(starts):.0f}; {len(starts)} starts); "
        f"the TUI's CPU by then {cpu['start_cpu_ms']:.0f} ms"
    )
    print(
        f"key (S) to desired.yaml written: median {rows['key_to_file_ms']:.1f} ms wall "
        f"(p90 {_common.quantile(keys, 0.9):.1f}; {len(keys)} presses); the TUI's CPU per "
        f"press (edit, redraw, reload) {cpu['key_cpu_ms']:.0f} ms"
    )
    print(
        f"snapshot change to redrawn table: median {rows['snapshot_to_table_ms']:.1f} ms wall "
        f"(p90 {_common.quantile(snaps, 0.9):.1f}; {len(snaps)} changes); the TUI's CPU "
        f"{cpu['snapshot_cpu_ms']:.0f} ms"
    )
    print(f"idle CPU: {idle:.2f} % of a core over {args.idle:.0f} s")
    missed = [k for k, target in TARGETS.items() if rows[k] > target]
    if idle > IDLE_TARGET_PCT:
        missed.append("idle_cpu_pct")
    if args.json:
        doc = {**rows, **cpu, "idle_cpu_pct": idle, "slots": args.slots, "missed": missed}
        args.json.write_text(json.dumps(doc, indent=2))
    for key in missed:
        print(f"MISSED: {key}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
