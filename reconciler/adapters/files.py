"""Durable, private files: atomic writes, 0700 directories, append-only JSON lines, and the
compare-and-swap write (``swap_in``, over ``renameat2(RENAME_EXCHANGE)``) intent edits use.

Every write of state and of desired.yaml goes through ``atomic_write``: a temp file in the same
directory, fsync, rename over the target, fsync the directory. A reader therefore sees the old
content or the new, never half. Files are created 0600 and directories 0700 unless told
otherwise (desired.yaml keeps the mode it already had).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
#: A shared lab's state directory (``service install --shared``): setgid, group rwx; sticky
#: too (``adapters/lab_layout``): members create files there but never rename or remove one
#: that is not theirs.
SHARED_DIR = 0o2770
SHARED_FILE = 0o660
#: A lab's controller-private directory (``StateDir.private``): the group reads, only the
#: controller's user writes; its files are 0640.
READ_SHARED_DIR = 0o2750
READ_SHARED_FILE = 0o640


def _group_bits(path: Path) -> int | None:
    try:
        return path.stat().st_mode & 0o2070
    except OSError:
        return None


def is_shared_dir(path: Path) -> bool:
    """Whether ``path`` is a shared lab's directory: setgid and group-writable. Private files
    written into it are made group read-write; a private subdirectory (``secrets/``, 0700)
    is not shared, even though it inherits the setgid bit."""
    return _group_bits(path) == 0o2070


def is_read_shared_dir(path: Path) -> bool:
    """Whether ``path`` is a lab's controller-private directory: setgid, group r-x only."""
    return _group_bits(path) == 0o2050


