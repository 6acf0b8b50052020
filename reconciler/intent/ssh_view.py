"""The ``ssh_command`` view: the OpenSSH command line to one worker of a slot.

The same argv as the slot's tmux window (``adapters.openssh.ssh_argv``): the node instance's
pinned known_hosts entry, the SSH user (``settings.ssh_user``, else the cached OS Login user),
the key, agent forwarding, and — when the slot has an ``ssh_proxy`` — the ``ProxyCommand`` of
its hop (``adapters.ssh_routes``; IAP's worker VM name as the controller keeps it, or as the
caller looked it up). The address and instance come from the controller's snapshot.

May: read desired.yaml's values, the snapshot given, the state dir's ``oslogin_user``,
``known_hosts`` owner and ``worker_names.json``. May not: write anything, call the cloud, SSH.
"""

from __future__ import annotations

import ipaddress
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.adapters.hostkeys import check_trusted
from reconciler.adapters.openssh import ssh_argv
from reconciler.adapters.ssh_routes import SshRoutes, node_of
from reconciler.adapters.ssh_values import Worker
from reconciler.adapters.worker_names import WorkerNames
from reconciler.errors import ReconcilerError, UntrustedHostKeys, ViewError
from reconciler.intent import group_info as groups
from reconciler.model import names
from reconciler.model.desired import Desired
from reconciler.model.status import StatusSnapshot

if TYPE_CHECKING:  # the edit engine loads only where an edit is made
    from reconciler.intent.engine import IntentEditor


def _ssh_user(store: IntentEditor, desired: Desired | None) -> str | None:
    user = desired.settings.ssh_user if desired else None
    if user is None:
        try:
            user = store.state.oslogin_user.read_text().strip() or None
        except OSError:
            user = None
    return names.check_user(user) if user else None


def _ssh_key(store: IntentEditor, desired: Desired | None) -> Path:
    configured = desired.settings.ssh_key if desired else None
    if not configured:
        return Path("~/.ssh/google_compute_engine").expanduser()
    key = Path(configured).expanduser()
    return key if key.is_absolute() else store.path.parent / key


def _check_known_hosts(store: IntentEditor) -> None:
    """OpenSSH reads known_hosts without asking whose it is: refuse one a lab member put in
    place of the controller's (``model/trust``), as the controller's own setup does."""
    try:
        check_trusted(store.state.known_hosts)
    except UntrustedHostKeys as e:
        raise ViewError(str(e)) from None
    except OSError:
        return  # unreadable: OpenSSH then trusts no host either


def ssh_command(
    store: IntentEditor,
    name: str,
    worker: int,
    desired: Desired | None,
    snap: StatusSnapshot | None,
    vm_names: WorkerNames | None = None,
) -> dict[str, Any]:
    """The view's fields (``views.ssh_command`` adds the schema version)."""
    if snap is None:
        raise ViewError("no status snapshot yet: the controller has not reported an address")
    row = snap.by_name().get(name)
    if row is None:
        hint = groups.group_hint(snap, name)  # a race group's name: what to use instead
        raise ViewError(f"slot {name!r} is not in the status snapshot{hint}")
    ips = [ip for ip in row.ips if isinstance(ip, str)]
    instance = row.instance
    if not ips or not isinstance(instance, str):
        raise ViewError(f"slot {name!r} has no node yet (state {row.state})")
    if not 0 <= worker < len(ips):
        raise ViewError(f"slot {name!r} has workers 0..{len(ips) - 1}, not {worker}")
    try:
        ip = str(ipaddress.ip_address(ips[worker]))
    except ValueError:
        raise ViewError(f"snapshot address {ips[worker]!r} is not an IP address") from None
    alias = names.host_key_alias(instance, worker)
    _check_known_hosts(store)
    port = desired.settings.ssh_port if desired else 22
    routes = SshRoutes(desired, vm_names or WorkerNames(store.state.worker_names))
    node = node_of(row)
    hop = None
    if node is not None:
        proxy = routes.proxy(name, node)
        try:
            (reached,) = routes.known_workers(node, name, (Worker(worker, ip, port),))
        except ReconcilerError as e:
            raise ViewError(
                f"{e}; `tpu-reconciler ssh {name} --print` looks the names up"
                if proxy.kind == "iap"
                else str(e)
            ) from None
        hop = reached.hop
    argv = list(
        ssh_argv(
            user=_ssh_user(store, desired),
            ip=ip,
            instance=instance,
            key=_ssh_key(store, desired),
            known_hosts=store.state.known_hosts.absolute(),
            port=port,
            worker=worker,
            hop=hop,
        )
    )
    fields: dict[str, Any] = {
        "available": True,
        "command": shlex.join(argv),
        "argv": argv,
        "worker": worker,
        "workers": len(ips),
        "ip": ip,
        "host_key_alias": alias,
        "instance": instance,
    }
    if hop is not None:
        fields["proxy"] = hop.label
    return fields
