"""``logs`` and ``ssh`` answer what they can tell without the network at once, in one line
with a named exit code and no traceback: a slot that does not exist (with "did you mean"), a
slot without a workload, a slot without a node, an emulated node (a documentation address:
nothing answers there), and an OS Login lookup that fails (naming ``settings.ssh_user``,
remembered so the next command does not look up again).

The real CLI in a subprocess, a snapshot written by the status writer, and for OS Login the
real gcloud pointed at a local endpoint that refuses (403) and counts its requests.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.adapters.statedir import StateDir
from reconciler.adapters.status_file import write_status
from reconciler.exitcodes import EX_OK, EX_REFUSED, EX_TEMPFAIL, EX_UNAVAILABLE
from reconciler.model.status import (
    SetupStatus,
    SlotStatus,
    StatusSnapshot,
    TmuxStatus,
    WorkloadStatus,
)
from tests.support.cli import clean_env, run_cli
from tests.support.oslogin import RefusingOsLogin, refusing_oslogin
from tests.support.tools import require_tool

pytestmark = pytest.mark.integration

ZONE = "us-central2-b"
EMULATED = "203.0.113.5"
WORK = "workload: {command: python3 train.py}"


def row(name: str, ips: tuple[str, ...] = (), *, run: bool = False) -> SlotStatus:
    return SlotStatus(
        name=name,
        zone=ZONE,
        accelerator="v4-8",
        state="ACTIVE" if ips else "WAITING_FOR_RESOURCES",
        ips=ips,
        instance=f"{name}@42" if ips else None,
        managed=True,
        setup=SetupStatus(),
        tmux=TmuxStatus(),
        workload=WorkloadStatus(state="pending", run_id="r1" if run else None) if run else None,
    )


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, StateDir]:
    path = tmp_path / "desired.yaml"
    path.write_text(
        "project: test-project\n"
        "defaults:\n  setup: {tmux: false}\n"
        "slots:\n"
        f"  - {{name: train-emulated, zone: {ZONE}, accelerator: v4-8, want: held, {WORK}}}\n"
        f"  - {{name: bare, zone: {ZONE}, accelerator: v4-8, want: held}}\n"
        f"  - {{name: queued, zone: {ZONE}, accelerator: v4-8, want: held, {WORK}}}\n"
        f"  - {{name: train-real, zone: {ZONE}, accelerator: v4-8, want: held, {WORK}}}\n"
    )
    state = StateDir(tmp_path / "state").ensure()
    rows = (
        row("train-emulated", (EMULATED,), run=True),
        row("bare", ("203.0.113.6",)),
        row("queued"),
        row("train-real", ("127.0.0.1",), run=True),
    )
    write_status(state.status, StatusSnapshot(slots=rows))
    return path, state


def cli(
    world: tuple[Path, StateDir], *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], float]:
    path, state = world
    started = time.monotonic()
    done = run_cli(
        "--file", str(path), "--state-dir", str(state.root), *args,
        env=env or clean_env(), cwd=path.parent, timeout=30,
    )  # fmt: skip
    return done, time.monotonic() - started


def one_line(done: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    """The command exited ``code`` with one stderr line containing ``words``, no traceback."""
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert done.returncode == code, (done.returncode, done.stderr)
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("verb", [("logs",), ("ssh", "--print"), ("ssh",)])
def test_a_missing_slot_is_refused_with_the_closest_name(
    world: tuple[Path, StateDir], verb: tuple[str, ...]
) -> None:
    done, took = cli(world, verb[0], "train-emulatd", *verb[1:])
    one_line(done, EX_REFUSED, "unknown slot 'train-emulatd'", "did you mean 'train-emulated'?")
    assert done.stdout == "" and took < 5


def test_logs_of_a_slot_without_a_workload_says_so(world: tuple[Path, StateDir]) -> None:
    done, took = cli(world, "logs", "bare")
    one_line(done, EX_REFUSED, "bare has no workload", "tpu-reconciler workload set bare")
    assert took < 5


def test_logs_of_a_slot_without_a_node_says_so(world: tuple[Path, StateDir]) -> None:
    done, took = cli(world, "logs", "queued")
    one_line(done, EX_TEMPFAIL, "queued has no reachable node now")
    assert took < 5


@pytest.mark.parametrize("verb", ["logs", "ssh"])
def test_an_emulated_node_is_refused_before_anything_dials(
    world: tuple[Path, StateDir], verb: str
) -> None:
    done, took = cli(world, verb, "train-emulated")
    one_line(
        done,
        EX_UNAVAILABLE,
        f"train-emulated: {EMULATED} is an emulated node's address",
        "no machine stands behind it",
    )
    assert took < 5
    _, state = world
    assert not state.oslogin_user.exists()  # nothing was looked up for it either


def test_ssh_print_on_an_emulated_node_prints_the_command_and_says_nothing_answers(
    world: tuple[Path, StateDir],
) -> None:
    done, took = cli(world, "ssh", "bare", "--print")
    one_line(done, EX_OK, "note: bare: 203.0.113.6 is an emulated node's address")
    assert done.stdout.startswith("ssh -A -i ") and done.stdout.rstrip().endswith("203.0.113.6")
    assert took < 2  # no lookup: the user is not needed to say nothing answers


@pytest.fixture
def refusing() -> Iterator[RefusingOsLogin]:
    with refusing_oslogin("caller lacks OS Login") as server:
        yield server


@pytest.fixture
def refusing_env(tmp_path: Path, refusing: RefusingOsLogin) -> dict[str, str]:
    gcloud = require_tool("gcloud")
    (tmp_path / "token").write_text("test-token\n")
    return clean_env(
        {
            "PATH": str(Path(gcloud).parent) + ":/usr/bin:/bin",
            "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"),
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_OSLOGIN": refusing.url,
            "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": str(tmp_path / "token"),
            "CLOUDSDK_CORE_PROJECT": "test-project",
            "CLOUDSDK_CORE_ACCOUNT": "alice@example.com",
            "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
        }
    )


@pytest.mark.parametrize("verb", [("logs",), ("ssh", "--print")])
def test_a_failing_oslogin_lookup_is_one_line_and_not_repeated(
    world: tuple[Path, StateDir],
    refusing_env: dict[str, str],
    refusing: RefusingOsLogin,
    verb: tuple[str, ...],
) -> None:
    done, took = cli(world, verb[0], "train-real", *verb[1:], env=refusing_env)
    first = one_line(
        done, EX_UNAVAILABLE, "OS Login user", "caller lacks OS Login", "settings.ssh_user"
    )
    assert "gcloud feedback" not in first and took < 10  # gcloud itself takes a second or two
    assert len(refusing.hits) == 1
    _, state = world
    assert (state.root / "oslogin_user.failed").exists()

    again, took = cli(world, verb[0], "train-real", *verb[1:], env=refusing_env)
    assert one_line(again, EX_UNAVAILABLE, "settings.ssh_user") == first
    assert len(refusing.hits) == 1 and took < 5  # remembered: no second lookup
