"""surfaces/cli/_say: one way to refuse without a terminal, ask y/N, and say nothing changed."""

from __future__ import annotations

import io
import sys

import pytest

from reconciler.surfaces.cli._say import confirm


class _Stdin(io.StringIO):
    def __init__(self, text: str, tty: bool) -> None:
        super().__init__(text)
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(
    ("typed", "tty", "yes", "said"),
    [
        ("", False, False, "tpu-reconciler: nobody to ask\n"),
        ("y\n", False, False, "tpu-reconciler: nobody to ask\n"),  # piped input is no answer
        ("y\n", True, True, ""),
        ("yes\n", True, True, ""),
        ("n\n", True, False, "tpu-reconciler: nothing changed\n"),
        ("", True, False, "tpu-reconciler: nothing changed\n"),  # end of input is a no
    ],
)
def test_confirm_asks_only_a_terminal_and_says_what_happened(
    typed: str, tty: bool, yes: bool, said: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setattr(sys, "stdin", _Stdin(typed, tty))
    assert confirm("Go ahead?", not_a_terminal="nobody to ask") is yes
    assert capsys.readouterr().err == said
