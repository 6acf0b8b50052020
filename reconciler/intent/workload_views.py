"""Read-only views of workloads for MCP tools and CLI verbs: the file's workload joined with
the controller's snapshot (``slots[].workload``; a race group with ``workload.across: group``
also its one ``program``, ``race_groups[].workload``), and whether it is live (so that an edit
that would end it asks for confirmation first).

May: read desired.yaml and the snapshot (through ``intent.views``). May not: edit, or reach
the workers (logs go through ``runtime.setup``'s runner, from the surfaces).
"""

from __future__ import annotations

from typing import Any, Final

from reconciler.errors import ViewError
from reconciler.intent import views
from reconciler.intent.engine import IntentEditor
from reconciler.model import names
from reconciler.model.desired import Desired, WorkloadSpec
from reconciler.model.status import StatusSnapshot, encode

#: States in which a program may be running on the workers (ending it needs confirmation).
LIVE_STATES: Final = frozenset({"starting", "running", "stopping", "unknown"})


def _members(desired: Desired | None, name: str) -> list[str]:
    """The slots ``name`` stands for: itself, or a race group's candidates."""
    if desired is not None and desired.slot(name) is None:
        group = next((g for g in desired.race_groups if g.name == name), None)
        if group is not None:
            return list(group.slots)
    return [name]


def _spec_view(w: WorkloadSpec | None) -> dict[str, Any] | None:
    if w is None:
        return None
    return {
        "command": w.command if isinstance(w.command, str) else list(w.command),
        "workdir": w.workdir,
        "env": dict(w.env),
        "secret_env": dict(w.secret_env),  # names in the secret store, never values
        "restart": w.restart,
        "max_failures": w.max_failures,
        "stall_after": w.stall_after,
        "stop_grace": w.stop_grace,
        "when_done": w.when_done,
        "generation": w.generation,
        "keep_attempts": w.keep_attempts,
    }


def _workloads(snap: StatusSnapshot | None) -> dict[str, dict[str, Any] | None]:
    """slot -> its ``workload`` JSON (None: no workload), for every slot of the snapshot."""
    rows = snap.slots if snap is not None else ()
    return {s.name: encode(s.workload) if s.workload is not None else None for s in rows}


def workload_status(store: IntentEditor, name: str) -> dict[str, Any]:
    """Per slot (a race group: per candidate), the declared workload and its observed state."""
    names.check_name(name)
    desired = store.parse(store.read().decode("utf-8", "replace"))
    snap = views.read_snapshot(store)
    rows = _workloads(snap)
    instances = {s.name: s.instance for s in snap.slots} if snap is not None else {}
    members = _members(desired, name)
    if all(desired.slot(m) is None and m not in rows for m in members):
        raise ViewError(f"unknown slot or race group {name!r}")
    slots = []
    for member in members:
        spec = desired.slot(member)
        slots.append(
            {
                "name": member,
                "declared": _spec_view(spec.workload if spec else None),
                "workload": rows.get(member),
                "instance": instances.get(member),
            }
        )
    program = _program(desired, snap, name)
    return {
        "schema_version": views.SCHEMA,
        "name": name,
        "slots": slots,
        **({"program": program} if program is not None else {}),
        "snapshot": {
            "available": snap is not None,
            "generated_at": snap.generated_at if snap is not None else None,
        },
    }


def _program(desired: Desired, snap: StatusSnapshot | None, name: str) -> dict[str, Any] | None:
    """A race group's one program (``workload.across: group``, state under the group's name):
    declared, observed, and the virtual node it runs on; None for anything else."""
    group = next((g for g in desired.race_groups if g.name == name), None)
    if group is None or group.workload is None or desired.slot(name) is not None:
        return None
    row = next((g for g in (snap.race_groups if snap else ()) if g.name == name), None)
    return {
        "declared": _spec_view(group.workload),
        "workload": encode(row.workload) if row and row.workload else None,
        "instance": row.instance if row else None,
    }


def live(store: IntentEditor, name: str) -> bool:
    """The snapshot shows a program that may be running for ``name`` (or a candidate)."""
    try:
        desired: Desired | None = store.parse(store.read().decode("utf-8", "replace"))
    except Exception:  # an invalid file: judge by the snapshot alone
        desired = None
    snap = views.read_snapshot(store)
    rows = snap.by_name() if snap is not None else {}
    for group in snap.race_groups if snap is not None else ():  # an across group's program
        if group.name == name and group.workload and group.workload.state in LIVE_STATES:
            return True
    for member in _members(desired, name):
        row = rows.get(member)
        if row is not None and row.workload is not None and row.workload.state in LIVE_STATES:
            return True
    return False
