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


def message(stderr: str, *, limit: int = _LIMIT) -> str:
    """The ``ERROR:`` paragraphs of ``stderr`` (else every line that is not boilerplate),
    whitespace folded to single spaces, at most ``limit`` characters; "" when nothing is left."""
    lines = [line for line in stderr.splitlines() if not _is_boilerplate(line)]
    kept: list[str] = []
    inside = False
    for line in lines:
        if line.startswith("ERROR:"):
            inside = True
        elif not line.strip():
            inside = False
        if inside:
            kept.append(line)
    text = " ".join(_OBJECT_REPR.sub("", " ".join(kept or lines)).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
