"""What a node's own health signals say, and what the user can do about them.

The node list the controller already reads carries ``health`` (HEALTHY, TIMEOUT,
UNHEALTHY_TENSORFLOW, UNHEALTHY_MAINTENANCE), ``symptoms[]`` (OUT_OF_MEMORY,
HBM_OUT_OF_MEMORY, MESH_BUILD_FAIL, EXECUTE_TIMED_OUT, LOW_MEMORY, ...) and
``upcomingMaintenance``. They are shown (status NOTE, ``--json``, ``info``, the TUI), put in
events and notified once each; they are never by themselves a reason to delete or relaunch
anything: the node may recover, and the user knows what their program is doing.

Pure: values in, text out.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

from reconciler.core.plan_values import Notice
from reconciler.model.observed import Node

#: What the user can do, per symptom or health value.
ADVICE: Final = {
    "OUT_OF_MEMORY": "the TPU runtime ran out of host memory: lower the batch size or host buffers",
    "LOW_MEMORY": "host memory is low: check what else runs on the workers",
    "HBM_OUT_OF_MEMORY": "TPU HBM is full: lower the batch size or shard the model further",
    "MESH_BUILD_FAIL": "the runtime could not build the device mesh: restart the program; "
    "if it persists, release and re-hold the slot",
    "EXECUTE_TIMED_OUT": "a TPU execution timed out: check for a hang; restart the program",
    "PROJECT_ABUSE": "the project was flagged: contact Google Cloud support",
    "TIMEOUT": "the node does not answer health checks: wait, or release and re-hold the slot",
    "UNHEALTHY_TENSORFLOW": "the in-guest ML stack is unhealthy: restart the program",
    "UNHEALTHY_MAINTENANCE": "the node is under maintenance and resumes once rescheduled",
}
_QUIET_HEALTH: Final = frozenset({"HEALTHY", "HEALTH_UNSPECIFIED"})


def signals(node: Node | None) -> tuple[str, ...]:
    """Each signal on one line, sorted: ``health TIMEOUT``, ``HBM_OUT_OF_MEMORY on worker 2``,
    ``maintenance SCHEDULED from 2026-12-01T08:00:00Z``; () for a healthy node."""
    if node is None:
        return ()
    out = []
    if node.health and node.health not in _QUIET_HEALTH:
        out.append(f"health {node.health}")
    for s in node.symptoms:
        out.append(s.kind + (f" on worker {s.worker}" if s.worker else ""))
    m = node.maintenance
    if m is not None:
        what = " ".join(w for w in ("maintenance", m.kind, m.status) if w)
        out.append(what + (f" from {m.window_start}" if m.window_start else ""))
    return tuple(sorted(set(out)))


def note(node: Node | None) -> str | None:
    """The NOTE for a node with signals: what is wrong, then what the user can do."""
    found = signals(node)
    if not found or node is None:
        return None
    kinds = [node.health or ""] + [s.kind for s in node.symptoms]
    advice = next((ADVICE[k] for k in kinds if k in ADVICE), None)
    if advice is None and node.maintenance is not None:
        advice = "save your work before the window" + (
            "; it can be rescheduled" if node.maintenance.can_reschedule else ""
        )
    return "; ".join(found) + (f" — {advice}" if advice else "")


def notices(slot: str, node: Node | None, notified: Collection[str]) -> list[Notice]:
    """One notice per signal per node instance, the first time it is seen."""
    if node is None:
        return []
    out = []
    for signal in signals(node):
        key = f"{node.instance}:health:{signal}"
        if key not in notified:
            out.append(Notice(key, slot, "health", f"{slot} node: {signal}", note(node) or ""))
    return out
