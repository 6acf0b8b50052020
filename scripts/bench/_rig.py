"""Private rig for the polling benchmarks (poll_cost, calls_per_poll, reaction, race_latency,
steady_state, status_speed): worlds of N slots, the emulator in its own process, a gcloud
environment that never touches the user's configuration, the controller as a subprocess
(``python -m reconciler run``) with its CPU and RSS read from /proc, result files for
``run_all.py``, and a description of the machine.

Everything here talks to 127.0.0.1 only. Not a public API: the benchmark scripts import it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import _common
from _common import REPO, command_line, median
from _common import quantile as pct

_common.ensure_repo_on_path()

from reconciler.emulator import EmulatorClient  # noqa: E402

__all__ = ["REPO", "command_line", "median", "pct"]

PROJECT: Final = "test-project"
ZONES: Final = ("us-central2-b", "europe-west4-a", "us-east1-d", "us-east5-a")
LABELS: Final = {"managed-by": "tpu-reconciler"}
CLK_TCK: Final = os.sysconf("SC_CLK_TCK")


# --- slots and files -------------------------------------------------------------------------


def slots(n: int, zones: Sequence[str] = ZONES, prefix: str = "slot") -> list[tuple[str, str]]:
    """``n`` (zone, name) pairs spread round-robin over ``zones``."""
    return [(zones[i % len(zones)], f"{prefix}-{i:05d}") for i in range(n)]


def scenario_yaml(
    world: Iterable[tuple[str, str]],
    *,
    state: str = "ACTIVE",
    accelerator: str = "v4-8",
    page_size: int | None = None,
    slices: int = 1,
) -> str:
    """An emulator scenario with every (zone, name) already in ``state``, labelled as ours
    (``slices`` > 1: each a multislice QR of that many nodes)."""
    lines = []
    if page_size is not None:
        lines.append(f"page_size: {page_size}")
    lines.append("queued_resources:")
    for zone, name in world:
        lines.append(
            f"  - {{name: {name}, zone: {zone}, accelerator: {accelerator}, state: {state},"
            " labels: {managed-by: tpu-reconciler}"
            + (f", slices: {slices}}}" if slices > 1 else "}")
        )
    return "\n".join(lines) + "\n"


def desired_yaml(
    world: Iterable[tuple[str, str]],
    *,
    backend: str = "rest",
    poll: str = "30s",
    fast: str = "5s",
    accelerator: str = "v4-8",
    extra: str = "",
) -> str:
    """A valid desired file holding every (zone, name); setup steps and tmux off."""
    body = [
        f"project: {PROJECT}",
        "settings:",
        f"  backend: {backend}",
        f"  poll_interval: {poll}",
        f"  fast_poll_interval: {fast}",
        "defaults:",
        "  setup: {bootstrap: false, tailscale: false, tmux: false}",
    ]
    rows = [
        f"  - {{name: {name}, zone: {zone}, accelerator: {accelerator}, want: held}}"
        for zone, name in world
    ]
    body += ["slots:", *rows] if rows else ["slots: []"]
    return "\n".join(body) + "\n" + extra


def write_atomic(path: Path, text: str) -> None:
    """Save like an editor does: a temp file renamed over the old one."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# --- environment -----------------------------------------------------------------------------


def cloud_env(url: str, directory: Path) -> dict[str, str]:
    """``os.environ`` without any ``CLOUDSDK_*`` of the caller, plus the variables that point
    gcloud and the REST backend at the emulator, config and token under ``directory``."""
    config = directory / "gcloud-config"
    config.mkdir(parents=True, exist_ok=True)
    token = directory / "token"
    token.write_text("bench-token\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLOUDSDK_", "TPU_RECONCILER"))}
    env.update(
        {
            "CLOUDSDK_CONFIG": str(config),
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU": url,
            "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": str(token),
            "CLOUDSDK_CORE_PROJECT": PROJECT,
            "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
            "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK": "1",
        }
    )
    return env


def gcloud_path() -> str | None:
    return shutil.which("gcloud")


