"""Flex-start through the real CLI, as a new user types it: ``add-slot`` and ``init`` take
``--mode flex-start --max-run-duration`` (and ``--renew``), refuse what the schema would
refuse in one ``error:`` line without writing anything, and ``plan`` / ``info`` say what an
ended run means instead of a bare "No changes."."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.emulator import Emulator
from reconciler.exitcodes import EX_OK, EX_REFUSED
from reconciler.model.load import parse_desired
from tests.fixtures.emulator import gcloud_env_for
from tests.support.cli import Cli

pytestmark = pytest.mark.integration

ZONE = "us-east5-b"
EMPTY = "project: test-project\ndefaults:\n  setup: {tmux: false}\nslots: []\n"
FLEX = """\
project: test-project
defaults:
  setup: {tmux: false}
slots:
  - name: flex
    zone: us-east5-b
    accelerator: v6e-8
    mode: flex-start
    max_run_duration: 1h
    want: held
"""


class World:
    def __init__(self, emu: Emulator, root: Path) -> None:
        self.emu = emu
        self.file = root / "desired.yaml"
        self.env = gcloud_env_for(emu, root)
        self.env["TPU_RECONCILER_FILE"] = str(self.file)
        self.env["TPU_RECONCILER_STATE_DIR"] = str(root / "state")

    def cli(self, text: str | None = None) -> Cli:
        if text is not None:
            self.file.write_text(text, encoding="utf-8")
        return Cli(env=self.env)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with Emulator(speed=20.0) as emu:
        yield World(emu, tmp_path_factory.mktemp("flex-input"))


ADD = ("add-slot", "--zone", ZONE, "--accelerator", "v6e-8")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--mode", "flex-start"), "mode flex-start needs 'max_run_duration' (at most 7d)"),
        (("--mode", "flex-start", "--max-run-duration", "8d"), "at most 7d for flex-start"),
        (("--mode", "flex-start", "--max-run-duration", "soon"), "expected a duration"),
        (("--mode", "spot", "--renew"), "renew needs mode flex-start, not spot"),
        (("--max-run-duration", "6h"), "max_run_duration needs mode flex-start"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else None,
)
def test_add_slot_refuses_broken_flex_keys(world: World, args: tuple[str, ...], says: str) -> None:
    done = world.cli(EMPTY)(*ADD, *args)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == EX_REFUSED, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], done.stderr
    assert world.file.read_text(encoding="utf-8") == EMPTY  # nothing written


def test_add_slot_writes_a_valid_flex_start_slot(world: World) -> None:
    cli = world.cli(EMPTY)
    done = cli(*ADD, "--mode", "flex-start", "--max-run-duration", "6h", "--renew")
    assert done.returncode == EX_OK, done.stderr
    assert "added slot 'flex-v6e8-use5b-1' (flex-start v6e-8 in us-east5-b)" in done.stdout
    assert cli("validate").returncode == EX_OK
    (spec,) = parse_desired(world.file.read_text(encoding="utf-8")).slots
    assert (spec.mode, spec.max_run_seconds, spec.renew) == ("flex-start", 21600, True)


def test_init_asks_for_the_run_length(world: World, tmp_path: Path) -> None:
    new = tmp_path / "new.yaml"
    base = ("-f", str(new), "init", "--project", "my-project-1", "--zone", ZONE)
    refused = world.cli()(*base, "--mode", "flex-start")
    assert refused.returncode == EX_REFUSED and not new.exists()
    assert refused.stderr.strip().splitlines() == [
        "error: mode flex-start needs a max_run_duration (at most 7d): give "
        "--max-run-duration, e.g. 6h"
    ]
    done = world.cli()(*base, "--mode", "flex-start", "--max-run-duration", "2d")
    assert done.returncode == EX_OK, done.stderr
    (spec,) = parse_desired(new.read_text(encoding="utf-8")).slots
    assert (spec.mode, spec.max_run_seconds) == ("flex-start", 2 * 86400)


def test_recommend_apply_asks_for_the_run_length(world: World) -> None:
    done = world.cli(EMPTY)("recommend", "v6e-8", "--mode", "flex-start", "--apply", "g")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: --mode flex-start --apply needs --max-run-duration, e.g. 6h"
    ]
    assert world.file.read_text(encoding="utf-8") == EMPTY


def test_plan_and_info_explain_an_ended_run(world: World) -> None:
    labels = {"managed-by": "tpu-reconciler"}
    world.emu.add_queued_resource(
        ZONE, "flex", "v6e-8", mode="flex-start", max_run_duration=3600.0, labels=labels,
        state="ACTIVE",
    )  # fmt: skip
    cli = world.cli(FLEX)
    info = cli("info", "flex")
    assert info.returncode == EX_OK, info.stderr
    assert "max_run_duration 1h, renew: false" in info.stdout
    world.emu.end_run(ZONE, "flex")
    world.emu.advance(60)
    done = cli("plan")
    assert done.returncode == EX_OK, done.stderr
    assert "  expired  flex: flex-start run expired at " in done.stdout, done.stdout
    assert "Set renew: true to queue a new run" in done.stdout
    assert done.stdout.rstrip().endswith("No changes.")


async def test_the_mcp_add_slot_tool_takes_flex_start(tmp_path: Path) -> None:
    from tests.integration.test_mcp_server import call, refused, session

    file = tmp_path / "desired.yaml"
    file.write_text(EMPTY, encoding="utf-8")
    async with session(tmp_path) as s:
        said = await refused(s, "add_slot", zone=ZONE, accelerator="v6e-8", mode="flex-start")
        assert "mode flex-start needs 'max_run_duration'" in said
        assert file.read_text(encoding="utf-8") == EMPTY
        doc = await call(
            s, "add_slot", zone=ZONE, accelerator="v6e-8", mode="flex-start",
            max_run_duration="6h", renew=True, operation_id="f1",
        )  # fmt: skip
    assert doc["slots"] == ["flex-v6e8-use5b-1"]
    (spec,) = parse_desired(file.read_text(encoding="utf-8")).slots
    assert (spec.mode, spec.max_run_seconds, spec.renew) == ("flex-start", 21600, True)
