"""The pure parts of the workload adapter: what goes to the wrapper, what comes back."""

from __future__ import annotations

import hashlib

import pytest

from reconciler.adapters.workload_wire import (
    _Frames,
    attempt_dir,
    check_attempt,
    command_line,
    encode_spec,
    parse_probe,
)
from reconciler.errors import UnsafeName
from reconciler.model.workload import (
    LaunchRequest,
    LogLine,
    WorkerProbe,
    check_env_name,
    check_run_id,
)


def _req(**kw: object) -> LaunchRequest:
    values: dict[str, object] = {
        "slot": "train-a",
        "run_id": "r1",
        "attempt": 1,
        "command": "true",
        "workdir": "~/repo",
        "env": {"A": "x y"},
        "secret_env": {},
        "workers": 4,
    }
    values.update(kw)
    return LaunchRequest(**values)  # type: ignore[arg-type]


def _unframed(spec: bytes) -> bytes:
    """The records of a framed spec, after checking its ``end=<bytes> <sha256>`` line."""
    body, _, trailer = spec[:-1].rpartition(b"\0")
    body += b"\0"
    assert spec.endswith(b"\n")
    length, digest = trailer.removeprefix(b"end=").split(b" ")
    assert int(length) == len(body) and digest.decode() == hashlib.sha256(body).hexdigest()
    return body


def test_spec_is_nul_separated_records_in_order_then_its_frame() -> None:
    spec = encode_spec(_req(command="python3 train.py --x 'y'"), {"KEY": b"v@lue"})
    assert _unframed(spec).split(b"\0") == [
        b"workdir=~/repo",
        b"env=A=x y",
        b"env=KEY=v@lue",
        b"grace=60000",
        b"keep=5",
        b"shell=python3 train.py --x 'y'",
        b"",
    ]
    argv = encode_spec(_req(command=("python3", "a b", "$(x)"), workdir=None, env={}), {})
    assert _unframed(argv) == b"grace=60000\0keep=5\0arg=python3\0arg=a b\0arg=$(x)\0"


@pytest.mark.parametrize(
    "bad",
    [
        {"command": ""},
        {"command": ()},
        {"command": ("a\0b",)},
        {"env": {"TPU_RECONCILER_WORKER": "9"}},
        {"env": {"1BAD": "x"}},
        {"env": {"A;rm": "x"}},
        {"workdir": "a\0b"},
    ],
)
def test_spec_refuses_what_the_wrapper_cannot_carry(bad: dict[str, object]) -> None:
    with pytest.raises(UnsafeName):
        encode_spec(_req(**bad), {})


def test_names_on_the_remote_command_line_are_validated() -> None:
    assert attempt_dir("/home/u/.tpu-reconciler", 3, "train-a", "r1-2x", 2) == (
        "/home/u/.tpu-reconciler/w3/train-a/r1-2x/2"
    )
    for run_id in ("", "-r", "a/b", "a b", "x" * 64, "$(id)", "R1", "a.b"):
        with pytest.raises(UnsafeName):
            check_run_id(run_id)
    for attempt in (0, -1, True, 1.0, "1"):
        with pytest.raises(UnsafeName):
            check_attempt(attempt)
    with pytest.raises(UnsafeName):
        attempt_dir("/b", 0, "../x", "r1", 1)
    assert check_env_name("WANDB_API_KEY") == "WANDB_API_KEY"


def test_probe_answers() -> None:
    alive = parse_probe(2, "state=alive pid=41 started=1700.5 code=- output=1701.25")
    assert alive == WorkerProbe(2, "alive", None, 41, 1700.5, 1701.25)
    exited = parse_probe(0, "state=exited pid=41 started=1700.5 code=3 output=-")
    assert (exited.state, exited.exit_code, exited.last_output_at) == ("exited", 3, None)
    assert parse_probe(1, "state=missing") == WorkerProbe(1, "missing")
    garbage = parse_probe(1, "bash: wrapper: No such file")
    assert garbage.state == "unknown" and garbage.error


def test_a_probe_names_the_run_to_adopt_only_when_it_is_a_valid_one() -> None:
    twin = parse_probe(1, "state=missing adopt=g1-0a1b2c3d-kx1/1")
    assert twin == WorkerProbe(1, "missing", adopt="g1-0a1b2c3d-kx1/1")
    for bad in ("../../x/1", "g1-0a1b2c3d-kx1/0", "g1-0a1b2c3d-kx1/", "G1/1", "g1-x/1;rm"):
        assert parse_probe(1, f"state=missing adopt={bad}").adopt is None, bad
    assert parse_probe(1, "state=alive adopt=g1-0a1b2c3d-kx1/1").adopt is None


def test_log_frames_cut_lines_and_keep_partials_until_their_end() -> None:
    frames = _Frames(3)
    assert frames.header(b"@ . 0\n") is None
    assert frames.header(b"@ 2 11\n") == (2, 11)
    assert frames.feed(2, b"one\ntw") == [LogLine(3, 2, "one")]
    assert frames.feed(2, b"o\r\nbar 50%\rbar 100%\n") == [
        LogLine(3, 2, "two"),
        LogLine(3, 2, "bar 100%"),
    ]
    assert frames.feed(2, b"half") == []
    assert frames.feed(3, b"next\n") == [LogLine(3, 2, "half"), LogLine(3, 3, "next")]
    with pytest.raises(ValueError):
        frames.header(b"garbage\n")


def test_logs_finds_the_node_and_run_in_the_snapshot() -> None:
    from reconciler.model.status import SlotStatus, StatusSnapshot, WorkloadStatus
    from reconciler.surfaces.cli._logs import target_of

    row = SlotStatus(
        name="train-a",
        zone="us-central2-b",
        state="ACTIVE",
        ips=("10.0.0.2", "10.0.0.3"),
        instance="train-a@4242",
        workload=WorkloadStatus(run_id="r7", attempt=2),
    )
    target = target_of(StatusSnapshot(slots=(row,)), "train-a")
    assert target.node is not None and target.node.instance == "train-a@4242"
    assert target.node.ips() == ("10.0.0.2", "10.0.0.3") and target.run_id == "r7"
    gone = SlotStatus(name="train-a", state="WAITING_FOR_RESOURCES")
    waiting = target_of(StatusSnapshot(slots=(gone,)), "train-a")
    assert waiting.node is None and "no reachable node" in waiting.reason
    assert target_of(None, "train-a").node is None
    assert "no slot" in target_of(StatusSnapshot(), "train-a").reason


def test_the_wrapper_is_clean_bash() -> None:
    import subprocess
    from importlib.resources import files

    from tests.support.tools import require_tool

    wrapper = files("reconciler.adapters").joinpath("workload_wrapper.sh")
    for argv in (["bash", "-n"], [require_tool("shellcheck"), "-s", "bash"]):
        done = subprocess.run([*argv, str(wrapper)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr


def test_command_line_quotes_every_word_for_the_remote_shell() -> None:
    line = command_line("/home/u/.tpu-reconciler/bin/workload-abc.sh", "stop", "/a b/$x", 100)
    assert line == "bash /home/u/.tpu-reconciler/bin/workload-abc.sh stop '/a b/$x' 100"
