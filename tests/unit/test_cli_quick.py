"""surfaces/cli/_quick: ``status`` parsed without argparse reads exactly as argparse reads it.

For every spelling the quick parser accepts, its namespace must equal argparse's; for every
other it must decline (None), so argparse parses, helps and reports errors as it always did.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.surfaces.cli import build_parser
from reconciler.surfaces.cli._quick import parse

ACCEPTED = [
    ["status"],
    ["status", "--json"],
    ["status", "--json", "--json"],
    ["-f", "d.yaml", "status"],
    ["--file", "d.yaml", "status", "--json"],
    ["--file=d.yaml", "status"],
    ["--state-dir", "/tmp/s", "status"],
    ["--state-dir=/tmp/s", "-f", "x/y.yaml", "status", "--json"],
    ["-f", "a.yaml", "-f", "b.yaml", "status"],  # the last one wins, as in argparse
    ["-f", "status", "status"],  # a file named status
]

DECLINED = [
    [],
    ["--help"],
    ["status", "--help"],
    ["-v", "status"],
    ["-q", "status"],
    ["status", "--live"],
    ["status", "--watch"],
    ["status", "--interval", "5"],
    ["status", "--js"],  # argparse takes an abbreviation; the quick parser does not guess
    ["--fi", "d.yaml", "status"],
    ["-fd.yaml", "status"],
    ["-f", "-d.yaml", "status"],
    ["--file=", "status"],
    ["--", "status"],
    ["status", "extra"],
    ["status", "-f", "d.yaml"],  # argparse refuses a global option after the command
    ["-f"],
    ["--json", "status"],
    ["plan"],
    ["statuses"],
]


@pytest.mark.parametrize("env_file", [None, "from-env.yaml"])
@pytest.mark.parametrize("argv", ACCEPTED, ids=" ".join)
def test_an_accepted_argv_reads_as_argparse_reads_it(
    argv: list[str], env_file: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if env_file is None:
        monkeypatch.delenv("TPU_RECONCILER_FILE", raising=False)
    else:
        monkeypatch.setenv("TPU_RECONCILER_FILE", env_file)
    quick = parse(argv)
    assert quick is not None
    assert vars(quick) == vars(build_parser(argv).parse_args(argv))
    assert isinstance(quick.file, Path)


@pytest.mark.parametrize("argv", DECLINED, ids=lambda a: " ".join(a) or "(none)")
def test_anything_else_is_left_to_argparse(argv: list[str]) -> None:
    assert parse(argv) is None


def test_the_whole_tree_and_the_quick_parser_agree_on_status() -> None:
    """``build_parser()`` (every module) sets the same status defaults the quick parser does."""
    argv = ["status", "--json"]
    quick = parse(argv)
    assert quick is not None and vars(quick) == vars(build_parser().parse_args(argv))


def test_status_from_a_snapshot_loads_no_heavy_module(tmp_path: Path) -> None:
    """What the quick path is for: ``status`` imports neither argparse, nor dataclasses (and
    its ``inspect``), nor the desired-file loader when a snapshot is there to show."""
    import shutil
    import subprocess
    import sys

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    shutil.copy(Path(__file__).resolve().parents[1] / "golden" / "status.json", state)
    code = (
        "import sys\n"
        "from reconciler.surfaces.cli import main\n"
        f"code = main(['-f', {str(tmp_path / 'desired.yaml')!r}, '--state-dir', {str(state)!r},"
        " 'status'])\n"
        "heavy = {'argparse', 'dataclasses', 'inspect', 'pydantic', 'ruamel.yaml', 'gettext'}\n"
        "print(code, sorted(heavy & set(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip() == "0 []"
    assert "od-v48-usc2b-1" in done.stdout
