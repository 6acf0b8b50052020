"""What the CLI says on stderr and asks on a terminal, in one voice.

May: print to stderr, read a y/N answer from stdin. May not: decide anything (callers say
what to ask and what a refusal means) or import anything beyond ``sys``: ``status`` loads it.
"""

from __future__ import annotations

import sys


def err(message: str) -> None:
    """``error: message`` on stderr: one line (the message says what fixes it)."""
    print(f"error: {' '.join(message.split())}", file=sys.stderr)


def note(message: str) -> None:
    """``tpu-reconciler: message`` on stderr: not an error (a refusal the user chose)."""
    print(f"tpu-reconciler: {message}", file=sys.stderr)


def ask(question: str) -> bool:
    """A y/N question on the terminal; anything but yes (or end of input) is no."""
    try:
        return input(f"{question} [y/N] ").strip().lower() in {"y", "yes"}
    except EOFError:
        return False


def confirm(question: str, *, not_a_terminal: str) -> bool:
    """Whether the person at the terminal says yes to ``question``. Without a terminal nobody
    can: ``not_a_terminal`` is said instead, and so is "nothing changed" after a no."""
    if not sys.stdin.isatty():
        note(not_a_terminal)
        return False
    if not ask(question):
        note("nothing changed")
        return False
    return True
