"""What ``tpu-reconciler ssh`` looks up before it execs OpenSSH, when the controller has not
kept it: the OS Login user (one gcloud lookup of a few seconds, then cached for the next time
and for the controller: ``adapters.oslogin.UserResolver``) and IAP's worker VM names for the
slot's node (one guest-attributes read, ``runtime.reach``, kept for this command only); and the
check that a node is one anything answers on.

May: read desired.yaml and the snapshot, make those read-only look-ups, cache the OS Login
user. May not: act on the cloud, SSH, edit anything, print.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reconciler.adapters.worker_names import WorkerNames
    from reconciler.intent.engine import IntentEditor


def check_reachable(slot: str, addresses: Iterable[str]) -> None:
    """``NoMachine`` when one of ``addresses`` is an emulated node's (a documentation range):
    nothing answers there."""
    from reconciler.adapters.ssh import check_dialable

    check_dialable(slot, addresses)


def resolve_user(store: IntentEditor) -> None:
    """Find the OS Login user when neither settings nor the cache name one: one gcloud lookup
    of a few seconds, cached for the next time (and for the controller). A lookup that failed
    lately is not repeated: ``SetupFailed`` naming ``settings.ssh_user``, at once."""
    from reconciler.intent.log_stream import user_resolver

    asyncio.run(user_resolver(store.state).resolve())


def vm_names(store: IntentEditor, slot: str) -> WorkerNames | None:
    """IAP's worker VM names for the slot's node when the controller has kept none: one
    guest-attributes read (``runtime.reach``), kept for this command only. None when the
    slot is not reached through IAP, or its names are known."""
    from reconciler.adapters.ssh_routes import node_of
    from reconciler.intent import views
    from reconciler.runtime import reach

    desired = store.parse(store.read().decode("utf-8", "replace"))
    snapshot = views.read_snapshot(store)
    row = snapshot.by_name().get(slot) if snapshot is not None else None
    node = node_of(row) if row is not None else None
    if node is None:
        return None

    async def look() -> WorkerNames | None:
        async with reach.routes(desired, store.state, os.environ) as routes:
            names = routes.names
            api = routes.api(slot, node)
            if routes.proxy(slot, node).kind != "iap" or names is None or names.known(node, api):
                return None
            await names.of(node, routes.lookup, api)
            return names

    return asyncio.run(look())