def shared_mode(directory: Path, mode: int) -> int:
    """``mode`` for a file in ``directory``: a private file in a shared lab's directory is
    group read-write, so every member's edit and the controller can use it; in the lab's
    controller-private directory it is group read-only."""
    if mode == PRIVATE_FILE:
        bits = _group_bits(directory)
        if bits == 0o2070:
            return SHARED_FILE
        if bits == 0o2050:
            return READ_SHARED_FILE
    return mode


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` as 0700, and every ancestor it has to create as 0700 too (mkdir's
    ``parents=True`` would leave those at the umask default); tighten ``path`` itself when it
    exists with a wider mode (never a lab's, which is wider on purpose). Ancestors that
    already exist are left as they are."""
    missing = []
    for directory in (path, *path.parents):
        if directory.exists():
            break
        missing.append(directory)
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            directory.mkdir(mode=PRIVATE_DIR)
    with contextlib.suppress(PermissionError):
        lab = is_shared_dir(path) or is_read_shared_dir(path)
        if path.stat().st_mode & 0o777 != PRIVATE_DIR and not lab:
            path.chmod(PRIVATE_DIR)
    return path


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _file_mode(path: Path, mode: int | None) -> int:
    if mode is not None:
        return shared_mode(path.parent, mode)
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        return 0o644


@contextlib.contextmanager
def temp_beside(
    path: Path,
    data: bytes,
    *,
    mode: int,
    durable: bool = True,
    owner: tuple[int, int] | None = None,
) -> Iterator[str]:
    """A temp file in ``path``'s directory holding ``data`` (fsynced when ``durable``), for the
    caller to rename over ``path`` (or swap with it); removed afterwards if it is still there.
    ``owner``: (uid, gid) to give it (root's edit of another user's file leaves it theirs)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            if owner is not None:
                os.fchown(f.fileno(), *owner)
            os.fchmod(f.fileno(), mode)
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        yield tmp
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def atomic_write(
    path: Path, data: bytes | str, *, mode: int | None = PRIVATE_FILE, durable: bool = True
) -> None:
    """Replace ``path`` with ``data`` atomically. ``mode=None`` keeps the existing file's mode
    (0644 for a new one), which is what a user's own desired.yaml wants. ``durable=False``
    skips the fsyncs, for a cache whose loss in a crash costs nothing but a recomputation:
    readers still see the old file or the new one, never a part."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with temp_beside(path, raw, mode=_file_mode(path, mode), durable=durable) as tmp:
        os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


def write_files_into(parent: Path, child: str, files: Mapping[str, str], *, mode: int) -> Path:
    """Write ``files`` (name -> text) into ``parent/child``, made if missing, without following
    a symbolic link anywhere below ``parent``: ``child`` is opened ``O_NOFOLLOW`` and must be a
    directory of this user's, and each file is written through that descriptor (a temp file,
    then renamed over the name, so a link planted under a file's name is replaced, never
    followed). ``parent`` itself is the caller's choice. Raises OSError; a planted link or
    someone else's directory is ``PermissionError`` naming it."""
    top = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(child, 0o755, dir_fd=top)
        try:
            fd = os.open(
                child, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=top
            )
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                raise PermissionError(
                    errno.EPERM,
                    "a symbolic link or a file, not a directory: not followed",
                    str(parent / child),
                ) from None
            raise
    finally:
        os.close(top)
    try:
        owner = os.fstat(fd).st_uid
        if owner != os.geteuid():
            raise PermissionError(
                errno.EPERM, f"owned by uid {owner}, not by you", str(parent / child)
            )
        for name, text in files.items():
            tmp = f".{name}.{os.urandom(4).hex()}.tmp"
            out = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                mode,
                dir_fd=fd,
            )
            try:
                os.fchmod(out, mode)
                os.write(out, text.encode("utf-8"))
                os.fsync(out)
            finally:
                os.close(out)
            os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        os.fsync(fd)
    finally:
        os.close(fd)
    return parent / child


def json_text(document: Any, *, compact: bool = False) -> str:
    """What ``write_json`` writes: ``compact`` for large machine-read documents (the status
    snapshot at 1,000 slots is 4x cheaper to write without indentation)."""
    if compact:
        return json.dumps(document, separators=(",", ":")) + "\n"
    return json.dumps(document, indent=2, sort_keys=False) + "\n"


def write_json(path: Path, document: Any, *, compact: bool = False) -> None:
    atomic_write(path, json_text(document, compact=compact))


def read_json(path: Path) -> Any:
    """The parsed document; raises FileNotFoundError or ValueError (corrupt) for the caller to
    decide — state must fail closed or degrade knowingly, never silently become empty."""
    with path.open("rb") as f:
        return json.loads(f.read())


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line with a single write(2) on an O_APPEND descriptor, so concurrent
    appenders never interleave within a line; fsync so a crash keeps what was reported."""
    line = (json.dumps(record, separators=(",", ":"), default=str) + "\n").encode("utf-8")
    fd = open_shared(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def open_shared(path: Path, flags: int) -> int:
    """``os.open`` creating a private file (0600), or in a shared lab's directory one the
    group may read and write (0660, whatever the umask; only the file's owner can set it)."""
    mode = shared_mode(path.parent, PRIVATE_FILE)
    fd = os.open(path, flags, mode)
    if mode != PRIVATE_FILE:
        with contextlib.suppress(PermissionError):
            if os.fstat(fd).st_mode & 0o777 != mode:
                os.fchmod(fd, mode)
    return fd


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Records in order; a torn last line (crash mid-append) is skipped, not fatal."""
    try:
        f = path.open("rb")
    except FileNotFoundError:
        return
    with f:
        for raw in f:
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            if isinstance(record, dict):
                yield record


_AT_FDCWD: Final = -100
_RENAME_EXCHANGE: Final = 2


def exchange(a: str, b: str) -> bool:
    """Atomically swap two paths; False when the system cannot (old kernel or filesystem)."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), b)


def swap_in(path: Path, data: bytes, expected: str) -> bool:
    """Atomically put ``data`` at ``path`` if it still holds the text whose sha256 is
    ``expected``; True when it did. Keeps the file's mode (and, as root, its owner); fsyncs file
    and directory.

    With RENAME_EXCHANGE the swap itself tells whether an editor saved since the text was read:
    then the editor's file — the very inode, which it may still be writing — is swapped straight
    back and False returned, so a save in progress is never cut. A file renamed away mid-save
    (vim's backup step) is not ours to fill: False as well. Without RENAME_EXCHANGE (old
    kernels, some filesystems) the file is compared, then replaced.
    """
    try:
        st = path.stat()
    except FileNotFoundError:
        return False
    mode = st.st_mode & 0o777
    # root editing another user's file (a lab member's, say) leaves it theirs
    owner = (st.st_uid, st.st_gid) if os.geteuid() == 0 and st.st_uid != 0 else None
    try:
        with temp_beside(path, data, mode=mode, owner=owner) as tmp:
            if exchange(tmp, str(path)):
                written = hashlib.sha256(Path(tmp).read_bytes()).hexdigest() == expected
                if not written:
                    exchange(tmp, str(path))  # the editor's inode goes back where it was
            else:
                written = hashlib.sha256(path.read_bytes()).hexdigest() == expected
                if written:
                    os.replace(tmp, path)
    except FileNotFoundError:  # renamed away between the stat and the swap
        return False
    fsync_dir(path.parent)
    return written
