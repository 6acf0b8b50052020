"""The I/O side of ``doctor``'s SSH checks (``runtime.doctor_ssh`` judges what these find).

``probe_key``: the private key the controller would use (``settings.ssh_key``, else
``~/.ssh/google_compute_engine``), looked at, never kept. ``probe_reach``: one login to worker
0 of the first slot needing SSH whose node the controller's snapshot shows live at a real
address (``adapters.ssh_probe.try_login``: pins nothing), through that slot's ``ssh_proxy``
(``runtime.reach``: IAP's worker VM name kept by the controller, else read from the node's
guest attributes). ``probe_proxies``: each proxy the SSH slots use, and its program on ``PATH``.

May: read the key and the snapshot's node, read guest attributes, open one SSH connection.
May not: write anything, print.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from reconciler.adapters.ssh_proxy import GCLOUD
from reconciler.adapters.ssh_values import DEFAULT_KEY, workers_of
from reconciler.adapters.statedir import StateDir
from reconciler.errors import ReconcilerError
from reconciler.model.addresses import is_documentation_address
from reconciler.model.desired import Desired, Settings
from reconciler.model.ssh_proxy import SshProxy
from reconciler.model.status import StatusSnapshot
from reconciler.runtime import doctor_ssh as ds


def key_path(settings: Settings, env: Mapping[str, str]) -> Path:
    """The key as the controller finds it (``~`` is the HOME of ``env``)."""
    raw = str(settings.ssh_key) if settings.ssh_key else str(DEFAULT_KEY)
    if raw.startswith("~/") and env.get("HOME"):
        return Path(env["HOME"]) / raw[2:]
    return Path(raw).expanduser()


def probe_key(settings: Settings, env: Mapping[str, str]) -> ds.KeyFacts:
    from reconciler.adapters.ssh_probe import inspect_key

    path = key_path(settings, env)
    found = inspect_key(path)
    return ds.KeyFacts(str(path), found.exists, found.encrypted, found.public, found.problem)


def probe_proxies(
    desired: Desired | None, slots: Sequence[str], env: Mapping[str, str]
) -> list[ds.ProxyFacts]:
    """Each distinct ``ssh_proxy`` of ``slots`` (in file order) with its program on ``PATH``."""
    if desired is None:
        return []
    users: dict[SshProxy, list[str]] = {}
    for name in slots:
        spec = desired.slot(name)
        if spec is not None and not spec.ssh_proxy.direct:
            users.setdefault(spec.ssh_proxy, []).append(name)
    facts = []
    for proxy, names in users.items():
        program = GCLOUD if proxy.kind == "iap" else (proxy.command or (None,))[0]
        found = shutil.which(program, path=env.get("PATH")) if program else None
        facts.append(ds.ProxyFacts(proxy.text, program, found, tuple(names)))
    return facts


def live_node(
    snapshot: StatusSnapshot | None, slots: Sequence[str]
) -> tuple[str, str, tuple[str, ...]] | str:
    """(slot, instance, worker addresses) of the first slot of ``slots`` the snapshot shows on
    a node (its addresses as ``status`` shows them, the ones ``logs`` dials), or why there
    is none to try."""
    wanted = set(slots)
    rows = [
        r
        for r in (snapshot.slots if snapshot else ())
        if r.name in wanted and r.instance and "@" in r.instance and r.ips
    ]
    if not rows:
        return ds.NO_LIVE_NODE
    real = [r for r in rows if not all(is_documentation_address(ip) for ip in r.ips)]
    if not real:
        return ds.EMULATED
    row = real[0]
    assert row.instance is not None
    return row.name, row.instance, tuple(row.ips)


async def probe_reach(
    node: tuple[str, str, tuple[str, ...]],
    user: str,
    desired: Desired,
    snapshot: StatusSnapshot | None,
    state: StateDir,
    env: Mapping[str, str],
    timeout: float,
) -> ds.ReachFacts:
    from reconciler.adapters.ssh_probe import try_login
    from reconciler.adapters.ssh_routes import node_of
    from reconciler.adapters.ssh_session import describe
    from reconciler.runtime import reach

    slot, instance, ips = node
    settings = desired.settings
    row = snapshot.by_name().get(slot) if snapshot is not None else None
    seen = node_of(row) if row is not None else None
    kind = None
    try:
        worker = workers_of(ips[:1], port=settings.ssh_port)[0]
        if seen is not None:
            async with reach.routes(desired, state, env) as routes:
                kind = routes.proxy(slot, seen).kind
                (worker,) = await asyncio.wait_for(routes.workers(seen, slot, (worker,)), timeout)
    except TimeoutError:
        return ds.ReachFacts(slot, f"worker 0 of {instance}", user, "no VM name within time", kind)
    except ReconcilerError as exc:
        return ds.ReachFacts(slot, f"worker 0 of {instance}", user, str(exc), kind)
    kind = None if kind == "none" else kind
    what = describe(worker, instance)
    try:
        await asyncio.wait_for(
            try_login(
                instance,
                worker,
                user=user,
                key_path=key_path(settings, env),
                agent_path=env.get("SSH_AUTH_SOCK") or None,
                known_hosts=state.known_hosts,
                timeout=timeout,
            ),
            timeout * 2,
        )
    except TimeoutError:
        return ds.ReachFacts(slot, what, user, f"no answer within {timeout:g}s", kind)
    except ReconcilerError as exc:
        return ds.ReachFacts(slot, what, user, str(exc).removeprefix(f"{what}: "), kind)
    return ds.ReachFacts(slot, what, user, proxy=kind)
