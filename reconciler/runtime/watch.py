"""Wake-ups when desired.yaml's content (or a lab's members' files, ``watch_tree``) may have
changed.

``watch_file`` watches the file's *directory* through inotify (watchfiles) and keeps the events
that name the file: editors save by rename (VS Code writes a temp file and renames it over; vim
renames the original to a backup and writes a new file), and a watch on the file itself goes
blind after the first such save. A burst of events within ~50 ms is one wake-up. Every wake-up
is checked against the content's sha256, so a wake-up means the bytes really differ from the
last ones seen; a periodic re-read by hash catches anything inotify missed. A directory that
does not exist yet, or is deleted and recreated, is waited for and watched again.

May: stat and read the watched file, own a watchfiles watcher thread. May not: parse the file
(``runtime.desired_loader`` does), write anything, or raise for a missing or unreadable
file or directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Final

from watchfiles import Change, awatch

from reconciler.runtime.desired_loader import NO_CONTENT, file_digest

# watchfiles logs every change it sees at INFO; files churning beside desired.yaml (an editor's
# swap files, a log redirected there) would flood the controller's log, even feed themselves.
logging.getLogger("watchfiles").setLevel(logging.WARNING)

#: How often a missing directory is looked for, and how often the watcher thread comes back
#: to check that its directory is still the same one (bounds the reaction to a recreated dir).
_DIR_POLL: Final = 0.2
_TICK_MS: Final = 500
#: After an event that left the file missing, how long to wait for the rest of a save.
_SETTLE: Final = 0.2


class _StopFlag:
    """What awatch polls from its thread. awatch *sets* its stop event when cancelled, so it
    gets this private flag rather than the caller's ``stop``, which must stay the caller's."""

    def __init__(self, outer: asyncio.Event) -> None:
        self.outer = outer
        self.own = False

    def is_set(self) -> bool:
        return self.own or self.outer.is_set()

    def set(self) -> None:
        self.own = True


def _dir_id(directory: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(directory)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


async def _sleep(stop: asyncio.Event, seconds: float) -> None:
    """Sleep, returning early when ``stop`` is set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


async def _settled_digest(digest_of: Callable[[], str], stop: asyncio.Event) -> str:
    digest = digest_of()
    if digest == NO_CONTENT:
        # Most likely mid-save (vim renamed the original away): give the new file a moment.
        await _sleep(stop, _SETTLE)
        digest = digest_of()
    return digest


def tree_digest(directory: Path) -> str:
    """One digest of every ``*.yaml`` in ``directory`` (names and bytes): a lab's members'
    files (``adapters/member_files``); ``NO_CONTENT`` when it cannot be listed."""
    try:
        names = sorted(p.name for p in directory.iterdir() if p.name.endswith(".yaml"))
    except OSError:
        return NO_CONTENT
    h = hashlib.sha256()
    for name in names:
        h.update(f"{name}\0{file_digest(directory / name)}\n".encode())
    return h.hexdigest()


async def watch_file(
    path: Path,
    *,
    stop: asyncio.Event,
    safety_interval: float = 5.0,
    debounce: float = 0.05,
    digest: str | None = None,
) -> AsyncIterator[None]:
    """Yield whenever ``path``'s bytes differ from the last seen; end when ``stop`` is set.

    ``digest`` is the sha256 the caller already holds (``LoadResult.digest``); when it differs
    from the file at start the first wake-up comes at once. Without it, the baseline is the
    content at the first ``__anext__``: load first, then pass the digest to close that gap.
    A missing file counts as content of its own, so deletion and re-creation both wake.
    """
    path = Path(os.path.abspath(path))
    directory, name = path.parent, path.name

    def relevant(changed: Path) -> bool:
        return changed.name == name or changed == directory

    async for _ in _watch(
        directory, relevant, lambda: file_digest(path), stop=stop,
        safety_interval=safety_interval, debounce=debounce, digest=digest,
    ):  # fmt: skip
        yield


async def watch_tree(
    directory: Path, *, stop: asyncio.Event, safety_interval: float = 5.0, debounce: float = 0.05
) -> AsyncIterator[None]:
    """Yield whenever a ``*.yaml`` in ``directory`` (a lab's members' files) appears, changes
    or goes; end when ``stop`` is set."""
    directory = Path(os.path.abspath(directory))

    def relevant(changed: Path) -> bool:
        return changed.name.endswith(".yaml") or changed == directory

    async for _ in _watch(
        directory, relevant, lambda: tree_digest(directory), stop=stop,
        safety_interval=safety_interval, debounce=debounce, digest=None,
    ):  # fmt: skip
        yield


async def _watch(
    directory: Path,
    relevant_path: Callable[[Path], bool],
    digest_of: Callable[[], str],
    *,
    stop: asyncio.Event,
    safety_interval: float,
    debounce: float,
    digest: str | None,
) -> AsyncIterator[None]:
    """Watch ``directory`` (where what ``digest_of`` reads lives), yielding when the digest
    changes; ``relevant_path`` picks the events worth a look."""
    last = digest_of()
    if digest is not None and digest != last:
        yield
    next_check = time.monotonic() + safety_interval

    def relevant(changes: set[tuple[Change, str]]) -> bool:
        return any(relevant_path(Path(p)) for _, p in changes)

    while not stop.is_set():
        watched = _dir_id(directory)
        if watched is None:
            await _sleep(stop, min(_DIR_POLL, safety_interval))
        else:
            flag = _StopFlag(stop)
            try:
                async with contextlib.aclosing(
                    awatch(
                        directory,
                        watch_filter=None,  # filtered below, so every batch also ticks
                        debounce=max(int(debounce * 1000) * 20, 1000),
                        step=max(int(debounce * 1000), 1),
                        stop_event=flag,
                        rust_timeout=min(_TICK_MS, max(int(safety_interval * 1000), 1)),
                        yield_on_timeout=True,
                        recursive=False,
                        ignore_permission_denied=True,
                    )
                ) as changes_stream:
                    async for changes in changes_stream:
                        now = time.monotonic()
                        if relevant(changes) or now >= next_check:
                            next_check = now + safety_interval
                            current = await _settled_digest(digest_of, stop)
                            if current != last and not stop.is_set():
                                last = current
                                yield
                        if _dir_id(directory) != watched:
                            break  # deleted or replaced: the inotify watch is on a dead inode
            except OSError:
                # The directory vanished between the stat and the watch, or inotify refused
                # (e.g. out of watches): fall back to polling this round.
                await _sleep(stop, min(_DIR_POLL, safety_interval))
            finally:
                flag.set()
        if stop.is_set():
            return
        # Between watches (dir missing or just replaced) nothing saw events: compare by hash.
        current = digest_of()
        if current != last:
            last = current
            next_check = time.monotonic() + safety_interval
            yield
