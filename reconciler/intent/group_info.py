"""A race group as ``info GROUP`` shows it, and the group program a candidate belongs to.

A race group whose workload says ``across: group`` runs one program over its winners
(``core/across.py``) whose state lives under the group's name, not under any slot's:
``group_info`` is the ``slot_info`` document (``kind: race_group``) for such a name (and for
any race group's name: its count, candidates and winners), ``format_group_info`` its text,
and ``candidate_program`` the short note a candidate's own ``info`` carries so that the
program is found from either side. Reads only the parsed desired state and the snapshot.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from reconciler.model.desired import Desired, RaceGroupSpec, SlotSpec
from reconciler.model.status import RaceGroupStatus, StatusSnapshot, encode


def _row(snap: StatusSnapshot | None, name: str) -> RaceGroupStatus | None:
    return next((g for g in (snap.race_groups if snap else ()) if g.name == name), None)


def _spec(desired: Desired | None, name: str) -> RaceGroupSpec | None:
    return next((g for g in (desired.race_groups if desired else ()) if g.name == name), None)


def group_info(
    desired: Desired | None, snap: StatusSnapshot | None, name: str
) -> dict[str, Any] | None:
    """``name``'s race group as a document, or None when no race group has that name."""
    spec, row = _spec(desired, name), _row(snap, name)
    if spec is None and row is None:
        return None
    across = (
        spec.workload is not None if spec is not None else row is not None and bool(row.workload)
    )
    doc: dict[str, Any] = {
        "kind": "race_group",
        "name": name,
        "count": spec.count if spec is not None else row.count if row else 0,
        "candidates": list(spec.slots if spec is not None else row.candidates if row else ()),
        "winners": list(row.winners) if row else [],
        "open": row.open if row else None,
        "paused": spec.paused if spec is not None else bool(row and row.paused),
        "across": across,
    }
    if not across and (each := _each_winner(desired, snap, spec, doc["winners"])):
        doc["each_winner"] = each
    if across:
        doc["min_count"] = spec.min_count if spec is not None else None
        doc["program"] = {
            "workload": encode(row.workload) if row and row.workload else None,
            "instance": row.instance if row else None,
            "ips": list(row.ips) if row else [],
            "logs": f"tpu-reconciler logs {name}",
        }
    return doc


def _command_text(command: str | tuple[str, ...]) -> str:
    return command if isinstance(command, str) else shlex.join(command)


def _each_winner(
    desired: Desired | None,
    snap: StatusSnapshot | None,
    spec: RaceGroupSpec | None,
    winners: list[str],
) -> dict[str, Any] | None:
    """Without ``across: group``, the group's ``workload:`` runs on each winner as that slot's
    own: the command (when every candidate runs the same one) and each winner's state."""
    if spec is None or desired is None:
        return None
    specs = [desired.slot(c) for c in spec.slots]
    loads = [s.workload for s in specs if s is not None and s.workload is not None]
    if not loads:
        return None
    same = len({w.identity for w in loads}) == 1 and len(loads) == len(specs)
    rows = {s.name: s for s in (snap.slots if snap else ())}
    states = {}
    for name in winners:
        wl = rows[name].workload if name in rows else None
        states[name] = (wl.summary or wl.state) if wl is not None else "pending"
    return {
        "command": _command_text(loads[0].command) if same else None,
        "winners": states,
    }


def format_group_info(doc: Mapping[str, Any]) -> str:
    """``group_info``'s document for a person (the ``info`` verb and the TUI's info pane)."""
    winners = doc.get("winners") or []
    lines = [
        f"{doc.get('name')}  race group  count {doc.get('count')}"
        + ("  (paused)" if doc.get("paused") else ""),
        f"candidates: {', '.join(doc.get('candidates') or []) or '-'}",
        f"winners: {', '.join(winners) if winners else 'none yet'}",
    ]
    program = doc.get("program")
    each = doc.get("each_winner")
    if not isinstance(program, dict) and isinstance(each, dict):
        command = each.get("command")
        lines.append(
            f"program: {command} on each winner, as its own (the group's workload)"
            if command
            else "program: each winner runs its own slot's workload"
        )
        for name, state in (each.get("winners") or {}).items():
            lines.append(f"  {name}: {state}  (logs {name})")
        return "\n".join(lines)
    if not isinstance(program, dict):
        lines.append("program: none (each winner runs its own slot's workload, if any)")
        return "\n".join(lines)
    wl = program.get("workload") or {}
    minimum = doc.get("min_count")
    lines.append(
        "program (workload.across: group): "
        + (wl.get("summary") or wl.get("state") or "pending")
        + (f", starts on {minimum} winners" if minimum else "")
    )
    if wl.get("run_id"):
        lines.append(f"  run {wl['run_id']}, attempt {wl.get('attempt')}")
    if wl.get("detail"):
        lines.append(f"  {wl['detail']}")
    ips = program.get("ips") or []
    lines.append(
        "  workers: " + ("  ".join(f"w{i} {ip}" for i, ip in enumerate(ips)) if ips else "none yet")
    )
    lines.append(f"  instance {program.get('instance') or '-'}")
    lines.append(f"  output: {program.get('logs')}")
    return "\n".join(lines)


def candidate_program(
    desired: Desired | None, snap: StatusSnapshot | None, spec: SlotSpec | None
) -> dict[str, Any] | None:
    """For a candidate of a group running one program across its winners: the group, that
    program's state cell and where to read more; None for any other slot."""
    group = _spec(desired, spec.race_group) if spec is not None and spec.race_group else None
    if group is None or group.workload is None:
        return None
    row = _row(snap, group.name)
    wl = row.workload if row else None
    return {
        "group": group.name,
        "summary": (wl.summary or wl.state) if wl else "pending",
        "winner": bool(row and spec is not None and spec.name in row.winners),
        "see": f"info {group.name}, logs {group.name}",
    }


def program_lines(doc: Mapping[str, Any]) -> list[str]:
    """The line a candidate's ``info`` gets for its group's program (none for other slots)."""
    prog = doc.get("group_program")
    if not isinstance(prog, dict):
        return []
    return [f"group program ({prog.get('group')}): {prog.get('summary')}  see {prog.get('see')}"]


def group_hint(snap: StatusSnapshot | None, name: str) -> str:
    """After "not a slot": what to use instead when ``name`` is a race group ("" otherwise)."""
    row = _row(snap, name)
    if row is None:
        return ""
    pick = f"one of its winners ({', '.join(row.winners)})" if row.winners else "a winner"
    return f"; {name!r} is a race group: use {pick}, or info {name} / logs {name}"
