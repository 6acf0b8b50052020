"""The ``doctor`` query and ``init``'s new file, for the CLI.

``doctor_report`` runs ``runtime.doctor_probes.diagnose`` (read-only: files, tools, ``gcloud
auth``, one list call) and words it (``runtime.doctor``). ``write_starter`` makes the starter
desired.yaml from its answers (``runtime.init``), validates it and writes it as a new file.

May: read files and make ``doctor``'s read-only probes; write the new desired.yaml ``init``
asks for. May not: act on the cloud, print. ``runtime.init`` pulls in pydantic and ruamel and
the probes asyncio: each is imported only by the function that needs it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reconciler.model.desired import Desired


@dataclass(frozen=True)
class DoctorReport:
    """``doctor``'s verdict: its text, its JSON document, and whether no check failed."""

    text: str
    document: dict[str, Any]
    healthy: bool


def doctor_report(file: Path, state_root: Path, *, timeout: float) -> DoctorReport:
    """Every ``doctor`` check of ``file`` and its state directory ``state_root``, now."""
    import asyncio

    from reconciler.runtime.doctor import doctor_document, format_doctor, healthy
    from reconciler.runtime.doctor_probes import diagnose

    checks = asyncio.run(
        diagnose(file, state_root, dict(os.environ), now=time.time(), timeout=timeout)
    )
    return DoctorReport(format_doctor(checks), doctor_document(checks), healthy(checks))


def write_starter(
    path: Path,
    *,
    project: str,
    zones: tuple[str, ...],
    accelerators: tuple[str, ...],
    mode: str,
    race: bool | None,
    max_run_duration: str | None,
    force: bool,
) -> Desired:
    """Write the starter desired.yaml for these answers to ``path`` (never replacing a file
    unless ``force``) and return what it declares. Raises InitError."""
    from reconciler.runtime.init import Starter, starter_text, validate, write_new

    starter = Starter(
        project=project,
        zones=zones,
        accelerators=accelerators,
        mode=mode,
        race=race,
        max_run_duration=max_run_duration,
    )
    text = starter_text(starter)
    desired = validate(text, str(path))
    write_new(path, text, force=force)
    return desired
