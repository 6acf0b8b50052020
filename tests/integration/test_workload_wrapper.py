"""The workload wrapper itself (the bash script every worker runs), driven locally with the
exact argv and stdin the adapter sends: a spec cut off in transit starts nothing and its resend
starts the whole command once; two attempts of one slot whose specs arrive a moment apart never
both start; the exit record survives a disk the program filled (a small tmpfs), a launch onto a
full disk starts nothing, and a second run id for the same work adopts the first."""

from __future__ import annotations

import subprocess
import time
from dataclasses import replace
from importlib.resources import files
from pathlib import Path

import pytest

from reconciler.adapters.workload_wire import encode_spec
from reconciler.model.workload import LaunchRequest
from tests.support.disks import fill, small_disk

pytestmark = pytest.mark.integration

WRAPPER = str(files("reconciler.adapters").joinpath("workload_wrapper.sh"))


def _request(run: str, attempt: int, command: tuple[str, ...], workdir: Path) -> LaunchRequest:
    return LaunchRequest(
        slot="train-a",
        run_id=run,
        attempt=attempt,
        command=command,
        workdir=str(workdir),
        env={},
        secret_env={},
        workers=1,
    )


def _dir(base: Path, run: str, attempt: int) -> Path:
    return base / "w0" / "train-a" / run / str(attempt)


def _launch(base: Path, run: str, attempt: int, stdin: bytes) -> subprocess.CompletedProcess[str]:
    argv = ["bash", WRAPPER, "launch", str(_dir(base, run, attempt)), "0", "1", "train-a", run]
    return subprocess.run(
        [*argv, str(attempt)], input=stdin.decode("latin-1"), capture_output=True,
        text=True, encoding="latin-1", timeout=60,
    )  # fmt: skip


