"""``status`` and ``status --json`` parsed without argparse: the command run in loops.

``watch -n1 tpu-reconciler status``, shell prompts and scripts run ``status`` over and over,
and importing argparse, its gettext catalogue lookup and the ``status`` sub-parser cost ~27 M
instructions of a ~280 M run. So ``main`` first offers ``argv`` to ``parse``: it accepts only
the plain spellings of the options ``status`` is run with (``-f FILE``, ``--file FILE``,
``--file=FILE``, ``--state-dir DIR``, ``--state-dir=DIR``, then ``status``, then ``--json``)
and returns exactly the namespace argparse would; anything else (``--help``, ``-v``,
``--live``, an abbreviation, ``--``, a value starting with ``-``, a mistake) returns None and
argparse parses it as always, with its help and error messages. ``tests/unit/test_cli_quick.py``
holds the two parsers to the same result for every spelling this one accepts.

May: read ``argv`` and the environment default of ``--file``. May not: import argparse, print,
or accept anything it is not sure argparse would read the same way.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Final, cast

if TYPE_CHECKING:
    import argparse

#: What argparse sets for ``status`` beyond the options read here (``_reconcile.register``).
_STATUS_DEFAULTS: Final = {
    "verbose": 0,
    "quiet": False,
    "command": "status",
    "json": False,
    "live": False,
    "watch": False,
    "interval": 2.0,
    "handler": "reconciler.surfaces.cli._reconcile:status_cmd",
}
_VALUED: Final = {"-f": "file", "--file": "file", "--state-dir": "state_dir"}


def parse(argv: Sequence[str]) -> argparse.Namespace | None:
    """The namespace argparse makes of ``argv`` when it is a plain ``status [--json]``; None
    when it is anything else (then argparse must parse it)."""
    values: dict[str, str] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "status":
            break
        if arg in _VALUED and i + 1 < len(argv):
            name, value, i = _VALUED[arg], argv[i + 1], i + 2
        elif arg.startswith(("--file=", "--state-dir=")):
            option, _, value = arg.partition("=")
            name, i = _VALUED[option], i + 1
        else:
            return None
        if not value or value.startswith("-"):
            return None  # argparse's reading of these depends on its other options
        values[name] = value
    else:
        return None  # no command
    rest = argv[i + 1 :]
    if any(arg != "--json" for arg in rest):
        return None
    file = values.get("file") or os.environ.get("TPU_RECONCILER_FILE") or "desired.yaml"
    state_dir = values.get("state_dir")
    namespace = SimpleNamespace(
        file=Path(file),
        state_dir=Path(state_dir) if state_dir is not None else None,
        **{**_STATUS_DEFAULTS, "json": bool(rest)},
    )
    # Handlers only read attributes; a SimpleNamespace has argparse.Namespace's interface.
    return cast("argparse.Namespace", namespace)
