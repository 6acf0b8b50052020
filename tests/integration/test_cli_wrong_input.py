"""Every verb, given what a new user gets wrong, answers at once in one line.

The real CLI in a subprocess against the emulator, for a slot that does not exist, a slot with
no workload, no controller, an invalid file and a cloud that cannot be reached: no traceback,
the named exit code, an ``error: ...`` line that says what fixes it (or the file's
``file:line:col: message``), well within a few seconds.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from reconciler.emulator import Emulator
from reconciler.exitcodes import EX_OK, EX_REFUSED, EX_USAGE
from tests.fixtures.emulator import gcloud_env_for
from tests.support.cli import Cli

pytestmark = pytest.mark.integration

DESIRED = """\
project: test-project
defaults:
  setup: {tmux: false}
slots:
  - name: alpha        # held, no workload
    zone: us-central2-b
    accelerator: v4-8
    want: held
"""
INVALID = DESIRED.replace("    accelerator: v4-8", "\taccelerator: v4-8")
QUICK = 5.0  # seconds: "at once", with room for a loaded machine


class Case(NamedTuple):
    args: tuple[str, ...]
    code: int
    says: str  # in stderr when the command fails, else in stdout


MISSING_SLOT = [
    Case(("info", "nope"), EX_REFUSED, "error: unknown slot 'nope'"),
    Case(("info", "alpah"), EX_REFUSED, "did you mean 'alpha'?"),
    Case(("hold", "nope"), EX_REFUSED, "error: unknown slot 'nope'"),
    Case(("release", "nope"), EX_REFUSED, "error: unknown slot 'nope'"),
    Case(("release", "alpah", "--yes"), EX_REFUSED, "did you mean 'alpha'?"),
    Case(("race", "g", "alpha", "nope", "--count", "1"), EX_REFUSED, "unknown slot 'nope'"),
    Case(("remove-slot", "nope"), EX_REFUSED, "error: unknown slot 'nope'"),
    Case(("setup", "nope", "--bootstrap"), EX_REFUSED, "error: unknown slot 'nope'"),
    Case(("workload", "restart", "nope"), EX_REFUSED, "error: unknown slot 'nope'"),
    Case(("workload", "set", "nope", "--command", "true"), EX_REFUSED, "unknown slot 'nope'"),
    Case(("workload", "stop", "nope"), EX_REFUSED, "error: unknown slot 'nope'"),
    Case(("secret", "delete", "nope"), EX_REFUSED, "error: no secret 'nope' stored"),
    Case(("events", "--slot", "alpah"), EX_REFUSED, "did you mean 'alpha'?"),
    Case(("events", "--slot", "alpha"), EX_OK, ""),  # in the file, no events yet: no error
]
NO_WORKLOAD = [
    Case(("workload", "restart", "alpha"), EX_REFUSED, "has no workload: nothing to restart"),
    Case(("workload", "stop", "alpha"), EX_OK, "has no workload: nothing to stop"),
    Case(("workload", "set", "alpha", "--env", "A"), EX_USAGE, "--env takes NAME=VALUE, got 'A'"),
]
NO_CONTROLLER = [
    Case(("status",), EX_OK, "snapshot: none, nothing observed"),
    Case(("info", "alpha"), EX_OK, "last error: -"),
    Case(("setup", "alpha", "--bootstrap"), EX_OK, "No controller is running"),
    Case(("suspend",), EX_OK, "No controller is running"),
    Case(("confirm",), EX_OK, "nothing to confirm"),
    Case(("events",), EX_OK, ""),
    Case(("history",), EX_OK, "No capacity history yet"),
    Case(("recommend", "v4-8"), EX_OK, "us-central2-b"),
]
INVALID_FILE = [
    Case(("status",), EX_OK, "(INVALID"),
    Case(("plan",), EX_REFUSED, "desired.yaml:7:"),
    Case(("apply",), EX_REFUSED, "desired.yaml:7:"),
    Case(("info", "alpha"), EX_REFUSED, "is invalid: "),
    Case(("hold", "alpha"), EX_REFUSED, "is invalid now; fix it before editing"),
    Case(("workload", "restart", "alpha"), EX_REFUSED, "is invalid now"),
    Case(("suspend",), EX_REFUSED, "is invalid now"),
]
NO_CLOUD = [
    Case(("plan",), EX_REFUSED, "error: could not observe"),
    Case(("apply",), EX_REFUSED, "error: could not observe"),
    Case(("status", "--live"), EX_REFUSED, "error: could not observe"),
]


class World:
    def __init__(self, emu: Emulator, root: Path) -> None:
        self.root = root
        self.file = root / "desired.yaml"
        self.env = gcloud_env_for(emu, root)
        self.env["TPU_RECONCILER_FILE"] = str(self.file)
        self.env["TPU_RECONCILER_STATE_DIR"] = str(root / "state")

    def cli(self, text: str, **env: str) -> Cli:
        self.file.write_text(text)
        return Cli(env={**self.env, **env})


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with Emulator(speed=20.0) as emu:
        yield World(emu, tmp_path_factory.mktemp("wrong-input"))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when this returns: nothing listens


def _check(cli: Cli, case: Case) -> None:
    started = time.monotonic()
    done = cli(*case.args)
    took = time.monotonic() - started
    said = f"{' '.join(case.args)} -> {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stdout + done.stderr, said
    assert took < QUICK, f"{said}\ntook {took:.1f}s"
    assert done.returncode == case.code, said
    if case.code == EX_OK:
        assert case.says in done.stdout, said
        return
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, said  # one line, not a usage text or a stack
    assert lines[0].startswith("error: ") or ".yaml:" in lines[0], said
    assert case.says in lines[0], said


@pytest.mark.parametrize("case", MISSING_SLOT + NO_WORKLOAD, ids=lambda c: " ".join(c.args))
def test_a_missing_slot_or_workload(world: World, case: Case) -> None:
    _check(world.cli(DESIRED), case)


@pytest.mark.parametrize("case", NO_CONTROLLER, ids=lambda c: " ".join(c.args))
def test_no_controller(world: World, case: Case) -> None:
    _check(world.cli(DESIRED), case)


@pytest.mark.parametrize("case", INVALID_FILE, ids=lambda c: " ".join(c.args))
def test_an_invalid_file(world: World, case: Case) -> None:
    _check(world.cli(INVALID), case)


@pytest.mark.parametrize("case", NO_CLOUD, ids=lambda c: " ".join(c.args))
def test_a_cloud_that_cannot_be_reached(world: World, case: Case) -> None:
    dead = f"http://127.0.0.1:{_closed_port()}/"
    _check(world.cli(DESIRED, CLOUDSDK_API_ENDPOINT_OVERRIDES_TPU=dead), case)


NAMES_THAT_DO_NOT_EXIST = """\
project: test-project
slots:
  - {name: a, zone: us-east5-b, accelerator: v6e-7, want: held}
  - {name: b, zone: us-wset4-a, accelerator: v5litepod-8, want: held}
  - {name: c, zone: us-central1-c, accelerator: tpu7x-8, api: tpu, want: held}
  - {name: d, zone: us-west4-a, accelerator: v5e-8, want: held}
