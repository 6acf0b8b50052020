"""Which way each slot's workers are reached: its ``ssh_proxy`` made into a hop per worker.

``SshRoutes(desired, names, lookup)`` (or ``settings=`` alone: every slot as the settings say)
answers for every SSH use (setup steps, the workload
runner's pool, ``logs``, ``ssh``, ``doctor``): ``proxy(slot, node)`` is the slot's resolved
``SshProxy`` (a slot no longer in the file, or a race group's program, falls back to the
node's own slot, then to ``settings.ssh_proxy``); ``workers(node, slot, workers)`` gives the
same workers with their ``hop`` (``ssh_proxy.hop_for``): ``%h``/``%p``/``%n`` filled in for a
command, the workers' VM names for ``iap`` (``worker_names``, looked up once per node instance
through ``lookup`` — the cloud's ``guest_attributes`` — when a lookup is given), the jump host
for ``jump``. ``known_workers`` does the same from what is known already, for a view that may
not ask the cloud. ``node_of`` rebuilds a slot's node from its snapshot row, for the commands
that dial it from outside the controller.

May: look VM names up through the lookup it is given. May not: dial, print.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from reconciler.adapters.ssh_proxy import GCLOUD, hop_for
from reconciler.adapters.ssh_values import Worker
from reconciler.adapters.worker_names import Lookup, WorkerNames
from reconciler.model.accelerators import TPU_API
from reconciler.model.desired import Desired, Settings, SlotSpec
from reconciler.model.observed import NetworkEndpoint, Node, NodeState
from reconciler.model.ssh_proxy import DIRECT, SshProxy, resolve_proxy
from reconciler.model.status import SlotStatus


class SshRoutes:
    """The hops to the workers of ``desired``'s slots; ``names`` keeps their VM names."""

    def __init__(
        self,
        desired: Desired | None,
        names: WorkerNames | None = None,
        lookup: Lookup | None = None,
        *,
        settings: Settings | None = None,
        gcloud: str = GCLOUD,
    ) -> None:
        self.desired = desired
        self.settings = desired.settings if desired is not None else settings
        self.names = names
        self.lookup = lookup
        self.gcloud = gcloud

    def spec(self, slot: str, node: Node) -> SlotSpec | None:
        if self.desired is None:
            return None
        return self.desired.slot(slot) or self.desired.slot(node.name)

    def proxy(self, slot: str, node: Node) -> SshProxy:
        spec = self.spec(slot, node)
        if spec is not None:
            return spec.ssh_proxy
        return resolve_proxy(self.settings.ssh_proxy) if self.settings is not None else DIRECT

    def api(self, slot: str, node: Node) -> str:
        """The API holding the slot's node (its VM names come from there)."""
        spec = self.spec(slot, node)
        return spec.api if spec is not None else TPU_API

    def _with(
        self, node: Node, slot: str, workers: Sequence[Worker], vms: Sequence[str]
    ) -> tuple[Worker, ...]:
        proxy = self.proxy(slot, node)
        if proxy.direct:
            return tuple(workers)
        project = self.desired.project if self.desired is not None else ""
        return tuple(
            replace(
                w,
                hop=hop_for(
                    proxy,
                    host=w.host,
                    port=w.port,
                    node=node.name,
                    vm=vms[w.index] if 0 <= w.index < len(vms) else None,
                    zone=node.zone,
                    project=project,
                    gcloud=self.gcloud,
                ),
            )
            for w in workers
        )

    def _iap(self, node: Node, slot: str) -> tuple[WorkerNames, str] | None:
        """Where an IAP slot's worker VM names are kept, and its API; None for the rest."""
        if self.proxy(slot, node).kind != "iap":
            return None
        return self.names or WorkerNames.nowhere(), self.api(slot, node)

    async def workers(self, node: Node, slot: str, workers: Sequence[Worker]) -> tuple[Worker, ...]:
        """``workers`` (``node``'s, worker 0 first) with the hop each is reached by. Raises
        SetupFailed when an IAP worker's VM name cannot be found."""
        iap = self._iap(node, slot)
        vms = await iap[0].of(node, self.lookup, iap[1]) if iap is not None else ()
        return self._with(node, slot, workers, vms)

    def known_workers(self, node: Node, slot: str, workers: Sequence[Worker]) -> tuple[Worker, ...]:
        """As ``workers``, from the names already known (never a lookup): SetupFailed when an
        IAP worker's VM name is not known yet."""
        iap = self._iap(node, slot)
        vms = (iap[0].known(node, iap[1]) or ()) if iap is not None else ()
        return self._with(node, slot, workers, vms)


def node_of(row: SlotStatus) -> Node | None:
    """The slot's node as the snapshot shows it (name, zone, instance, one endpoint per
    worker address), or None when it has none."""
    ips = [ip for ip in row.ips if isinstance(ip, str)]
    if not ips or not row.instance or "@" not in row.instance:
        return None
    name, _, uid = row.instance.partition("@")
    return Node(
        name=name,
        zone=row.zone or "",
        state=NodeState.READY,
        uid=uid,
        endpoints=tuple(NetworkEndpoint(ip) for ip in ips),
    )
