"""``setup.at_boot``: waiting for a node's boot script instead of running setup over SSH.

A slot with ``at_boot`` is created with its setup scripts in the node's startup-script
metadata (``model/boot_script.py``; the runtime reads the scripts when the create is sent).
Its workers run them on every boot and report in a guest attribute. The rules:

- ``targets``: the slots whose node boots with the setup generation the file asks for
  (``Node.boot_generation``) and whose bootstrap is not yet recorded done for that instance
  and generation: the runtime reads their workers' reports (one guest-attributes call per
  node, or slice) and ``fold`` keeps them in memory; every worker ``done`` records the
  bootstrap step done, as one run over SSH would. A report that cannot be read is unknown and
  changes nothing.
- ``waiting``: the planner proposes no ``~ bootstrap`` while the node's own boot runs it —
  also while a worker reports ``failed`` (a script fails the same way twice: fix it and bump
  ``setup.generation``). It does run bootstrap over SSH, as without ``at_boot``, when the node
  boots with another generation or none (the file's setup changed after the create, or
  ``at_boot`` was turned on for a held node: the TPU is never re-created for it; the runtime
  then also updates the node's metadata for its next boot where the API allows), or when no
  worker has reported anything ``SILENT_AFTER`` after the node became ACTIVE (``ssh_reason``).
- ``notices``: a boot script that failed is told once per instance and generation.

Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Final

from reconciler.core import memory as mem
from reconciler.core.ends_memory import BootSeen
from reconciler.core.plan_values import Notice
from reconciler.model.boot_script import BootReport
from reconciler.model.capacity import RequestState
from reconciler.model.desired import Desired, SlotSpec
from reconciler.model.durations import format_duration
from reconciler.model.observed import Node, NodeState, Observation

#: With no report from any worker this long after the node became ACTIVE, setup runs over SSH.
SILENT_AFTER: Final = 20 * 60.0
_BOOTSTRAP: Final = "bootstrap"


def boots_with(spec: SlotSpec, node: Node | None) -> bool:
    """The node runs this slot's setup generation at every boot."""
    return (
        spec.setup.at_boot
        and node is not None
        and node.boot_generation is not None
        and node.boot_generation == spec.setup.generation
    )


def targets(
    desired: Desired | None, observed: Observation, memory: mem.Memory
) -> list[tuple[SlotSpec, Node]]:
    """The ACTIVE, READY nodes whose boot script's reports are still wanted."""
    out = []
    for spec in desired.slots if desired is not None else ():
        if not spec.setup.at_boot:
            continue
        request = observed.request(spec.zone, spec.name)
        if request is None or request.state != RequestState.ACTIVE:
            continue
        node = observed.node_of(request)
        if node is None or node.state != NodeState.READY or not node.endpoints:
            continue
        if not boots_with(spec, node):
            continue
        if memory.setup_done(spec.name, _BOOTSTRAP, node.instance, spec.setup.generation):
            continue
        out.append((spec, node))
    return out


def worker_state(report: BootReport | None, generation: int) -> str:
    if report is None or report.generation != generation:
        return "waiting"  # nothing yet, or an older boot's word
    return report.state


def fold(
    memory: mem.Memory,
    spec: SlotSpec,
    node: Node,
    reports: Sequence[BootReport | None],
    now: float,
) -> mem.Memory:
    """One look at the node's workers' reports (``reports[i]``: worker i's, None when it has
    none); every worker done records the bootstrap step done for this instance and generation."""
    generation = spec.setup.generation
    states = tuple(worker_state(r, generation) for r in reports)
    failed = [
        f"{r.detail or 'failed'} on worker {i}"
        for i, (r, state) in enumerate(zip(reports, states, strict=True))
        if r is not None and state == "failed"
    ]
    before = seen(memory, spec, node)
    now_seen = BootSeen(
        instance=node.instance,
        generation=generation,
        workers=states,
        detail="; ".join(failed)[:500],
        since=before.since if before is not None else now,
    )
    if now_seen != memory.boot.get(spec.name):
        memory = replace(memory, boot=MappingProxyType({**memory.boot, spec.name: now_seen}))
    if states and all(s == "done" for s in states):
        memory = mem.record_setup(memory, spec.name, _BOOTSTRAP, node.instance, generation)
    return memory


