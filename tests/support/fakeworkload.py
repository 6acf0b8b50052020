"""An in-memory workload port and a cloud with one READY v4-32, for controller unit tests.

``FakeWorkers`` keeps, per (slot, run id, attempt), each worker's state the way the remote
wrapper would: a second launch of the same attempt starts nothing (the wrapper's flock), stop
turns every live worker into "exited 143". Tests steer it (``exit``, ``unreachable``,
``probe_gate``). Everything users meet is tested against real sshd in tests/integration.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass, field

from reconciler.core.plan import Action
from reconciler.model.capacity import RequestState
from reconciler.model.desired import Desired
from reconciler.model.observed import NetworkEndpoint, Node, NodeState, Observation
from reconciler.model.workload import WorkerProbe
from tests.support.fakecloud import FakeCloud

Attempt = tuple[str, str, int]  # slot, run id, attempt


@dataclass
class FakeWorkers:
    workers: int = 4
    procs: dict[Attempt, list[tuple[str, int | None]]] = field(default_factory=dict)
    started: list[Attempt] = field(default_factory=list)  # copies really started
    sent: list[Attempt] = field(default_factory=list)  # every launch call
    stops: list[Attempt] = field(default_factory=list)
    unreachable: set[int] = field(default_factory=set)
    probe_gate: asyncio.Event | None = None

    def exit(self, key: Attempt, worker: int, code: int) -> None:
        self.procs[key][worker] = ("exited", code)

    async def workload_launch(self, desired: Desired, action: Action, node: Node) -> None:
        assert action.workload is not None
        key = (action.slot, action.workload.run_id, action.workload.attempt)
        self.sent.append(key)
        if key not in self.procs:
            self.procs[key] = [("alive", None)] * len(node.endpoints)
            self.started.append(key)

    async def workload_stop(self, desired: Desired, action: Action, node: Node) -> None:
        assert action.workload is not None
        key = (action.slot, action.workload.run_id, action.workload.attempt)
        self.stops.append(key)
        self.procs[key] = [
            ("exited", 143) if s == "alive" else (s, c) for s, c in self.procs.get(key, [])
        ]

    async def workload_probe(
        self, desired: Desired, node: Node, slot: str, run_id: str, attempt: int
    ) -> tuple[WorkerProbe, ...]:
        if self.probe_gate is not None:
            await self.probe_gate.wait()
        procs = self.procs.get((slot, run_id, attempt)) or [("missing", None)] * len(node.endpoints)
        return tuple(
            WorkerProbe(i, "unknown", error="ssh: connection refused")
            if i in self.unreachable
            else WorkerProbe(i, s, exit_code=c)  # type: ignore[arg-type]
            for i, (s, c) in enumerate(procs)
        )

    async def workload_tail(
        self, desired: Desired, node: Node, slot: str, run_id: str, attempt: int, worker: int
    ) -> tuple[str, ...]:
        code = self.procs.get((slot, run_id, attempt), [("missing", None)] * (worker + 1))[worker]
        return (f"worker {worker} attempt {attempt}", f"exit {code[1]}")


class ReadyCloud(FakeCloud):
    """FakeCloud whose created QRs are ACTIVE at once with a READY four-worker node."""

    def __init__(self, uid: str = "1001") -> None:
        super().__init__()
        self.uid = uid

    async def observe(self, zones: Collection[str] | None) -> Observation:
        base = await super().observe(zones)
        from dataclasses import replace

        qrs = tuple(
            replace(q, state=RequestState.ACTIVE, api_state="ACTIVE") for q in base.requests
        )
        nodes = tuple(
            Node(
                name=q.name,
                zone=q.zone,
                state=NodeState.READY,
                uid=self.uid,
                endpoints=tuple(NetworkEndpoint(f"10.0.0.{i + 2}") for i in range(4)),
            )
            for q in qrs
        )
        return Observation(requests=qrs, nodes=nodes, zones=base.zones)
