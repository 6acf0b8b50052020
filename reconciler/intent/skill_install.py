"""Installing the assistant skill: its files (made by the CLI from the use cases) written into
``DIR/<name>/``, made if missing, never through a symbolic link below DIR
(``adapters/files.write_files_into``: one planted there by another user is a
``PermissionError``).

May: write the skill's files under the directory it is given. May not: read or edit
desired.yaml or the state dir, print.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from reconciler.adapters.files import write_files_into


def install_skill(target: Path, name: str, files: Mapping[str, str]) -> Path:
    """Write ``files`` (name -> text, mode 0644) into ``target/name`` (``target`` made if
    missing) and return that directory. Raises OSError."""
    target.mkdir(parents=True, exist_ok=True)
    # never through a link someone planted in DIR: DIR/<name> must be a directory of this
    # user's, and each file is written through its descriptor
    return write_files_into(target, name, files, mode=0o644)
