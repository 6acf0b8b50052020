"""The way to a slot's workers for a command outside the controller (``ssh``, ``logs``, ``doctor``).

``routes(desired, state, env)`` gives an ``adapters.ssh_routes.SshRoutes`` whose IAP worker VM
names come from the controller's ``worker_names.json``, else from one guest-attributes read
through a cloud of the command's own (built by ``runtime.backends.make_cloud`` only when needed,
closed on leaving). What it looks up is kept in memory only: the file is the controller's.

May: build a cloud and read guest attributes through it. May not: write anything.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from reconciler.adapters.cloud import Cloud
from reconciler.adapters.ssh_routes import SshRoutes
from reconciler.adapters.statedir import StateDir
from reconciler.adapters.worker_names import WorkerNames
from reconciler.model.desired import Desired


@contextlib.asynccontextmanager
async def routes(
    desired: Desired, state: StateDir, env: Mapping[str, str]
) -> AsyncIterator[SshRoutes]:
    from reconciler.runtime.backends import make_cloud

    clouds: list[Cloud] = []

    async def lookup(zone: str, node: str) -> Sequence[Mapping[str, Any]]:
        if not clouds:
            clouds.append(make_cloud(desired, env))
        rows: Sequence[Mapping[str, Any]] = await clouds[0].guest_attributes(zone, node)
        return rows

    try:
        yield SshRoutes(desired, WorkerNames(state.worker_names), lookup)
    finally:
        for cloud in clouds:
            await cloud.aclose()
