"""``status.json``: the one reader and the one writer of the controller's status snapshot.

May: read and (atomically, through ``adapters/files``) write the snapshot file and its cache.
May not: build or interpret the snapshot (``core/status`` builds it, ``model/status`` defines
it); import anything heavy at module level (``status`` reads the file on its fast path).

A missing file is ``None`` (the controller has not written one yet); a file that exists but
cannot be used (corrupt JSON, another schema, a wrong shape) raises ``StatusUnreadable``, so a
broken snapshot is reported and never taken for an empty one.

**The cache.** ``status.json`` is the interface (other tools read it; its bytes are held by a
golden test), but parsing 0.5 MB of JSON is a fifth of what ``status`` spends at 1,000 slots.
So the writer also leaves ``status.json.marshal`` beside it: the same document in ``marshal``
form, which loads ~2.5x faster, stamped with the length and CRC-32 of the exact
``status.json`` bytes it was made with (and the Python it was made by). The reader always
reads ``status.json``, and takes the cached document only when the stamp matches those bytes;
anything else (no cache, an older one, another Python, a damaged file, a ``status.json``
written or edited by anyone else) falls back to parsing the JSON. The cache is written after
``status.json`` and without fsync: losing it costs one parse, never a wrong answer. Like
``.pyc`` files, it is trusted as much as the private state directory it lives in.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Final

from reconciler.errors import StatusUnreadable
from reconciler.model.status import StatusSnapshot, from_json, to_json

#: What a cache says it is; changes when its layout does.
CACHE_FORMAT: Final = "tpu-reconciler.status-cache.1"
CACHE_SUFFIX: Final = ".marshal"


def cache_path(path: Path) -> Path:
    """The cache beside the snapshot at ``path`` (``status.json.marshal``)."""
    return path.with_name(path.name + CACHE_SUFFIX)


def _stamp(raw: bytes) -> tuple[Any, ...]:
    import marshal
    import zlib

    return (CACHE_FORMAT, sys.version_info[:2], marshal.version, len(raw), zlib.crc32(raw))


def _cached(path: Path, raw: bytes) -> Any | None:
    """The document cached for exactly the snapshot bytes ``raw``; None when there is none."""
    import marshal

    try:
        blob = cache_path(path).read_bytes()
    except OSError:
        return None
    try:
        stamp, document = marshal.loads(blob)
    except Exception:  # a damaged cache of any kind (EOF, bad data, a wrong shape) is none
        return None
    return document if stamp == _stamp(raw) else None


def read_status(path: Path) -> StatusSnapshot | None:
    """The snapshot at ``path``; None when there is none; ``StatusUnreadable`` when broken."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise StatusUnreadable(path, str(e)) from None
    try:
        document = _cached(path, raw)
        if document is None:
            import json

            document = json.loads(raw)
        return from_json(document)
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise StatusUnreadable(path, str(e)) from None


def write_status(path: Path, snapshot: StatusSnapshot) -> None:
    """Replace ``path`` atomically with ``snapshot`` (compact: it is large and machine-read),
    then its cache."""
    import marshal

    from reconciler.adapters.files import atomic_write, json_text

    document = to_json(snapshot)
    raw = json_text(document, compact=True).encode()
    atomic_write(path, raw)
    atomic_write(cache_path(path), marshal.dumps((_stamp(raw), document)), durable=False)
