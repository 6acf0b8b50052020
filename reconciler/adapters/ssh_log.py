"""One worker's setup log: a 0600 file that remote output streams into, plus its tail.

Output is written line by line as it arrives (a partial line waits for its newline, up to
``_MAX_PARTIAL`` bytes), so a value given as ``redact`` — the Tailscale auth key — is replaced
by ``***`` even when the remote side echoes it, in the file and in the tail alike. Header lines
written with ``note`` start with ``# `` and a UTC timestamp.

May: create ``log_dir`` (0700) and append to ``worker-<index>.log`` (0600). May not: print or
raise anything but OSError (which the caller translates).
"""

from __future__ import annotations

import os
import time
from collections import deque
from pathlib import Path
from typing import Final

from reconciler.adapters.files import PRIVATE_FILE, ensure_private_dir
from reconciler.model.times import utc_text

_MAX_PARTIAL: Final = 64 * 1024
_REDACTED: Final = b"***"


def log_path(log_dir: Path, index: int) -> Path:
    return Path(log_dir) / f"worker-{int(index)}.log"


class WorkerLog:
    """Append-only log of one worker for one run; ``tail()`` covers this run only."""

    def __init__(self, log_dir: Path, index: int, *, tail_lines: int, redact: bytes = b""):
        ensure_private_dir(Path(log_dir))
        self.path = log_path(log_dir, index)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
        os.fchmod(self._fd, PRIVATE_FILE)
        self._redact = redact
        self._partial = b""
        self._tail: deque[str] = deque(maxlen=tail_lines)

    def _emit(self, data: bytes) -> None:
        if self._redact:
            data = data.replace(self._redact, _REDACTED)
        os.write(self._fd, data)
        for line in data.decode("utf-8", "replace").split("\n")[:-1]:  # data ends with \n
            # progress bars redraw with \r: keep what the terminal would finally show
            self._tail.append(line.rstrip("\r").rsplit("\r", 1)[-1])

    def write(self, data: bytes) -> None:
        """Remote output, in any chunking."""
        buffer = self._partial + data
        cut = buffer.rfind(b"\n") + 1
        if cut:
            self._emit(buffer[:cut])
            buffer = buffer[cut:]
        if len(buffer) > _MAX_PARTIAL:  # a very long line: write all but a possible key prefix
            keep = max(len(self._redact) - 1, 0)
            self._emit(buffer[: len(buffer) - keep] + b"\n")
            buffer = buffer[len(buffer) - keep :]
        self._partial = buffer

    def flush_line(self) -> None:
        """End a partial line (before a header, or at the end of a command)."""
        if self._partial:
            partial, self._partial = self._partial, b""
            self._emit(partial + b"\n")

    def note(self, text: str) -> None:
        self.flush_line()
        stamp = utc_text(time.time())
        self._emit(f"# {stamp} {text}\n".encode())

    def tail(self) -> str:
        return "\n".join(self._tail)

    def close(self) -> None:
        if self._fd >= 0:
            try:
                self.flush_line()
            finally:
                os.close(self._fd)
                self._fd = -1
