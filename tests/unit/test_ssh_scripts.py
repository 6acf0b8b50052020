"""Script paths: relative to the desired file's directory and never out of it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconciler.adapters.ssh import instance_tag, log_dir_for, remote_script_name, resolve_scripts
from reconciler.errors import SetupFailed, UnsafeName


@pytest.fixture
def base(tmp_path: Path) -> Path:
    (tmp_path / "outside.sh").write_text("echo out\n")
    desired = tmp_path / "project"
    (desired / "setup").mkdir(parents=True)
    (desired / "setup" / "a.sh").write_text("echo a\n")
    (desired / "b.sh").write_text("echo b\n")
    return desired


def test_relative_paths_resolve_in_order_and_absolute_ones_as_written(
    base: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.sh"
    got = resolve_scripts(base, ["setup/a.sh", "./b.sh", str(outside), "setup/../b.sh"])
    assert got == (base / "setup" / "a.sh", base / "b.sh", outside, base / "b.sh")


@pytest.mark.parametrize("path", ["../outside.sh", "setup/../../outside.sh", "", " "])
def test_escaping_or_empty_paths_are_refused(base: Path, path: str) -> None:
    with pytest.raises(UnsafeName):
        resolve_scripts(base, ["b.sh", path])


def test_a_symlink_out_of_the_directory_is_refused(base: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path / "outside.sh", base / "link.sh")
    with pytest.raises(UnsafeName, match="outside"):
        resolve_scripts(base, ["link.sh"])
    os.symlink(base / "b.sh", base / "inner.sh")  # a link that stays inside is fine
    assert resolve_scripts(base, ["inner.sh"]) == (base / "b.sh",)


def test_missing_script_is_a_temporary_failure(base: Path) -> None:
    with pytest.raises(SetupFailed, match="not found"):
        resolve_scripts(base, ["nope.sh"])
    with pytest.raises(SetupFailed):
        resolve_scripts(base, ["setup"])  # a directory


def test_remote_names_and_log_dirs_are_safe(tmp_path: Path) -> None:
    assert remote_script_name(1, Path("/x/set up;rm -rf.sh")) == "01-set_up_rm_-rf.sh"
    assert instance_tag("node-a@1234") == "node-a.1234"
    assert log_dir_for(tmp_path, "slot-1", "node-a@1234") == tmp_path / "slot-1" / "node-a.1234"
    with pytest.raises(UnsafeName):
        log_dir_for(tmp_path, "../slot", "node-a@1")
