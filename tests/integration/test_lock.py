"""One controller per desired file, across real processes, surviving kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import reconciler
from reconciler.adapters.statedir import StateDir
from reconciler.errors import ControllerAlreadyRunning
from reconciler.runtime.lock import ControllerLock, read_holder

pytestmark = pytest.mark.integration

ROOT = Path(reconciler.__file__).resolve().parent.parent

HOLD = """
import sys, time
from reconciler.adapters.statedir import StateDir
from reconciler.runtime.lock import ControllerLock
with ControllerLock(StateDir(__import__("pathlib").Path(sys.argv[1]))):
    print("locked", flush=True)
    sys.stdin.read()
"""

TRY = """
import sys
from reconciler.adapters.statedir import StateDir
from reconciler.errors import ControllerAlreadyRunning
from reconciler.runtime.lock import ControllerLock
try:
    with ControllerLock(StateDir(__import__("pathlib").Path(sys.argv[1]))):
        print("acquired")
except ControllerAlreadyRunning as e:
    print(f"refused {e.pid}: {e}")
"""


def python(code: str, *args: str, **kwargs: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        **kwargs,
    )


def attempt(state: StateDir) -> str:
    proc = python(TRY, str(state.root))
    out, _ = proc.communicate(timeout=20)
    return out.strip()


@pytest.fixture
def state(tmp_path: Path) -> StateDir:
    return StateDir(tmp_path / "state")


@pytest.fixture
def holder(state: StateDir) -> Iterator[subprocess.Popen[str]]:
    proc = python(HOLD, str(state.root), stdin=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "locked"
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def test_second_controller_in_another_process_is_refused_with_the_pid(state: StateDir) -> None:
    with ControllerLock(state):
        out = attempt(state)
    assert out.startswith(f"refused {os.getpid()}: "), out
    assert f"pid={os.getpid()}" in out
    assert attempt(state) == "acquired"  # released on exit


def test_in_process_second_lock_is_refused(holder: subprocess.Popen[str], state: StateDir) -> None:
    with pytest.raises(ControllerAlreadyRunning) as refused:
        ControllerLock(state).acquire()
    assert refused.value.pid == holder.pid
    assert f"pid={holder.pid}" in str(refused.value)
    assert read_holder(state) == holder.pid


def test_kill_9_frees_the_lock_though_the_pid_file_remains(
    holder: subprocess.Popen[str], state: StateDir
) -> None:
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=10)
    assert state.lock.read_text() == f"{holder.pid}\n"  # stale pid left behind
    assert read_holder(state) is None
    with ControllerLock(state) as lock:
        assert lock.held
        assert state.lock.read_text() == f"{os.getpid()}\n"
        assert read_holder(state) == os.getpid()


def test_clean_exit_leaves_no_holder_and_no_pid(state: StateDir) -> None:
    with ControllerLock(state):
        assert read_holder(state) == os.getpid()
    assert read_holder(state) is None
    assert state.lock.read_text() == ""


def test_a_longer_stale_pid_is_fully_replaced(state: StateDir) -> None:
    state.ensure()
    state.lock.write_text("99999999\n")
    with ControllerLock(state):
        assert state.lock.read_text() == f"{os.getpid()}\n"


def test_read_holder_creates_nothing(state: StateDir) -> None:
    assert read_holder(state) is None
    assert not state.root.exists()


def test_status_probes_never_make_a_starting_controller_fail(state: StateDir) -> None:
    """read_holder's shared lock collides with a starting controller's exclusive one."""
    state.ensure()
    done = threading.Event()

    def probe() -> None:
        while not done.is_set():
            read_holder(state)

    thread = threading.Thread(target=probe)
    thread.start()
    try:
        for _ in range(200):
            with ControllerLock(state):
                pass
    finally:
        done.set()
        thread.join(timeout=10)


# --- the desired file's own lock: hard links, other state directories, saves ---------------


def _desired(tmp_path: Path) -> Path:
    path = tmp_path / "desired.yaml"
    path.write_text("project: test-project\nslots: []\n")
    return path


def test_a_hard_link_or_another_state_dir_meets_the_same_lock(tmp_path: Path) -> None:
    path = _desired(tmp_path)
    link = tmp_path / "elsewhere" / "link.yaml"
    link.parent.mkdir()
    os.link(path, link)
    with ControllerLock(StateDir(tmp_path / "a"), desired=path):
        for other in (link, path):
            with pytest.raises(ControllerAlreadyRunning, match="another path or with another"):
                ControllerLock(StateDir(tmp_path / "b"), desired=other).acquire()
    with ControllerLock(StateDir(tmp_path / "b"), desired=link):  # released: free again
        pass


def test_the_lock_follows_the_file_across_an_atomic_save(tmp_path: Path) -> None:
    path = _desired(tmp_path)
    with ControllerLock(StateDir(tmp_path / "a"), desired=path) as lock:
        fresh = tmp_path / "desired.yaml.tmp"
        fresh.write_text("project: test-project\nslots: []\n# saved\n")
        os.replace(fresh, path)  # an editor's save: a new inode at the same path
        lock.follow()
        with pytest.raises(ControllerAlreadyRunning):
            ControllerLock(StateDir(tmp_path / "b"), desired=path).acquire()


def test_a_controller_that_loses_its_file_to_another_stops_at_its_next_pass(
    tmp_path: Path,
) -> None:
    path = _desired(tmp_path)
    with ControllerLock(StateDir(tmp_path / "a"), desired=path) as first:
        fresh = tmp_path / "desired.yaml.tmp"
        fresh.write_text("project: test-project\nslots: []\n# saved\n")
        os.replace(fresh, path)
        taker = ControllerLock(StateDir(tmp_path / "b"), desired=path)  # takes the new inode
        with taker, pytest.raises(ControllerAlreadyRunning):
            first.follow()


def test_two_run_commands_through_a_hard_link_and_another_state_dir(
    tmp_path: Path, gcloud_env: dict[str, str]
) -> None:
    from tests.support.cli import CLI_ARGV, run_cli

    path = tmp_path / "desired.yaml"
    path.write_text(
        "project: test-project\nsettings: {backend: rest, poll_interval: 1s}\nslots: []\n"
    )
    link = tmp_path / "link.yaml"
    os.link(path, link)
    env = {**gcloud_env, "PYTHONPATH": str(ROOT)}
    first = subprocess.Popen(
        [*CLI_ARGV, "-f", str(path), "--state-dir", str(tmp_path / "a"), "run"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert first.stderr is not None
        assert "controlling" in first.stderr.readline()
        second = run_cli("-f", str(link), "--state-dir", str(tmp_path / "b"), "run", env=env)
        assert second.returncode == 75, second.stderr
        assert "another controller is running on" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=30)
