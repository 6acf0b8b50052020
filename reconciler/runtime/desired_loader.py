"""The intent in force: desired.yaml read from disk, keeping the last valid version.

``DesiredLoader.load()`` reads the file and parses it with ``parse_desired``. A valid file becomes
the intent in force; anything else (missing, unreadable, not UTF-8, empty, truncated, invalid)
leaves the previous valid intent in force and is reported as ``file:line:col: message``
diagnostics. Reading the same bytes again does not reparse (keyed by their sha256).

May: read desired.yaml. May not: write it, watch it (``runtime.watch`` does), log or print, or
raise for anything the file contains — every problem with the file comes back as diagnostics.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from reconciler.errors import Diagnostic, InvalidDesiredState
from reconciler.model.desired import Desired
from reconciler.model.load import parse_desired

#: The digest reported when the file could not be read at all (missing, unreadable). It can
#: never equal a sha256, so "missing" and "empty" stay distinct.
NO_CONTENT: Final = ""


def content_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digest(path: Path) -> str:
    """sha256 of the file's bytes, or ``NO_CONTENT`` when it cannot be read."""
    try:
        return content_digest(path.read_bytes())
    except OSError:
        return NO_CONTENT


@dataclass(frozen=True, slots=True)
class LoadResult:
    desired: Desired | None  # the intent in force: the last valid one, None if never valid
    current_valid: bool  # the file as it is now is valid (and is the intent in force)
    errors: tuple[Diagnostic, ...]  # what is wrong with the file as it is now
    changed: bool  # the intent in force changed with this load
    digest: str  # sha256 of the bytes read; NO_CONTENT when nothing could be read
    file_uid: int | None = None  # who owned the file read (a hand edit is its saver's)


def _same_intent(a: Desired | None, b: Desired | None) -> bool:
    """Equal intent, ignoring which text it came from (a comment edit changes nothing)."""
    if a is None or b is None:
        return a is b
    return dataclasses.replace(a, digest="", source="") == dataclasses.replace(
        b, digest="", source=""
    )


def _decode(data: bytes, source: str) -> str:
    """UTF-8 text (a leading BOM is dropped); raises InvalidDesiredState at the bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        before = data[: e.start]
        line = before.count(b"\n") + 1
        col = len(before[before.rfind(b"\n") + 1 :].decode("utf-8", "replace")) + 1
        bad = data[e.start : e.start + 1].hex()
        raise InvalidDesiredState(
            [Diagnostic(source, line, col, f"not valid UTF-8 (byte 0x{bad})")]
        ) from None


class DesiredLoader:
    """Loads ``path`` on demand and remembers the last valid intent."""

    def __init__(
        self, path: Path, env: Mapping[str, str] | None = None, *, source: str | None = None
    ) -> None:
        self.path = path
        self.env: Mapping[str, str] = dict(env or {})
        self.source = source if source is not None else str(path)
        self._current: Desired | None = None
        self._last: LoadResult | None = None

    @property
    def current(self) -> Desired | None:
        """The intent in force (the last valid file), or None when no valid file was seen."""
        return self._current

    @property
    def last(self) -> LoadResult | None:
        """The result of the latest ``load()``."""
        return self._last

    def load(self) -> LoadResult:
        try:
            with self.path.open("rb") as f:
                uid = os.fstat(f.fileno()).st_uid
                data = f.read()
        except FileNotFoundError:
            missing = "file not found (write one with `tpu-reconciler init`, or point -f at yours)"
            return self._settle(NO_CONTENT, None, (self._diag(missing),))
        except IsADirectoryError:
            return self._settle(NO_CONTENT, None, (self._diag("is a directory, not a file"),))
        except OSError as e:
            return self._settle(NO_CONTENT, None, (self._diag(f"cannot read: {e.strerror}"),))
        digest = content_digest(data)
        last = self._last
        if last is not None and last.digest == digest and digest != NO_CONTENT:
            result = dataclasses.replace(last, changed=False)
            self._last = result
            return result
        try:
            desired = parse_desired(_decode(data, self.source), self.source, self.env)
        except InvalidDesiredState as e:
            errors = e.diagnostics or (self._diag("invalid desired state"),)
            return self._settle(digest, None, errors)
        except Exception as e:  # a parser bug must not end the controller or drop the intent
            return self._settle(digest, None, (self._diag(f"internal error while parsing: {e!r}"),))
        return dataclasses.replace(self._settle(digest, desired, ()), file_uid=uid)

    def _diag(self, message: str) -> Diagnostic:
        return Diagnostic(self.source, 1, 1, message)

    def _settle(
        self, digest: str, desired: Desired | None, errors: tuple[Diagnostic, ...]
    ) -> LoadResult:
        changed = False
        if desired is not None:
            changed = not _same_intent(self._current, desired)
            self._current = desired
        result = LoadResult(
            desired=self._current,
            current_valid=desired is not None,
            errors=errors,
            changed=changed,
            digest=digest,
        )
        self._last = result
        return result
