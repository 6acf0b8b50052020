"""watch_file wakes on every way editors save, through real inotify (watchfiles)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from reconciler.runtime.desired_loader import file_digest
from reconciler.runtime.watch import watch_file

pytestmark = pytest.mark.integration

WAKE_TIMEOUT = 1.0


@dataclass
class Watcher:
    path: Path
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    wakes: asyncio.Queue[float] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None

    async def run(self, **kwargs: float | str | None) -> None:
        async for _ in watch_file(self.path, stop=self.stop, **kwargs):  # type: ignore[arg-type]
            self.wakes.put_nowait(time.monotonic())

    async def wake(self, timeout: float = WAKE_TIMEOUT) -> float:
        return await asyncio.wait_for(self.wakes.get(), timeout)

    async def quiet(self, seconds: float) -> bool:
        """True when no wake-up arrives within ``seconds``."""
        try:
            await asyncio.wait_for(self.wakes.get(), seconds)
        except TimeoutError:
            return True
        return False

    def drain(self) -> int:
        n = 0
        while not self.wakes.empty():
            self.wakes.get_nowait()
            n += 1
        return n


@contextlib.asynccontextmanager
async def watching(path: Path, **kwargs: float | str | None) -> AsyncIterator[Watcher]:
    w = Watcher(path)
    w.task = asyncio.create_task(w.run(**kwargs))
    await asyncio.sleep(0.2)  # let the inotify watch be set up
    try:
        yield w
    finally:
        w.stop.set()
        if not w.task.done():
            await asyncio.wait_for(w.task, 2)


@pytest.fixture
async def watched(tmp_path: Path) -> AsyncIterator[Watcher]:
    path = tmp_path / "conf" / "desired.yaml"
    path.parent.mkdir()
    path.write_text("project: a\n")
    async with watching(path, safety_interval=30.0) as w:
        yield w


async def test_in_place_write_wakes(watched: Watcher) -> None:
    with watched.path.open("w") as f:
        f.write("project: b\n")
    await watched.wake()


async def test_atomic_rename_save_wakes_vscode_style(watched: Watcher) -> None:
    for n in range(3):  # every save, not only the first: the watch must survive renames
        tmp = watched.path.with_name(f".desired.yaml.{n}.tmp")
        tmp.write_text(f"project: v{n}\n")
        os.replace(tmp, watched.path)
        await watched.wake()


async def test_vim_style_save_wakes(watched: Watcher) -> None:
    for n in range(3):
        backup = watched.path.with_name("desired.yaml~")
        os.rename(watched.path, backup)
        watched.path.write_text(f"project: vim{n}\n")
        backup.unlink()
        await watched.wake()
        assert await watched.quiet(0.4)  # the file was only briefly missing: one wake-up


async def test_delete_and_recreate_wakes_for_each(watched: Watcher) -> None:
    watched.path.unlink()
    await watched.wake()
    watched.path.write_text("project: again\n")
    await watched.wake()
    watched.path.write_text("project: and-again\n")
    await watched.wake()


async def test_burst_of_writes_is_few_wakeups(watched: Watcher) -> None:
    for n in range(20):
        watched.path.write_text(f"project: burst{n}\n")
    await watched.wake()
    await asyncio.sleep(0.5)
    assert watched.drain() + 1 <= 3


async def test_unrelated_files_and_same_bytes_do_not_wake(watched: Watcher) -> None:
    (watched.path.parent / "other.yaml").write_text("x")
    watched.path.write_text(watched.path.read_text())  # same bytes: nothing changed
    assert await watched.quiet(0.5)


async def test_directory_deleted_and_recreated(watched: Watcher) -> None:
    shutil.rmtree(watched.path.parent)
    await watched.wake()  # the file is gone with it
    watched.path.parent.mkdir()
    watched.path.write_text("project: reborn\n")
    await watched.wake(2.0)
    watched.path.write_text("project: watched-again\n")  # the new directory is watched
    await watched.wake()


async def test_directory_missing_at_start(tmp_path: Path) -> None:
    path = tmp_path / "later" / "desired.yaml"
    async with watching(path, safety_interval=30.0) as w:
        assert await w.quiet(0.3)
        path.parent.mkdir()
        path.write_text("project: late\n")
        await w.wake(2.0)
        path.write_text("project: later\n")
        await w.wake()


async def test_stale_digest_wakes_at_once(tmp_path: Path) -> None:
    path = tmp_path / "desired.yaml"
    path.write_text("project: a\n")
    # The caller holds other bytes than the ones there now (it changed before the watch began).
    async with watching(path, safety_interval=0.3, digest="0" * 64) as w:
        await w.wake()
        assert await w.quiet(0.8)  # re-reads keep finding the same bytes: no more wake-ups


async def test_safety_reread_catches_what_inotify_cannot_see(tmp_path: Path) -> None:
    path = tmp_path / "watched" / "desired.yaml"
    path.parent.mkdir()
    path.write_text("project: a\n")
    # inotify reports a write to the directory of the name it was made through: a write via a
    # hard link elsewhere changes our bytes without an event in our directory.
    link = tmp_path / "elsewhere" / "link.yaml"
    link.parent.mkdir()
    os.link(path, link)
    async with watching(path, safety_interval=0.6) as w:
        with link.open("r+") as f:
            f.write("project: b\n")
        started = time.monotonic()
        await w.wake(2.0)
        assert time.monotonic() - started > 0.1  # it took the re-read, not an event


async def test_known_digest_means_no_initial_wakeup(tmp_path: Path) -> None:
    path = tmp_path / "desired.yaml"
    path.write_text("project: a\n")
    async with watching(path, safety_interval=0.2, digest=file_digest(path)) as w:
        assert await w.quiet(0.5)


async def test_stop_ends_the_iterator_promptly(watched: Watcher) -> None:
    started = time.monotonic()
    watched.stop.set()
    assert watched.task is not None
    await asyncio.wait_for(watched.task, 1.0)
    assert time.monotonic() - started < 0.5


async def test_cancelling_the_watch_leaves_the_callers_stop_alone(watched: Watcher) -> None:
    assert watched.task is not None
    watched.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(watched.task, 1.0)
    assert not watched.stop.is_set()
