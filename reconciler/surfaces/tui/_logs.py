"""Where the logs pane's lines come from: every worker of a slot's workload, interleaved.

A ``LogSource`` takes the selected slot and yields lines that carry ``worker``, ``attempt``
and ``text`` (``model.workload.LogLine``); the pane prints each as ``[w3] text`` and keeps
following. The app gets one injected (tests use a real generator of their own); by default it
is built on ``WorkloadRunner.logs`` (``adapters.workload``), when this install has it.

May: build the workload adapter and stream from it (SSH to the workers, read only). May not:
import textual, write anything, call the cloud (the SSH user is the configured or cached one).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from reconciler.core.terminal_text import log_line
from reconciler.surfaces.tui._frame import SlotRow

if TYPE_CHECKING:
    from reconciler.adapters.statedir import StateDir
    from reconciler.adapters.workload import WorkloadRunner
    from reconciler.intent.log_target import Target
    from reconciler.model.desired import Desired

UNAVAILABLE = "workloads are not available in this version: there are no workload logs to show"


class Line(Protocol):
    @property
    def worker(self) -> int: ...
    @property
    def attempt(self) -> int: ...
    @property
    def text(self) -> str: ...


LogSource = Callable[[SlotRow], AsyncIterator[Line]]


def format_line(line: Line) -> str:
    return log_line(line.worker, line.text)


def default_source(file: Path, state: StateDir) -> LogSource:
    """``WorkloadRunner.logs`` for the slot's node (SSH and the adapter load on first use)."""

    def source(row: SlotRow) -> AsyncIterator[Line]:
        return _workload_logs(file, state, row)

    return source


async def _workload_logs(file: Path, state: StateDir, row: SlotRow) -> AsyncIterator[Line]:
    """Every worker's output of ``row``'s workload, following, as ``tpu-reconciler logs
    SLOT --follow`` reads it: the node from the controller's snapshot, the SSH settings of the
    file. The SSH user is the configured or cached one: the TUI never asks the cloud."""
    import asyncio
    import os

    from reconciler.adapters.oslogin import read_cached
    from reconciler.adapters.ssh import check_dialable
    from reconciler.adapters.ssh_routes import SshRoutes
    from reconciler.adapters.status_file import read_status
    from reconciler.adapters.worker_names import WorkerNames
    from reconciler.errors import ReconcilerError
    from reconciler.model.load import parse_desired

    def prepare() -> tuple[type[WorkloadRunner], Target, Desired]:  # off the UI's event loop
        from reconciler.adapters.workload import WorkloadRunner
        from reconciler.intent.log_target import target_of

        target = target_of(read_status(state.status), row.name)
        text = file.read_text(encoding="utf-8")
        return WorkloadRunner, target, parse_desired(text, str(file), os.environ)

    runner_class, target, desired = await asyncio.to_thread(prepare)
    settings = desired.settings
    if target.node is None:
        raise ReconcilerError(target.reason)
    # An emulated node answers nothing: say so before asking for a user it would never need.
    check_dialable(row.name, target.node.ips(internal=settings.internal_ips))
    user = settings.ssh_user or read_cached(state.oslogin_user)
    if not user:
        raise ReconcilerError(
            "no SSH user known yet: set settings.ssh_user, or let the controller look up the "
            "OS Login user once (it caches it)"
        )
    key = Path(settings.ssh_key).expanduser() if settings.ssh_key else _default_key()
    runner = runner_class(
        state=state,
        settings=settings,
        user=user,
        key=key,
        agent_path=os.environ.get("SSH_AUTH_SOCK") or None,
        routes=SshRoutes(desired, WorkerNames(state.worker_names)),  # IAP: the names kept
    )
    try:
        stream = runner.logs(
            target.node,
            row.name,
            worker=None,
            attempt=None,
            lines=200,
            follow=True,
            run_id=target.run_id,
        )
        async for line in stream:
            yield line
    finally:
        await runner.aclose()


def _default_key() -> Path:
    from reconciler.adapters.ssh import DEFAULT_KEY

    return Path(DEFAULT_KEY).expanduser()