def gcloud_version() -> str:
    exe = gcloud_path()
    if exe is None:
        return "not installed"
    try:
        out = subprocess.run(
            [exe, "--version"], capture_output=True, text=True, timeout=60, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.splitlines()[0] if out else "unknown"


def run_timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one command, output to /dev/null;
    RuntimeError (with its stderr) when it fails. The CPU figure is the steadier one on a
    shared machine: waiting for the cores is not in it."""
    cpu = cpu_children()
    t0 = time.perf_counter()
    done = subprocess.run(
        argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, check=False, cwd=cwd,
    )  # fmt: skip
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{argv} failed: {done.stderr.decode(errors='replace')[-2000:]}")
    return took, cpu_children() - cpu


def run_once(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Wall seconds of one command (``run_timed``)."""
    return run_timed(argv, env, cwd)[0]


def add_python_option(parser: argparse.ArgumentParser) -> None:
    """``--python [NAME=]PYTHON``, repeatable: read back with ``interpreters``."""
    parser.add_argument(
        "--python", action="append", default=[], metavar="[NAME=]PYTHON",
        help="an interpreter to measure with what is installed in it (repeatable); "
        "default: this interpreter on this work tree",
    )  # fmt: skip


def interpreters(given: list[str]) -> list[tuple[str, str]]:
    """(name, python) for each ``--python [NAME=]PYTHON``; this interpreter when none."""
    if not given:
        return [("this tree", sys.executable)]
    out = []
    for item in given:
        name, sep, python = item.partition("=")
        out.append((name, python) if sep else (item, item))
    return out


def interpreter_env(python: str, env: dict[str, str]) -> dict[str, str]:
    """``env`` for ``python``: the interpreter running the benchmark runs this work tree
    (``PYTHONPATH``), any other what is installed in it."""
    own = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    if python == sys.executable:
        own["PYTHONPATH"] = str(REPO)
    return own


def python_output(python: str, env: dict[str, str], cwd: Path, *argv: str) -> str:
    """What ``python *argv`` prints (it must succeed)."""
    done = subprocess.run(
        [python, *argv], env=env, cwd=cwd, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def compile_package(python: str, env: dict[str, str], cwd: Path) -> str:
    """The directory of the ``reconciler`` package ``python`` imports, its ``.pyc`` compiled
    as an install does (these machines set ``PYTHONDONTWRITEBYTECODE=1``: a work tree would
    be compiled again on every run)."""
    package = python_output(
        python, env, cwd, "-c", "import os, reconciler; print(os.path.dirname(reconciler.__file__))"
    )
    python_output(python, env, cwd, "-m", "compileall", "-q", package)
    return package


def terminate(proc: subprocess.Popen[Any], *, timeout: float) -> None:
    """SIGTERM (a clean stop), then SIGKILL after ``timeout`` seconds. Only our own child."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# --- the emulator in its own process ---------------------------------------------------------


class EmulatorProcess:
    """``python -m reconciler emulator serve`` with a scenario, so its CPU is not ours."""

    def __init__(
        self, directory: Path, scenario: str, *, speed: float = 1.0, ip_pool: str | None = None
    ) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "scenario.yaml"
        path.write_text(scenario, encoding="utf-8")
        pool = ["--ip-pool", ip_pool] if ip_pool else []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "emulator", "serve", "--port", "0",
             "--speed", str(speed), "--scenario", str(path), "--project", PROJECT, *pool],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            text=True, cwd=REPO,
        )  # fmt: skip
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        if " on http://" not in first:
            self.stop()
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"emulator did not start: {first!r} {err[-2000:]}")
        self.url = first.split(" on ", 1)[1].split()[0]
        if not self.url.startswith("http://127.0.0.1:"):
            self.stop()
            raise RuntimeError(f"emulator is not on loopback: {self.url}")
        self.client = EmulatorClient(self.url, timeout=60)

    def stop(self) -> None:
        terminate(self.proc, timeout=10)


@contextmanager
def emulator_process(
    directory: Path, scenario: str, *, speed: float = 1.0, ip_pool: str | None = None
) -> Iterator[EmulatorProcess]:
    emu = EmulatorProcess(directory, scenario, speed=speed, ip_pool=ip_pool)
    try:
        yield emu
    finally:
        emu.stop()


# --- the controller as a subprocess ----------------------------------------------------------


class ControllerProcess:
    """``python -m reconciler -f FILE --state-dir DIR -q run``: what a user starts."""

    def __init__(self, desired: Path, state: Path, env: dict[str, str]) -> None:
        self.desired, self.state = desired, state
        self.log = (state.parent / "controller.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "-f", str(desired), "--state-dir", str(state),
             "-q", "run"],
            env=env, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
            cwd=REPO,
        )  # fmt: skip
        self.pid = self.proc.pid

    def snapshot(self) -> dict[str, Any] | None:
        try:
            doc: dict[str, Any] = json.loads((self.state / "status.json").read_text())
        except (OSError, ValueError):
            return None
        return doc

    def cpu_seconds(self) -> float:
        """utime + stime of the controller (and of children it waited for) from /proc."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        # fields[0] is field 3 (state): utime=14, stime=15, cutime=16, cstime=17
        ticks = sum(int(fields[i - 3]) for i in (14, 15, 16, 17))
        return ticks / CLK_TCK

    def memory_kb(self) -> dict[str, int]:
        """VmRSS and VmHWM (peak RSS) in kB."""
        out: dict[str, int] = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
        return out

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        terminate(self.proc, timeout=30)
        self.log.close()

    def log_tail(self) -> str:
        path = self.state.parent / "controller.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""


@contextmanager
def controller_process(
    desired: Path, state: Path, env: dict[str, str]
) -> Iterator[ControllerProcess]:
    ctl = ControllerProcess(desired, state, env)
    try:
        yield ctl
    finally:
        ctl.stop()


def wait_until(
    what: str, check: Callable[[], bool], *, timeout: float, interval: float = 0.02
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting until {what}")
        time.sleep(interval)


# --- measuring -------------------------------------------------------------------------------


def cpu_self() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def cpu_children() -> float:
    """CPU of every child this process has waited for (gcloud runs are waited for)."""
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


# --- results ---------------------------------------------------------------------------------


@dataclass
class Row:
    metric: str
    value: float
    unit: str
    target: str = ""
    ok: bool | None = None  # None: no target


@dataclass
class Report:
    bench: str
    command: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(
        self, metric: str, value: float, unit: str, target: str = "", ok: bool | None = None
    ) -> None:
        self.rows.append(Row(metric, value, unit, target, ok))
        mark = "" if ok is None else ("  PASS" if ok else "  MISS")
        tgt = f"  (target {target})" if target else ""
        print(f"  {metric:<58} {value:10.3f} {unit}{tgt}{mark}", flush=True)

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"  note: {text}", flush=True)

    @property
    def ok(self) -> bool:
        return all(r.ok is not False for r in self.rows)

    def save(self, path: Path | None) -> None:
        if path is not None:
            doc = {"bench": self.bench, "command": self.command, "notes": self.notes,
                   "rows": [asdict(r) for r in self.rows]}  # fmt: skip
            path.write_text(json.dumps(doc, indent=2), encoding="utf-8")


def machine() -> dict[str, str]:
    """``_common.machine()`` plus the gcloud version."""
    return {**_common.machine(), "gcloud": gcloud_version()}


def header(title: str) -> None:
    """The title, the command and the machine (with gcloud's version), as ``_common`` prints."""
    print(title)
    print(f"  command: {command_line()}")
    for key, value in machine().items():
        print(f"  {key}: {value}")
    print(flush=True)


def start(bench: str, title: str) -> Report:
    """An empty report for ``bench``, after printing the title, command and machine."""
    header(title)
    return Report(bench, command_line())


def finish(report: Report, json_path: Path | None) -> int:
    """Save the rows when asked; the exit status: 1 when a target was missed."""
    report.save(json_path)
    return 0 if report.ok else 1
