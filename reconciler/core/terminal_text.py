"""Text from elsewhere made safe for a terminal: control characters shown, never obeyed.

A workload's output, a cloud's error message or a hostile snapshot may carry terminal escapes
(OSC 52 clipboard writes, a window title, cursor moves that overwrite earlier lines, a bell).
``escaped`` shows every character that is not printable as ``\\xNN``, so what reaches the
terminal is what was said, never an instruction to it. ``status``, ``events``, ``info``, the
TUI and ``logs`` all show such text through it.

Pure. May: compute. May not: do I/O.
"""

from __future__ import annotations


def escaped(text: str, keep: str = "") -> str:
    """``text`` with each non-printable character but those in ``keep`` (e.g. a tab) as
    ``\\xNN`` (``\\x1b`` for ESC)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else f"\\x{ord(c):02x}" for c in text)


def log_line(worker: int, text: str) -> str:
    """One line of a workload's output as ``logs`` and the TUI's logs pane show it: the
    worker's prefix, the line with its escapes shown (tabs kept; a CRLF's CR dropped)."""
    return f"[w{worker}] {escaped(text.removesuffix(chr(13)), keep=chr(9))}"
