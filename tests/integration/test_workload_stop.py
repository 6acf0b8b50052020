"""Stopping means stopped, and old attempts are pruned: the workload wrapper itself (the bash
script every worker runs), driven locally with the argv and stdin the adapter sends.

A program that puts a grandchild in a session of its own (``setsid``, after a double fork, so
it is neither in the program's process group nor its child) once escaped ``stop``. Each test
here scans ``/proc`` for what the program started, by a token in the command lines the test
chose (not by the wrapper's own marker), after ``stop`` and after a program that ended by itself.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from importlib.resources import files
from pathlib import Path

import pytest

from reconciler.adapters.workload_wire import encode_spec
from reconciler.model.workload import LaunchRequest

pytestmark = pytest.mark.integration

WRAPPER = str(files("reconciler.adapters").joinpath("workload_wrapper.sh"))


def _dir(base: Path, run: str, attempt: int) -> Path:
    return base / "w0" / "train-a" / run / str(attempt)


def _launch(base: Path, run: str, attempt: int, command: str, *, grace: float = 60.0,
            keep: int = 5) -> str:  # fmt: skip
    request = LaunchRequest(
        slot="train-a", run_id=run, attempt=attempt, command=command, workdir=str(base.parent),
        env={}, secret_env={}, workers=1, grace=grace, keep_attempts=keep,
    )  # fmt: skip
    argv = ["bash", WRAPPER, "launch", str(_dir(base, run, attempt)), "0", "1", "train-a", run]
    done = subprocess.run([*argv, str(attempt)], input=encode_spec(request, {}),
                          capture_output=True, timeout=60)  # fmt: skip
    return done.stdout.decode().strip()


def _stop(attempt_dir: Path, grace_ms: int) -> str:
    done = subprocess.run(["bash", WRAPPER, "stop", str(attempt_dir), str(grace_ms)],
                          capture_output=True, text=True, timeout=90)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()


def _probe(attempt_dir: Path) -> str:
    done = subprocess.run(["bash", WRAPPER, "probe", str(attempt_dir)], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    return done.stdout.split()[0]


def processes(token: str) -> list[int]:
    """Live processes (not zombies) whose command line holds ``token``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline:
            out.append(int(entry.name))
    return out


def _until(what: str, check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _escapers(token: str) -> str:
    """A shell fragment that leaves two processes outside the program's process group, named
    ``stubborn-TOKEN`` and ``plain-TOKEN``: one in a new session after a double fork that ignores
    SIGTERM (as a stuck data loader might), one plain ``setsid`` child that exits on it."""
    # each name is spelt in two quoted halves: the program's own command line never holds it
    stubborn = f"(setsid sh -c 'trap \"\" TERM; while :; do sleep 0.1; done' stub''born-{token} &)"
    plain = f"setsid sh -c 'while :; do sleep 0.1; done' pla''in-{token} &"
    return f"{stubborn}; {plain}\n"


@pytest.fixture
def cleanup() -> Iterator[list[str]]:
    tokens: list[str] = []
    yield tokens
    for token in tokens:  # whatever a failed test left behind
        for pid in processes(token):
            with contextlib.suppress(OSError):
                os.kill(pid, 9)


def test_stop_ends_descendants_that_left_the_process_group(
    tmp_path: Path, cleanup: list[str]
) -> None:
    base, token = tmp_path / "base", f"tok{os.getpid()}a"
    cleanup.append(token)
    command = f"{_escapers(token)}while :; do sleep 0.1; done"
    assert _launch(base, "r1", 1, command) == "launched"
    _until("both escapers", lambda: len(processes(f"stubborn-{token}")) == 1
           and len(processes(f"plain-{token}")) == 1)  # fmt: skip
    stubborn = processes(f"stubborn-{token}")[0]
    assert os.getsid(stubborn) != os.getsid(int((_dir(base, "r1", 1) / "pid").read_text()))
    started = time.monotonic()
    assert _stop(_dir(base, "r1", 1), 500) == "stopped"
    took = time.monotonic() - started
    assert processes(token) == []  # nothing of the attempt is left, the stubborn one included
    assert took >= 0.5  # the stubborn one got its grace, then SIGKILL
    record = (_dir(base, "r1", 1) / "exit").read_text()
    assert "stopped=yes" in record and "left=" not in record
    assert _probe(_dir(base, "r1", 1)) == "state=exited"


def test_a_program_that_ends_by_itself_takes_its_escapers_along_before_the_next_attempt(
    tmp_path: Path, cleanup: list[str]
) -> None:
    """The program exits 1 and leaves its escapers running: the attempt is alive (its lock held,
    so no next attempt can start on this worker) until they are gone; then exited, code 1."""
    base, token = tmp_path / "base", f"tok{os.getpid()}b"
    cleanup.append(token)
    command = f"{_escapers(token)}sleep 0.5; exit 1"
    assert _launch(base, "r1", 1, command, grace=1.0) == "launched"
    # by name: the program's own shell holds the token too, until it exits after 0.5 s
    _until("both escapers", lambda: len(processes(f"stubborn-{token}")) == 1
           and len(processes(f"plain-{token}")) == 1)  # fmt: skip
    refused = _launch(base, "r1", 2, "true")  # the escapers still run: no attempt 2 yet
    assert refused.startswith("error ") and "still running" in refused
    _until("the end of attempt 1", lambda: _probe(_dir(base, "r1", 1)) == "state=exited")
    assert processes(token) == []
    assert (_dir(base, "r1", 1) / "exit").read_text().startswith("code=1 signal=none stopped=no ")
    assert _launch(base, "r1", 2, "true") == "launched"


def test_pruning_keeps_exactly_the_newest_attempt_directories(tmp_path: Path) -> None:
    base = tmp_path / "base"
    for attempt in range(1, 8):
        run = "r1" if attempt <= 4 else "r2"  # a new run id counts like any later attempt
        assert _launch(base, run, attempt, "echo hi", keep=3) == "launched"
        _until("its end", lambda a=attempt, r=run: _probe(_dir(base, r, a)) == "state=exited")
    slot = base / "w0" / "train-a"
    kept = sorted(str(p.parent.relative_to(slot)) for p in slot.glob("*/*/started"))
    assert kept == ["r2/5", "r2/6", "r2/7"]
    assert not (slot / "r1").exists()  # an emptied run directory goes too
    assert (slot / "current").read_text().strip() == "r2/7"
