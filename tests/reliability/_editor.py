"""A process that saves desired.yaml the way editors do, without the intent lock.

    python -m tests.reliability._editor FILE STOP LOG [--saves N] [--interval S] [--slow S]
                                                      [--styles vim,vscode]

Each save loads the file, adds one comment line (``# editor note N (style)``) and saves it,
taking the styles in turn:

- ``vim`` (``backupcopy=no`` with ``writebackup``): rename the file to ``FILE~``, create a new
  ``FILE`` and write it (in two halves, ``--slow`` seconds apart: a big file or a slow disk),
  fsync, close, remove the backup. Readers can see no file, or part of one, meanwhile.
- ``vscode``: write a temp file beside it, fsync, and replace the file with it in one step.

Like both editors, it checks just before saving that the file on disk is still what it loaded
(vim's "changed since reading" and VS Code's save-conflict check) and reloads when it is not.
What no editor can see — a change landing between that check and its rename — is measured
instead: the vim backup holds what it moved aside, and the VS Code-style replace is a
``renameat2(RENAME_EXCHANGE)`` (the same atomic replace for everyone else) that hands back what
it replaced. Such a save is logged ``clobbered`` (the editor, not the intent engine, lost that
change) with the text it loaded and the text it displaced. One JSON line per save goes to
LOG: n, style, note, clobbered, and the monotonic window (t0, t1) during which readers may see
the file missing or partial.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import time
from pathlib import Path

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def exchange(a: Path, b: Path) -> None:
    fn = ctypes.CDLL(None, use_errno=True).renameat2
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(b))


def with_note(text: bytes, note: bytes, n: int) -> bytes:
    """The note after the first line, before ``slots:``, or at the end, in turn."""
    lines = text.splitlines(keepends=True)
    if n % 3 == 0 and lines:
        lines.insert(1, note)
    elif n % 3 == 1 and b"slots:\n" in lines:
        lines.insert(lines.index(b"slots:\n"), note)
    else:
        if lines and not lines[-1].endswith(b"\n"):
            lines[-1] += b"\n"
        lines.append(note)
    return b"".join(lines)


def save_vim(path: Path, loaded: bytes, new: bytes, slow: float) -> dict[str, object] | None:
    """vim's save, or None when the file changed since it was loaded (reload and redo)."""
    backup = path.with_name(path.name + "~")
    mode = path.stat().st_mode & 0o777
    checked = time.time()
    if path.read_bytes() != loaded:
        return None
    t0 = time.monotonic()
    os.rename(path, backup)
    swapped = time.time()
    displaced = backup.read_bytes()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        half = len(new) // 2
        os.write(fd, new[:half])
        time.sleep(slow)
        os.write(fd, new[half:])
        os.fsync(fd)
    finally:
        os.close(fd)
    os.unlink(backup)
    return _saved(loaded, displaced, t0, time.monotonic(), checked, swapped)


def save_vscode(path: Path, loaded: bytes, new: bytes, n: int) -> dict[str, object] | None:
    """VS Code's save, or None when the file changed since it was loaded."""
    tmp = path.with_name(f".{path.name}.vscode-{os.getpid()}-{n}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, path.stat().st_mode & 0o777)
    try:
        try:
            os.write(fd, new)
            os.fsync(fd)
        finally:
            os.close(fd)
        checked = time.time()
        if path.read_bytes() != loaded:
            return None
        t0 = time.monotonic()
        exchange(tmp, path)
        swapped, t1 = time.time(), time.monotonic()
        displaced = tmp.read_bytes()
    finally:
        tmp.unlink(missing_ok=True)
    return _saved(loaded, displaced, t0, t1, checked, swapped)


def _saved(
    loaded: bytes, displaced: bytes, t0: float, t1: float, checked: float, swapped: float
) -> dict[str, object]:
    """The log record of a save; a clobbering one keeps both texts, to tell what it undid."""
    record: dict[str, object] = {"clobbered": displaced != loaded, "t0": t0, "t1": t1,
                                 "checked": checked, "swapped": swapped}  # fmt: skip
    if displaced != loaded:
        record["loaded"], record["displaced"] = loaded.decode(), displaced.decode()
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("file", type=Path)
    parser.add_argument("stop", type=Path)
    parser.add_argument("log", type=Path)
    parser.add_argument("--saves", type=int, default=40)
    parser.add_argument("--interval", type=float, default=0.15)
    parser.add_argument("--slow", type=float, default=0.005)
    parser.add_argument("--styles", default="vim,vscode", help="comma-separated, in turn")
    args = parser.parse_args(argv)
    path: Path = args.file
    styles = args.styles.split(",")
    n = 0
    reloads = 0
    while n < args.saves and not args.stop.exists():
        try:
            loaded = path.read_bytes()
        except FileNotFoundError:  # another editor's save in flight: look again
            time.sleep(0.001)
            continue
        style = styles[n % len(styles)]
        note = f"# editor note {n} ({style})\n".encode()
        new = with_note(loaded, note, n)
        time.sleep(0.002)  # the user types
        try:
            if style == "vim":
                saved = save_vim(path, loaded, new, args.slow)
            else:
                saved = save_vscode(path, loaded, new, n)
        except FileNotFoundError:
            saved = None
        if saved is None:  # changed since it was loaded: reload
            reloads += 1
            continue
        record = {"n": n, "style": style, "note": note.decode().strip(), "reloads": reloads,
                  **saved}  # fmt: skip
        with args.log.open("a") as f:
            f.write(json.dumps(record) + "\n")
        n += 1
        time.sleep(args.interval)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
