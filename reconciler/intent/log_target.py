"""Where a slot's workload runs now, as the controller's snapshot says: its node (rebuilt from
the row's ``instance`` and ``ips``) and run id, or why there is none. The logs use case reads
its output there (``tpu-reconciler logs``, the MCP ``workload_logs`` tool, the TUI's logs
pane).

May: read a snapshot value. May not: do I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler.model.observed import NetworkEndpoint, Node, NodeState
from reconciler.model.status import StatusSnapshot


@dataclass(frozen=True, slots=True)
class Target:
    """Where a slot's workload runs now, as the snapshot says."""

    node: Node | None
    run_id: str | None
    reason: str = ""  # why there is no node


def target_of(snapshot: StatusSnapshot | None, slot: str) -> Target:
    """The slot's node (rebuilt from ``instance`` and ``ips``) and workload run id."""
    if snapshot is None:
        return Target(None, None, "no status snapshot yet: is the controller running?")
    row: Any = next((s for s in snapshot.slots if s.name == slot), None)
    if row is None:  # a race group's one program across its winners
        row = next((g for g in snapshot.race_groups if g.name == slot and g.workload), None)
    if row is None:
        return Target(None, None, f"no slot {slot!r} in the status snapshot")
    run_id = (row.workload.run_id if row.workload is not None else None) or None
    if not row.instance or "@" not in row.instance or not row.ips:
        state = getattr(row, "node_state", None) or getattr(row, "state", None) or "unknown"
        return Target(None, run_id, f"{slot} has no reachable node now (state {state})")
    name, _, uid = row.instance.partition("@")
    node = Node(
        name=name,
        zone=getattr(row, "zone", None) or "",
        state=NodeState.READY,
        uid=uid,
        endpoints=tuple(NetworkEndpoint(ip) for ip in row.ips),
    )
    return Target(node, run_id)
