"""Reading a workload's output as it is printed, for ``tpu-reconciler logs`` and the TUI's logs
pane: the workers' runner with the desired file's SSH settings (``adapters.workload``), the
OS Login user it dials as, the check that a node is one anything answers on, and a log line
as a person sees it (terminal escapes shown, never obeyed).

Where the workload runs comes from the controller's snapshot (``intent.log_target``). The TUI
never asks the cloud (its user is the configured or cached one); the CLI may look the user up
once and find IAP or jump-host routes (``runtime.reach``: read-only cloud calls).

May: read the snapshot, desired.yaml and the state dir's caches; read logs on the workers over
SSH. May not: launch, stop or edit anything; print. SSH and the workload adapter are imported
only by the functions that dial (``status`` and the TUI's start stay light).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.core.terminal_text import log_line
from reconciler.errors import ReconcilerError
from reconciler.intent.log_target import Target, target_of

if TYPE_CHECKING:
    from reconciler.adapters.oslogin import UserResolver as UserResolver
    from reconciler.adapters.statedir import StateDir
    from reconciler.adapters.workload import WorkloadRunner as WorkloadRunner
    from reconciler.model.desired import Desired
    from reconciler.model.observed import Node
    from reconciler.model.workload import LogLine


def log_text(worker: int, text: str) -> str:
    """``[wN] text`` with the line's terminal escapes shown (``\\x1b...``), not obeyed."""
    return log_line(worker, text)


def check_node(slot: str, node: Node, desired: Desired) -> None:
    """``NoMachine`` when ``node`` is an emulated one (a documentation address): nothing
    answers there, so say so before dialling or asking who to dial as."""
    from reconciler.adapters.ssh import check_dialable

    check_dialable(slot, node.ips(internal=desired.settings.internal_ips))


def user_resolver(state: StateDir) -> UserResolver:
    """The OS Login user: ``settings.ssh_user`` aside, the cache, else one lookup."""
    from reconciler.adapters.oslogin import UserResolver

    return UserResolver(state.oslogin_user, env=dict(os.environ))


def _key(ssh_key: str | None) -> Path:
    from reconciler.adapters.ssh import DEFAULT_KEY

    return Path(ssh_key or DEFAULT_KEY).expanduser()


@contextlib.asynccontextmanager
async def workload_reader(
    desired: Desired,
    state: StateDir,
    user: str | Callable[[], Any],
    *,
    connect_timeout: float,
) -> AsyncIterator[WorkloadRunner]:
    """The workers' runner for ``desired``'s SSH settings, its routes (IAP, a jump host) open
    while it is used; the caller closes the runner."""
    from reconciler.adapters.workload import WorkloadRunner
    from reconciler.runtime import reach

    settings = desired.settings
    async with reach.routes(desired, state, os.environ) as routes:
        yield WorkloadRunner(
            state=state,
            settings=settings,
            user=user,
            key=_key(settings.ssh_key),
            agent_path=os.environ.get("SSH_AUTH_SOCK") or None,
            connect_timeout=connect_timeout,
            routes=routes,
        )


async def follow_workload(file: Path, state: StateDir, slot: str) -> AsyncIterator[LogLine]:
    """Every worker's output of ``slot``'s workload, following, as ``tpu-reconciler logs
    SLOT --follow`` reads it: the node from the controller's snapshot, the SSH settings of the
    file. The SSH user is the configured or cached one: the TUI never asks the cloud."""
    import asyncio

    from reconciler.adapters.oslogin import read_cached
    from reconciler.adapters.ssh_routes import SshRoutes
    from reconciler.adapters.status_file import read_status
    from reconciler.adapters.worker_names import WorkerNames
    from reconciler.model.load import parse_desired

    def prepare() -> tuple[type[WorkloadRunner], Target, Desired]:  # off the UI's event loop
        from reconciler.adapters.workload import WorkloadRunner

        target = target_of(read_status(state.status), slot)
        text = file.read_text(encoding="utf-8")
        return WorkloadRunner, target, parse_desired(text, str(file), os.environ)

    runner_class, target, desired = await asyncio.to_thread(prepare)
    settings = desired.settings
    if target.node is None:
        raise ReconcilerError(target.reason)
    # An emulated node answers nothing: say so before asking for a user it would never need.
    check_node(slot, target.node, desired)
    user = settings.ssh_user or read_cached(state.oslogin_user)
    if not user:
        raise ReconcilerError(
            "no SSH user known yet: set settings.ssh_user, or let the controller look up the "
            "OS Login user once (it caches it)"
        )
    runner = runner_class(
        state=state,
        settings=settings,
        user=user,
        key=_key(settings.ssh_key),
        agent_path=os.environ.get("SSH_AUTH_SOCK") or None,
        routes=SshRoutes(desired, WorkerNames(state.worker_names)),  # IAP: the names kept
    )
    try:
        stream = runner.logs(
            target.node,
            slot,
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
