"""What a failed gcloud run said, without gcloud's boilerplate.

gcloud ends many failures with paragraphs addressed to a person at its prompt ("If you would
like to report this issue, please run the following command: gcloud feedback", "To check
gcloud for common problems ... gcloud info --run-diagnostics"). Keeping the *last* lines of
stderr keeps exactly those and drops the cause (``ERROR: gcloud crashed (ConnectionError):
... NameResolutionError ...``). ``message`` keeps the ``ERROR:`` paragraphs instead, joined
on one line.

Pure: text in, text out.
"""

from __future__ import annotations

import re
from typing import Final

_BOILERPLATE: Final = (
    re.compile(r"^If you would like to report this issue"),
    re.compile(r"^To check gcloud for common problems"),
    re.compile(r"^\s+gcloud (feedback|info --run-diagnostics)\s*$"),
)
# A Python object's repr inside an exception's text (``<urllib3.connection.HTTPSConnection
# object at 0x7f01ab845af0>: ``): an address, different in every run, that says nothing.
_OBJECT_REPR: Final = re.compile(r"<[\w.]+ object at 0x[0-9a-f]+>:? ?")
_LIMIT: Final = 500


def _is_boilerplate(line: str) -> bool:
    return any(p.search(line) for p in _BOILERPLATE)


_COMMAND: Final = re.compile(r"^\s+\$\s+(\S.*)$")


def _error_lines(lines: list[str]) -> list[str]:
    """The ``ERROR:`` paragraphs. One that ends by introducing a command ("Please run:") goes
    on with that command (``$ gcloud auth login`` -> ```gcloud auth login```) and the sentence
    that finishes it ("to obtain new credentials."), so the advice is never cut mid-sentence."""
    kept: list[str] = []
    mode = "out"  # "error" in a paragraph, "command" after its ":", "after" past the command
    for line in lines:
        text = line.strip()
        command = _COMMAND.match(line)
        if line.startswith("ERROR:"):
            mode = "error"
        elif mode == "error" and not text:
            mode = "command" if kept and kept[-1].rstrip().endswith(":") else "out"
            continue
        elif mode == "command" and command:
            kept.append(f"`{command.group(1).strip()}`")
            continue
        elif mode == "command" and not text:
            mode = "after" if kept and kept[-1].endswith("`") else "out"
            continue
        elif mode == "after" and text:
            mode = "error" if text[0].islower() else "out"
        elif mode in ("command", "after"):
            mode = "out" if not text else "error"
        if mode == "error":
            kept.append(line)
    return kept


def message(stderr: str, *, limit: int = _LIMIT) -> str:
    """The ``ERROR:`` paragraphs of ``stderr`` (else every line that is not boilerplate),
    whitespace folded to single spaces, at most ``limit`` characters; "" when nothing is left."""
    lines = [line for line in stderr.splitlines() if not _is_boilerplate(line)]
    kept = _error_lines(lines)
    text = " ".join(_OBJECT_REPR.sub("", " ".join(kept or lines)).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
