"""Each worker's VM name, for IAP: what ``gcloud compute start-iap-tunnel`` is asked for.

IAP reaches a VM by its name, never by address. A Compute Engine instance is its own VM: its
name is the node's; a multi-host slice's hosts are created by explicit ordered names
(``<slice>-<i>``), so theirs are known without asking (``compute_names``). A TPU API node does
not list its workers' VMs; gcloud's ``compute tpus tpu-vm ssh --tunnel-through-iap`` reads each
worker's from the node's guest attributes (the ``hostname`` key, whatever its namespace, of
that worker's entry; ``GetFromGuestAttributes`` in ``command_lib/compute/tpus/tpu_vm/ssh.py``),
and so does ``WorkerNames.of``, with the cloud's ``guest_attributes`` (one call per node
instance; a multislice slot's node, one per slice, its workers in slice order).

Names are kept per node *instance* (a re-created node is asked again; steps that start at once
on a new node ask once between them): in memory, and — by the
controller, ``persist=True`` — in ``<state dir>/worker_names.json`` (0600, written atomically),
where ``ssh``, ``logs``, the TUI and MCP read them without asking the cloud. That file is
believed only when its owner is (``owned_files.read_owned``: the controller's user, root, or the
reader): a lab member able to write it could otherwise send the controller's SSH, and its first
use pin, to a VM of their own.

May: call the lookup it is given, read and write that one file. May not: dial anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from reconciler.adapters.files import atomic_write
from reconciler.adapters.owned_files import read_owned
from reconciler.adapters.ssh_proxy import check_vm
from reconciler.errors import ReconcilerError, SetupFailed, UnsafeName
from reconciler.model.accelerators import COMPUTE_API
from reconciler.model.observed import Node

log = logging.getLogger(__name__)

#: ``(zone, node) -> rows`` as ``Cloud.guest_attributes`` gives them (worker_id, key, value).
Lookup = Callable[[str, str], Awaitable[Sequence[Mapping[str, Any]]]]
_KEPT: Final = 256  # node instances remembered in the file


def from_guest_attributes(rows: Sequence[Mapping[str, Any]], workers: int) -> tuple[str, ...]:
    """Worker ``i``'s ``hostname`` attribute, for i in 0..workers-1; SetupFailed naming the
    first worker without one (a VM still booting writes it a little later)."""
    found: dict[int, str] = {}
    for row in rows:
        if row.get("key") != "hostname":
            continue
        try:
            index = int(str(row.get("worker_id")))
            found.setdefault(index, check_vm(row.get("value")))
        except (ValueError, UnsafeName):
            continue
    missing = [i for i in range(workers) if i not in found]
    if missing:
        raise SetupFailed(
            f"worker {missing[0]} has no hostname guest attribute yet (IAP tunnels to the "
            "worker's VM by that name)",
            delay=30.0,
        )
    return tuple(found[i] for i in range(workers))


def compute_names(node: Node) -> tuple[str, ...]:
    """A Compute Engine slot's VM names, worker order (``Node.vm_names``), each checked before
    it reaches gcloud or SSH."""
    return tuple(check_vm(n) for n in node.vm_names())


class WorkerNames:
    """Worker VM names per node instance, looked up once; ``path`` the state dir's file."""

    def __init__(self, path: Path | None, *, persist: bool = False) -> None:
        self.path = path
        self.persist = persist
        self._known: dict[str, tuple[str, ...]] = {}
        self._asking: dict[str, asyncio.Lock] = {}

    @classmethod
    def nowhere(cls) -> WorkerNames:
        """Names kept in memory only (no file)."""
        return cls(None)

    def _file(self) -> dict[str, list[str]]:
        """The file's names (empty when missing, unreadable or not to be believed)."""
        if self.path is None:
            return {}
        try:
            owned = read_owned(self.path)
        except OSError:
            return {}
        if owned.problem is not None:
            log.warning("%s", owned.problem)
            return {}
        try:
            doc = json.loads(owned.content)
        except ValueError:
            return {}
        return doc if isinstance(doc, dict) else {}

    def known(self, node: Node, api: str = "") -> tuple[str, ...] | None:
        """The names already known (memory, then the file); None when they must be asked."""
        if api == COMPUTE_API:
            return compute_names(node)
        names = self._known.get(node.instance)
        if names is None:
            listed = self._file().get(node.instance)
            try:
                if isinstance(listed, list):
                    names = tuple(check_vm(n) for n in listed)
            except UnsafeName:
                names = None
        if names is None or len(names) != len(node.endpoints):
            return None
        self._known[node.instance] = names
        return names

    async def of(self, node: Node, lookup: Lookup | None, api: str = "") -> tuple[str, ...]:
        """The VM name of each worker of ``node``, worker 0 first. SetupFailed when they are
        not known and cannot be looked up (no ``lookup``, a worker without the attribute
        yet, the cloud's refusal). A Compute Engine slot's are known from its names."""
        names = self.known(node, api)
        if names is not None:
            return names
        lock = self._asking.setdefault(node.instance, asyncio.Lock())
        async with lock:  # steps starting at once on a new node ask once between them
            return self.known(node, api) or await self._ask(node, lookup, api)

    async def _ask(self, node: Node, lookup: Lookup | None, api: str) -> tuple[str, ...]:
        if lookup is None:
            raise SetupFailed(
                f"{node.name}: its workers' VM names (for IAP) are not known yet: the "
                "controller looks them up when it first reaches the node"
            )
        names: tuple[str, ...] = ()
        for part in node.slices or (node,):  # a multislice slot: each slice's own node
            try:
                rows = await lookup(part.zone, part.name)
            except ReconcilerError as exc:
                raise SetupFailed(
                    f"{part.name}: cannot read its guest attributes (the workers' VM names, "
                    f"for IAP): {exc}",
                    delay=30.0,
                ) from None
            names += from_guest_attributes(rows, len(part.endpoints))
        if len(names) != len(node.endpoints):
            raise SetupFailed(f"{node.name}: its slices have {len(names)} workers, not "
                              f"{len(node.endpoints)}", delay=30.0)  # fmt: skip
        self._known[node.instance] = names
        if self.persist and self.path is not None:
            self._save(self.path, node.instance, names)
        return names

    def _save(self, path: Path, instance: str, names: tuple[str, ...]) -> None:
        doc = {k: v for k, v in self._file().items() if k != instance}
        doc[instance] = list(names)
        kept = dict(list(doc.items())[-_KEPT:])
        with contextlib.suppress(OSError):  # a cache: a read-only state dir only costs lookups
            atomic_write(path, json.dumps(kept, indent=2) + "\n", durable=False)
