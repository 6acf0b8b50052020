"""Small full disks and read-only files for reliability tests: a tmpfs of a few pages mounted
at a directory, a file bind-mounted read-only over itself (a rename onto it fails as a write to
a full or read-only state disk does).

Mounting needs root: locally a test without it is skipped, under ``CI=true`` (CI runs as root)
it fails, so a CI machine that cannot mount never passes by skipping.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.tools import in_ci, require_tool


def _mount(*args: str) -> None:
    mount = require_tool("mount")
    if os.geteuid() != 0:
        message = "mounting a small disk needs root"
        if in_ci():
            pytest.fail(f"CI=true: {message}", pytrace=False)
        pytest.skip(message)
    done = subprocess.run([mount, *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        message = f"mount {' '.join(args)} failed: {done.stderr.strip()}"
        if in_ci():
            pytest.fail(f"CI=true: {message}", pytrace=False)
        pytest.skip(message)


def _umount(path: Path) -> None:
    subprocess.run([require_tool("umount"), "-l", str(path)], capture_output=True, timeout=30)


@contextlib.contextmanager
def small_disk(path: Path, size_kib: int) -> Iterator[Path]:
    """A tmpfs of ``size_kib`` KiB at ``path`` (created), mode 0700, unmounted afterwards."""
    path.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size_kib}k,mode=0700", "tmpfs", str(path))
    try:
        yield path
    finally:
        _umount(path)


def fill(disk: Path, leave: int = 0) -> Path:
    """Fill ``disk`` until a write fails, then give back ``leave`` bytes (whole pages)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with contextlib.suppress(OSError):
            while os.write(fd, b"\0" * 4096):
                pass
        if leave:
            os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave))
    finally:
        os.close(fd)
    return filler


@contextlib.contextmanager
def read_only_file(path: Path) -> Iterator[None]:
    """``path`` bind-mounted read-only over itself: it can be read, never replaced."""
    _mount("--bind", str(path), str(path))
    try:
        _mount("-o", "remount,bind,ro", str(path))
        yield
    finally:
        _umount(path)


@contextlib.contextmanager
def read_only_dir(path: Path) -> Iterator[Path]:
    """``path`` bind-mounted over itself and remounted read-only (a state disk gone read-only
    under a running program); writable again afterwards."""
    _mount("--bind", str(path), str(path))
    try:
        # A file being written through the new mount at that instant makes the remount "busy":
        # try again for a moment before giving up.
        for _ in range(40):
            done = subprocess.run(
                [require_tool("mount"), "-o", "remount,bind,ro", str(path)],
                capture_output=True, timeout=30,
            )  # fmt: skip
            if done.returncode == 0:
                break
            time.sleep(0.05)
        else:
            _mount("-o", "remount,bind,ro", str(path))  # fails (or skips) with mount's words
        yield path
    finally:
        _umount(path)