"""


def test_validate_refuses_names_that_do_not_exist_and_reads_googles_spelling(world: World) -> None:
    """Issue 32 item 2 and issue 31 item 3 through the CLI: each at its line, with the fix."""
    done = world.cli(NAMES_THAT_DO_NOT_EXIST)("validate")
    assert done.returncode == EX_REFUSED, done.stderr
    assert done.stderr.replace(f"{world.file}:", "desired.yaml:").splitlines() == [
        "desired.yaml:3:46: accelerator 'v6e-7' does not exist: TPU v6e (Trillium) comes as "
        "v6e-1, v6e-4, v6e-8, v6e-16, v6e-32, v6e-64, v6e-128 or v6e-256 (did you mean 'v6e-8'?)",
        "desired.yaml:4:21: zone 'us-wset4-a' is not a known zone (did you mean 'us-west4-a'?); "
        "for a zone newer than tpu-reconciler's list, set settings.allow_unknown_zones: true",
        "desired.yaml:5:63: the TPU API does not offer TPU7x (Ironwood): it is frozen at v2 to "
        "v6e; tpu7x is held through Compute Engine: write api: compute, or leave api out",
    ]
    valid = NAMES_THAT_DO_NOT_EXIST.replace("v6e-7", "v6e-8").replace("us-wset4-a", "us-west4-a")
    done = world.cli(valid.replace("api: tpu, ", ""))("validate")
    assert done.returncode == EX_OK, done.stderr
    assert f"{world.file}:6:46: note: v5e-8 is v5litepod-8" in done.stderr