def _wait_exit(attempt_dir: Path, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while not (attempt_dir / "exit").exists():
        assert time.monotonic() < deadline, "the program never finished"
        time.sleep(0.05)
    return (attempt_dir / "exit").read_text()


def test_a_spec_cut_off_in_transit_starts_nothing_and_its_resend_starts_it_whole(
    tmp_path: Path,
) -> None:
    base, out = tmp_path / "base", tmp_path / "args"
    # A long argv (past 64 KiB, as a long command line or env gives), its last arguments the
    # ones that matter: a cut-off spec once started the program with the ones received so far.
    args = (*(f"--flag-{i}=value-{i:05d}" for i in range(3000)), "--resume", "ckpt-LAST")
    spec = encode_spec(_request("r1", 1, ("sh", "-c", f'printf "%s\\n" "$@" > {out}', "sh", *args),
                                tmp_path), {})  # fmt: skip
    assert len(spec) > 64 * 1024
    attempt = _dir(base, "r1", 1)
    for cut in (len(spec) // 3, len(spec) - 1, 0):
        done = _launch(base, "r1", 1, spec[:cut])
        assert done.stdout.startswith("error ") and "nothing was started" in done.stdout
        assert done.returncode == 65
        assert not (attempt / "started").exists() and not (attempt / "spec").exists()
    damaged = spec.replace(b"ckpt-LAST", b"ckpt-LOST")  # same length, other bytes
    assert _launch(base, "r1", 1, damaged).returncode == 65
    done = _launch(base, "r1", 1, spec)
    assert done.stdout.strip() == "launched", done.stdout + done.stderr
    assert _wait_exit(attempt).startswith("code=0 ")
    assert out.read_text().splitlines() == list(args)
    assert _launch(base, "r1", 1, spec).stdout.strip() == "already"  # and never twice


def test_two_attempts_whose_specs_arrive_a_moment_apart_never_both_start(tmp_path: Path) -> None:
    base = tmp_path / "base"
    first = encode_spec(_request("r1", 1, ("sleep", "30"), tmp_path), {})
    second = encode_spec(_request("r2", 1, ("sleep", "30"), tmp_path), {})
    argv = ["bash", WRAPPER, "launch", str(_dir(base, "r1", 1)), "0", "1", "train-a", "r1", "1"]
    racer: subprocess.Popen[bytes] | None = None
    slow = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert slow.stdin is not None
        slow.stdin.write(first[:10])  # the first launch has begun: its spec is on its way
        slow.stdin.flush()
        time.sleep(0.3)
        racer = subprocess.Popen(
            ["bash", WRAPPER, "launch", str(_dir(base, "r2", 1)), "0", "1", "train-a", "r2", "1"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        time.sleep(0.3)  # the second one's spec arrives whole, a round trip later
        assert racer.stdin is not None
        racer.stdin.write(second)
        racer.stdin.close()
        slow.stdin.write(first[10:])
        slow.stdin.close()
        assert slow.wait(timeout=60) == 0
        assert slow.stdout is not None and slow.stdout.read().strip() == b"launched"
        racer.wait(timeout=60)
        assert racer.stdout is not None
        racer_out = racer.stdout.read()
        assert b"is still running on this worker" in racer_out, racer_out
        slot_dir = base / "w0" / "train-a"
        started = sorted(p.parent.parent.name for p in slot_dir.glob("*/1/started"))
        assert started == ["r1"]
    finally:
        for proc in (slow, racer):
            if proc is not None and proc.poll() is None:
                proc.kill()
        attempt = _dir(base, "r1", 1)
        if (attempt / "started").exists():
            subprocess.run(["bash", WRAPPER, "stop", str(attempt), "100"], capture_output=True,
                           timeout=60)  # fmt: skip


def _probe(attempt_dir: Path) -> str:
    done = subprocess.run(["bash", WRAPPER, "probe", str(attempt_dir)], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    return done.stdout.strip()


def test_the_exit_record_survives_a_disk_the_program_filled(tmp_path: Path) -> None:
    """The program fills the worker's disk and crashes: its exit is still recorded (in the
    room set aside at launch), so the probe says exited with its code, not missing."""
    with small_disk(tmp_path / "disk", 64) as base:
        fill_then_fail = f"cat /dev/zero > {base}/hog; exit 3"
        spec = encode_spec(_request("r1", 1, ("sh", "-c", fill_then_fail), tmp_path), {})
        assert _launch(base, "r1", 1, spec).stdout.strip() == "launched"
        attempt = _dir(base, "r1", 1)
        assert _wait_exit(attempt).startswith("code=3 signal=none stopped=no ")
        assert (base / "hog").stat().st_size >= 40 * 1024  # it filled the disk (64 KiB)
        assert _probe(attempt).startswith("state=exited ") and " code=3 " in _probe(attempt)
        assert not list(attempt.glob("*.reserve")) and not list(attempt.glob("*.tmp.*"))


def test_a_launch_onto_a_full_disk_starts_nothing_and_leaves_no_secret(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with small_disk(tmp_path / "disk", 64) as base:
        # room for the spec, none for the records the attempt will need
        request = replace(_request("r1", 1, ("touch", str(marker)), tmp_path),
                          env={"TOKEN": "s3cret-value"})  # fmt: skip
        spec = encode_spec(request, {})
        (base / "w0" / "train-a").mkdir(parents=True)
        filler = fill(base, leave=4096)
        done = _launch(base, "r1", 1, spec)
        assert done.returncode == 74 and "nothing was started" in done.stdout, done.stdout
        attempt = _dir(base, "r1", 1)
        assert not (attempt / "started").exists() and not (attempt / "spec").exists()
        assert not list(attempt.glob("*.reserve"))
        assert _probe(attempt) == "state=missing"
        filler.unlink()  # room again: the resend starts it once
        assert _launch(base, "r1", 1, spec).stdout.strip() == "launched"
        assert _wait_exit(attempt).startswith("code=0 ")
        assert marker.exists()


def test_a_second_run_id_for_the_same_work_adopts_the_first_instead_of_starting(
    tmp_path: Path,
) -> None:
    """A restarted controller that lost which run it launched asks again under another id of
    the same generation and command: nothing starts, and both answers name the first run."""
    base = tmp_path / "base"
    first, again = "g1-0a1b2c3d-kx1", "g1-0a1b2c3d-kx9"
    other_work = "g1-99999999-kx9"
    sleeper = ("sh", "-c", f"echo started >> {tmp_path}/starts; sleep 30")
    spec = {run: encode_spec(_request(run, 1, sleeper, tmp_path), {})
            for run in (first, again, other_work)}  # fmt: skip
    try:
        assert _launch(base, first, 1, spec[first]).stdout.strip() == "launched"
        assert _launch(base, again, 1, spec[again]).stdout.strip() == f"adopt {first}/1"
        assert _probe(_dir(base, again, 1)) == f"state=missing adopt={first}/1"
        refused = _launch(base, other_work, 1, spec[other_work])  # other work: still refused
        assert refused.returncode == 75 and "is still running" in refused.stdout
        assert _probe(_dir(base, other_work, 1)) == "state=missing"
        # a run that was stopped on purpose is never adopted: a new one starts
        stop = ["bash", WRAPPER, "stop", str(_dir(base, first, 1)), "100"]
        assert subprocess.run(stop, capture_output=True, timeout=60).returncode == 0
        assert _probe(_dir(base, again, 1)) == "state=missing"
        assert _launch(base, again, 1, spec[again]).stdout.strip() == "launched"
        deadline = time.monotonic() + 20
        while (tmp_path / "starts").read_text().count("started") < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert (tmp_path / "starts").read_text() == "started\nstarted\n"
    finally:
        for run in (first, again):
            subprocess.run(["bash", WRAPPER, "stop", str(_dir(base, run, 1)), "100"],
                           capture_output=True, timeout=60)  # fmt: skip


@pytest.mark.parametrize(
    ("slices", "expected"),
    [
        (1, [(w, w, "10.0.0.1,10.0.0.2,10.0.0.3,10.0.0.4") for w in range(4)]),
        (2, [(0, 0, "10.0.0.1,10.0.0.2"), (1, 1, "10.0.0.1,10.0.0.2"),
             (2, 0, "10.0.0.3,10.0.0.4"), (3, 1, "10.0.0.3,10.0.0.4")]),
    ],
)  # fmt: skip
def test_hosts_tell_each_worker_its_place_in_its_slice(
    tmp_path: Path, slices: int, expected: list[tuple[int, int, str]]
) -> None:
    """Compute Engine does not tell a TPU VM its worker id or its slice's hosts: the launch
    carries every worker's address and the wrapper sets ``TPU_WORKER_ID`` (the worker's index
    in its slice) and ``TPU_WORKER_HOSTNAMES`` (its slice's addresses) from them."""
    hosts = ("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4")
    out = tmp_path / "out"
    command = ("sh", "-c", f'echo "$TPU_WORKER_ID $TPU_WORKER_HOSTNAMES" > {out}-$1', "sh")
    seen = []
    for w in range(4):
        req = replace(
            _request(f"r{w}", 1, (*command, str(w)), tmp_path), workers=4, slices=slices,
            hosts=hosts,
        )  # fmt: skip
        attempt = tmp_path / "base" / f"w{w}" / "train-a" / f"r{w}" / "1"
        argv = ["bash", WRAPPER, "launch", str(attempt), str(w), "4", "train-a", f"r{w}", "1"]
        done = subprocess.run(argv, input=encode_spec(req, {}), capture_output=True, timeout=60)
        assert done.stdout.strip() == b"launched", done.stdout + done.stderr
        assert _wait_exit(attempt).startswith("code=0 ")
        worker_id, names = (tmp_path / f"out-{w}").read_text().split()
        seen.append((w, int(worker_id), names))
    assert seen == expected
