"""The global options every entry point takes: ``--file``, ``--state-dir``, ``-v``, ``-q``.

Shared by the ``tpu-reconciler`` command line (``surfaces.cli``) and ``tpu-mcp``
(``surfaces.mcp_server``), so both find the same desired file and state directory the same way
and neither imports the other. Light on purpose (it is on the ``status`` path): argparse is
only named for mypy.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse


def global_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f",
        "--file",
        type=Path,
        default=Path(os.environ.get("TPU_RECONCILER_FILE") or "desired.yaml"),
        help="desired-state file (default: $TPU_RECONCILER_FILE or ./desired.yaml)",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="state directory (default: $TPU_RECONCILER_STATE_DIR or under $XDG_STATE_HOME)",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    parser.add_argument("-q", "--quiet", action="store_true", help="only errors")
