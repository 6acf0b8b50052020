"""``status.json``: the one reader and the one writer of the controller's status snapshot.

May: read and (atomically, through ``adapters/files``) write the snapshot file.
May not: build or interpret the snapshot (``core/status`` builds it, ``model/status`` defines
it).

A missing file is ``None`` (the controller has not written one yet); a file that exists but
cannot be used (corrupt JSON, another schema, a wrong shape) raises ``StatusUnreadable``, so a
broken snapshot is reported and never taken for an empty one.
"""

from __future__ import annotations

import json
from pathlib import Path

from reconciler.errors import StatusUnreadable
from reconciler.model.status import StatusSnapshot, from_json, to_json


def read_status(path: Path) -> StatusSnapshot | None:
    """The snapshot at ``path``; None when there is none; ``StatusUnreadable`` when broken."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise StatusUnreadable(path, str(e)) from None
    try:
        return from_json(json.loads(raw))
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise StatusUnreadable(path, str(e)) from None


def write_status(path: Path, snapshot: StatusSnapshot) -> None:
    """Replace ``path`` atomically with ``snapshot`` (compact: it is large and machine-read)."""
    from reconciler.adapters.files import atomic_write, json_text  # reading never needs it

    atomic_write(path, json_text(to_json(snapshot), compact=True).encode())
