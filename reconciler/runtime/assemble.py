"""The one way to assemble a controller from a desired file and a state directory.

``run``, ``apply``, ``plan`` and the demo all build their controller here, so they cannot
drift apart: the same desired loader, event log, cloud factory and setup runner, and — for a
controller that runs for a while (``run``, the demo) — the capacity history recorder, so
``history``, ``recommend`` and the TUI see what any running controller saw.

May: construct runtime objects (nothing starts here: ``Controller.run`` starts and closes the
history recorder). May not: print, or act on the cloud.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from reconciler.adapters.lab_layout import shared_file_owners
from reconciler.adapters.statedir import StateDir
from reconciler.runtime.backends import make_cloud
from reconciler.runtime.controller import Controller
from reconciler.runtime.desired_loader import DesiredLoader
from reconciler.runtime.events import EventLog
from reconciler.runtime.history import HistoryRecorder
from reconciler.runtime.lock import ControllerLock
from reconciler.runtime.setup import make_setup_runner


def build_controller(
    desired_file: Path,
    state: StateDir,
    *,
    allow_destructive: bool,
    history: bool,
    env: Mapping[str, str] | None = None,
    lock: ControllerLock | None = None,
) -> Controller:
    """A controller on ``desired_file`` with its state in ``state`` (already ``ensure``d).

    ``history``: record capacity history (a controller that keeps running: ``run``, the demo);
    a one-shot pass (``plan``, ``apply``) does not. ``env`` (default: ``os.environ``) holds the
    ``TPU_RECONCILER_*`` overrides the loader applies. ``lock``: the ``ControllerLock`` held
    on the state directory and the desired file; the controller follows the file's inode with
    it across saves.
    """
    # a lab member's `plan` reads the lab controller's files and writes none of them
    events = EventLog(state, write=os.access(state.private, os.W_OK))
    metrics = None
    if history:  # a controller that keeps running; prometheus_client stays off plan and apply
        from reconciler.runtime.metrics import Metrics

        metrics = Metrics(events)  # serves only while settings.metrics names an address
    return Controller(
        store=DesiredLoader(
            desired_file, os.environ if env is None else env, owners=shared_file_owners(state)
        ),
        state=state,
        cloud_factory=make_cloud,
        events=events,
        setup=make_setup_runner(desired_file, state),
        allow_destructive=allow_destructive,
        history=HistoryRecorder(state, events) if history else None,
        lock=lock,
        metrics=metrics,
    )
