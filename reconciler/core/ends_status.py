"""What status shows of ``setup.at_boot``, ``workload.before_end`` and a maintenance window
that can be moved: ``with_ends`` fills the rows ``core/status.build_status`` made.

- ``setup.at_boot`` (``BootStatus``): each worker's word for the file's generation (done,
  running, failed, waiting), and ``bootstrap`` itself reads ``running`` while the node's boot
  runs it, ``failed`` when a worker's script failed;
- ``before_end`` (``BeforeEndStatus``): the next known end, when the command runs before it,
  whether it is due, ran (and how) or failed (retried until the end);
- a maintenance window that ``canReschedule``: the command that starts it now
  (``reschedule_command``), in ``maintenance.command`` and at the end of ``health_note``.

Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from reconciler.core import before_end, boot_setup
from reconciler.core.memory import Memory
from reconciler.model.accelerators import COMPUTE_API
from reconciler.model.capacity import CapacityRequest
from reconciler.model.desired import Desired, SlotSpec
from reconciler.model.observed import Node, Observation
from reconciler.model.status import BeforeEndStatus, BootStatus, SlotStatus
from reconciler.model.times import utc_text


def reschedule_command(project: str, request: CapacityRequest, node: Node) -> str:
    """The gcloud command that starts a node's pending maintenance now (so it is over
    before the window): the TPU API's ``perform-maintenance`` (alpha) of the node, or of every
    slice of a multislice queued resource; Compute Engine's of the instance, or of every host
    of a MIG slice (``NAME-0`` ...: it goes down with any of them; ``Node.vm_names``)."""
    where = f"--zone={node.zone} --project={project}"
    if request.api == COMPUTE_API:
        return f"gcloud compute instances perform-maintenance {' '.join(node.vm_names())} {where}"
    if node.slices:
        names = ",".join(s.name for s in node.slices)
        return (
            f"gcloud alpha compute tpus queued-resources perform-maintenance {request.name} "
            f"{where} --node-names={names}"
        )
    return f"gcloud alpha compute tpus tpu-vm perform-maintenance {node.name} {where}"


def boot_status(spec: SlotSpec, node: Node | None, memory: Memory) -> BootStatus | None:
    seen = boot_setup.seen(memory, spec, node)
    if not spec.setup.at_boot or seen is None:
        return None
    return BootStatus(seen.generation, seen.workers, seen.detail)


def _bootstrap_word(current: str | None, boot: BootStatus | None) -> str | None:
    if boot is None or current == "done":
        return current
    if "failed" in boot.workers:
        return "failed"
    return "running" if "running" in boot.workers else current


def before_end_status(
    spec: SlotSpec, observed: Observation, memory: Memory, now: float
) -> BeforeEndStatus | None:
    before = spec.workload.before_end if spec.workload is not None else None
    request = observed.request(spec.zone, spec.name)
    if before is None:
        return None
    node = observed.node_of(request) if request is not None else None
    seen = memory.ends.get(spec.name)
    last = (
        f"{seen.outcome} before {seen.last.partition('@')[0]} at {seen.last_at} "
        f"(attempt {seen.attempt})"
        if seen is not None and seen.outcome
        else ""
    )
    coming = [e for e in before_end.known_ends(spec, request, node, observed, memory) if e.at > now]
    if not coming:
        return BeforeEndStatus(state="ran", last=last) if last else None
    end = coming[0]
    wm = memory.workload(spec.name)
    error = memory.error(f"{spec.zone}/{spec.name}:before_end")
    if wm is not None and before_end.already(memory, spec.name, wm, end):
        state = "ran"
    elif error is not None:
        state, last = "failed", error.message
    elif wm is None or wm.phase != "running":
        state = "waiting"
    else:
        state = "due" if before_end.due(spec, end, now) else "scheduled"
    return BeforeEndStatus(
        end=end.kind,
        at=end.stamp,
        runs_at=utc_text(max(end.at - before.lead, 0.0)),
        state=state,
        last=last,
    )


def with_ends(
    rows: Sequence[SlotStatus],
    desired: Desired | None,
    observed: Observation,
    memory: Memory,
    now: float,
) -> tuple[SlotStatus, ...]:
    """``rows`` with what this module adds (see the module docstring)."""
    if desired is None:
        return tuple(rows)
    out = []
    for row in rows:
        spec = desired.slot(row.name) if row.managed else None
        request = observed.request(spec.zone, spec.name) if spec is not None else None
        node = observed.node_of(request) if request is not None else None
        if spec is None or request is None:
            out.append(row)
            continue
        changes: dict[str, object] = {}
        boot = boot_status(spec, node, memory)
        if boot is not None and row.setup is not None:
            word = _bootstrap_word(row.setup.bootstrap, boot)
            changes["setup"] = replace(row.setup, at_boot=boot, bootstrap=word)
        ends = before_end_status(spec, observed, memory, now)
        if ends is not None:
            changes["before_end"] = ends
        m = row.maintenance
        if m is not None and m.can_reschedule and node is not None:
            command = reschedule_command(desired.project, request, node)
            changes["maintenance"] = replace(m, command=command)
            changes["health_note"] = f"{row.health_note or 'maintenance'}: {command}"
        out.append(replace(row, **changes) if changes else row)  # type: ignore[arg-type]
    return tuple(out)
