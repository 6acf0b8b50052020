"""A process of an attempt that the worker's user cannot end: the workload wrapper (the bash
script every worker runs) names it in ``stop``'s answer and in every probe while it is there,
and the wire reads it (``left=``), which is what holds the slot's next attempt back.

Made real with two throwaway Unix users: the wrapper runs as one (the worker's user), given
the capabilities to read another user's ``/proc/PID/environ`` (``CAP_SYS_PTRACE``,
``CAP_DAC_READ_SEARCH``) but not to signal it (no ``CAP_KILL``); the other owns a process that
carries the attempt's ``TPU_RECONCILER_ATTEMPT_DIR``, so it is found and survives ``SIGKILL``
(``EPERM``), like a process stuck in the kernel would. Needs root to create the users; under
``CI=true`` not being root is a failure.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path

import pytest

from reconciler.adapters.workload_wire import encode_spec, parse_probe, parse_stop
from reconciler.model.workload import LaunchRequest
from tests.support.tools import require_root, require_tool

pytestmark = pytest.mark.integration

WRAPPER = str(files("reconciler.adapters").joinpath("workload_wrapper.sh"))
CAPS = "+sys_ptrace,+dac_read_search"


@pytest.fixture
def users() -> Iterator[tuple[str, str]]:
    """(the worker's user, another user), created for the test and removed after it."""
    require_root("creating Unix users")
    for tool in ("useradd", "userdel", "setpriv"):
        require_tool(tool)
    names = (f"trw{os.getpid() % 100000}", f"tro{os.getpid() % 100000}")
    for name in names:
        subprocess.run(["useradd", "-M", "-r", "-s", "/bin/sh", name], check=True, timeout=60)
    try:
        yield names
    finally:
        for name in names:
            subprocess.run(["userdel", name], check=False, timeout=60)


def _as(user: str, argv: list[str], *, caps: bool = False) -> list[str]:
    extra = ["--inh-caps", CAPS, "--ambient-caps", CAPS] if caps else []
    return ["setpriv", "--reuid", user, "--regid", user, "--clear-groups", *extra, *argv]


def _wrapper(user: str, *args: str, stdin: bytes = b"", code: int = 0) -> str:
    done = subprocess.run(_as(user, ["bash", WRAPPER, *args], caps=True), input=stdin,
                          capture_output=True, timeout=90)  # fmt: skip
    assert done.returncode == code, done.stdout + done.stderr
    return done.stdout.decode().strip()


def _request(base: Path, attempt: int) -> bytes:
    request = LaunchRequest(
        slot="train-a", run_id="r1", attempt=attempt, command="while :; do sleep 0.1; done",
        workdir=str(base), env={}, secret_env={}, workers=1, grace=0.3,
    )  # fmt: skip
    return encode_spec(request, {})


def _launch(user: str, base: Path, attempt: int, code: int = 0) -> str:
    directory = str(base / "w0" / "train-a" / "r1" / str(attempt))
    argv = ["launch", directory, "0", "1", "train-a", "r1", str(attempt)]
    return _wrapper(user, *argv, stdin=_request(base, attempt), code=code)


def test_a_process_that_survives_sigkill_is_named_by_stop_and_by_each_probe_until_gone(
    users: tuple[str, str],
) -> None:
    worker, other = users
    home = Path(tempfile.mkdtemp(prefix="tr-left-"))
    holder: subprocess.Popen[bytes] | None = None
    try:
        home.chmod(0o755)
        base = home / "base"
        base.mkdir()
        uid = pwd.getpwnam(worker).pw_uid
        os.chown(base, uid, uid)
        directory = str(base / "w0" / "train-a" / "r1" / "1")
        assert _launch(worker, base, 1) == "launched"
        # a process of the attempt the worker's user may see but not signal
        marker = {"TPU_RECONCILER_ATTEMPT_DIR": directory, "PATH": os.environ["PATH"]}
        holder = subprocess.Popen(_as(other, ["sleep", "600"]), env=marker)
        time.sleep(0.3)
        assert parse_probe(0, _wrapper(worker, "probe", directory)).state == "alive"

        started = time.monotonic()
        answer = _wrapper(worker, "stop", directory, "300")
        took = time.monotonic() - started
        assert parse_stop(answer) == (holder.pid,), answer  # "stopped left=<pid>"
        assert took >= 10  # the grace, SIGKILL, then the kill deadline
        assert holder.poll() is None  # it is still there
        record = Path(directory, "exit").read_text()
        assert "stopped=yes" in record and f"left={holder.pid}" in record

        seen = parse_probe(0, _wrapper(worker, "probe", directory))
        assert (seen.state, seen.left) == ("exited", (holder.pid,))
        # the wrapper itself starts no next attempt over them either (the controller does not
        # ask while the probe names them; a launch from elsewhere is refused)
        refused = _launch(worker, base, 2, code=75)
        said = f"processes of attempt r1/1 outlived its stop and are still here (pid {holder.pid})"
        assert refused == f"error {said}"

        holder.kill()  # what a person does (root, or its owner)
        holder.wait(timeout=30)
        seen = parse_probe(0, _wrapper(worker, "probe", directory))
        assert (seen.state, seen.left) == ("exited", ())
        assert _launch(worker, base, 2) == "launched"
        assert _wrapper(worker, "stop", str(base / "w0" / "train-a" / "r1" / "2"), "300") == (
            "stopped"
        )
    finally:
        if holder is not None and holder.poll() is None:
            with contextlib.suppress(OSError):
                holder.kill()
            holder.wait(timeout=30)
        shutil.rmtree(home, ignore_errors=True)