def unread(memory: mem.Memory, spec: SlotSpec, node: Node, why: str, now: float) -> mem.Memory:
    """The reports could not be read this pass: what was seen stays, and ``why`` is shown
    (unknown, never a failure; the planner goes on waiting, up to ``SILENT_AFTER``)."""
    old = seen(memory, spec, node)
    workers = old.workers if old is not None else ("waiting",) * len(node.endpoints)
    note = f"cannot read the workers' reports: {why}"[:300]
    b = BootSeen(node.instance, spec.setup.generation, workers, note, old.since if old else now)
    return replace(memory, boot=MappingProxyType({**memory.boot, spec.name: b}))


def seen(memory: mem.Memory, spec: SlotSpec, node: Node | None) -> BootSeen | None:
    """What was last seen of this node's boot script for the file's generation."""
    b = memory.boot.get(spec.name)
    if (
        b is None
        or node is None
        or (b.instance, b.generation)
        != (
            node.instance,
            spec.setup.generation,
        )
    ):
        return None
    return b


def _silent(memory: mem.Memory, spec: SlotSpec, node: Node, now: float) -> bool:
    """No worker has said anything since ``SILENT_AFTER`` after the node became ACTIVE."""
    slot = memory.slot(spec.name)
    if slot.active_instance != node.instance or slot.active_since is None:
        return False
    b = seen(memory, spec, node)
    quiet = b is None or all(w == "waiting" for w in b.workers)
    return quiet and now - slot.active_since >= SILENT_AFTER


def ssh_reason(kind: str, spec: SlotSpec, node: Node, memory: mem.Memory, now: float) -> str | None:
    """For the ``kind`` setup step of an ``at_boot`` slot: "" while the node's boot runs it
    (the planner waits), else why it runs over SSH; None for any other step or slot."""
    if kind != _BOOTSTRAP or not spec.setup.at_boot:
        return None
    generation = spec.setup.generation
    if node.boot_generation is None:
        return f"node {node.instance} boots without the setup scripts: generation {generation} " + (
            "over SSH"
        )
    if node.boot_generation != generation:
        return (
            f"node {node.instance} boots setup generation {node.boot_generation}: generation "
            f"{generation} over SSH (and for its next boot)"
        )
    if _silent(memory, spec, node, now):
        return (
            f"no worker of {node.instance} reported its boot script in "
            f"{format_duration(SILENT_AFTER)}: generation {generation} over SSH"
        )
    return ""


def notices(memory: mem.Memory, spec: SlotSpec, observed: Observation) -> list[Notice]:
    """A boot script that failed, once per instance and generation."""
    if not spec.setup.at_boot:
        return []
    request = observed.request(spec.zone, spec.name)
    b = seen(memory, spec, observed.node_of(request) if request is not None else None)
    if b is None or "failed" not in b.workers:
        return []
    key = f"{b.instance}:boot-failed:{b.generation}"
    if key in memory.notified:
        return []
    return [
        Notice(
            key,
            spec.name,
            "boot-failed",
            f"{spec.name} setup failed at boot",
            f"{b.detail}; fix the script and bump setup.generation (it then runs over SSH)",
        )
    ]


def create_note(spec: SlotSpec) -> str:
    """What a create adds to its reason with ``at_boot``: the setup goes into its metadata."""
    if not spec.setup.at_boot:
        return ""
    count = len(spec.setup.scripts)
    return f"; setup at boot ({count} script{'' if count == 1 else 's'}, generation " + (
        f"{spec.setup.generation})"
    )
