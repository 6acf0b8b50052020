"""Text for humans: plans (Terraform style) and status tables. ``format_*`` return strings;
only the CLI prints them. Pure: the current time is an argument.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from reconciler.model.durations import format_duration
from reconciler.model.times import local_text

if TYPE_CHECKING:  # `status` only formats a document: it must not pay for the model
    from reconciler.core.plan import Plan


def format_plan(plan: Plan, *, now: float | None = None) -> str:
    from reconciler.core.status import plan_summary

    lines: list[str] = []
    width = max((len(a.symbol) for a in plan.actions), default=1)
    name_w = max((len(a.slot) for a in plan.actions), default=0)
    for a in plan.actions:
        flag = "  [destructive]" if a.destructive else ""
        lines.append(
            f"  {a.symbol:>{width}} {a.kind.value:<9} {a.slot:<{name_w}}  {a.zone:<16} "
            f"{a.reason}{flag}"
        )
    if lines:
        lines.insert(0, "tpu-reconciler will perform these actions:")
        lines.append("")
    for h in plan.deferred:
        when = ""
        if h.until is not None and now is not None:
            when = f" (in {format_duration(h.until - now)})"
        lines.append(f"  deferred {h.action.kind.value} {h.action.slot}: {h.why}{when}")
    for h in plan.blocked:
        lines.append(f"  blocked  {h.action.kind.value} {h.action.slot}: {h.why}")
    lines += _control_lines(plan, now)
    for w in plan.warnings:
        lines.append(f"  warning: {w}")
    if plan.unmanaged:
        names = ", ".join(f"{q.name} ({q.zone}, {q.state.value})" for q in plan.unmanaged)
        lines.append(f"  unmanaged (not in the file; left alone): {names}")
    notes = (plan.deferred, plan.blocked, plan.warnings, plan.unmanaged, plan.held)
    if any(notes) or plan.releases_at:
        lines.append("")
    lines.append(plan_summary(plan))
    if plan.suspended:
        lines.insert(0, SUSPENDED_BANNER)
    return "\n".join(lines) + "\n"


SUSPENDED_BANNER: Final = (
    "SUSPENDED: the controller observes and plans, and takes no action "
    "(`tpu-reconciler resume`)."
)


def _control_lines(plan: Plan, now: float | None) -> list[str]:
    """Held actions (paused, guarded, suspended) and upcoming releases."""
    lines = []
    for h in plan.held:
        if h.rule == "paused":
            lines.append(f"  paused   {h.action.kind.value} {h.action.slot}")
        elif h.rule == "suspended":
            lines.append(f"  held     {h.action.kind.value} {h.action.slot} (suspended)")
    guarded = [h for h in plan.held if h.rule == "guard"]
    if guarded and plan.guard is not None:
        names = ", ".join(h.action.slot for h in guarded)
        lines.append(f"  guarded  delete {names}: {plan.guard.why}")
    for slot, at in sorted(plan.releases_at.items()):
        when = f"in {format_duration(at - now)}" if now is not None and at > now else "now"
        lines.append(f"  {slot} releases {when} (at {local_text(at)})")
    return lines


def age(stamp: str | None, now: float) -> str:
    """How long ago an ISO-8601 ``stamp`` was, compactly (``3m``); empty when unknown."""
    if not stamp:
        return ""
    try:
        ts = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return ""
    return format_duration(now - ts)


_COLUMNS = ("SLOT", "ZONE", "ACCEL", "WANT", "STATE", "FOR", "NODE", "IPS", "RACE", "NOTE")


def _note(row: dict[str, Any], now: float) -> str:
    if not row.get("managed"):
        return "unmanaged (not in file)"
    control = _control_note(row, now)
    if control:
        return control
    if row.get("last_error"):
        return str(row["last_error"])[:60]
    setup = row.get("setup") or {}
    parts = [
        f"{k} {v}"
        for k, v in setup.items()
        if k in ("bootstrap", "tailscale") and v not in ("off", "done", "waiting")
    ]
    return ", ".join(parts)


def _control_note(row: dict[str, Any], now: float) -> str:
    parts = ["paused"] if row.get("paused") else []
    at = row.get("releases_at")
    if at:
        try:
            ts = datetime.fromisoformat(str(at).replace("Z", "+00:00")).timestamp()
        except ValueError:
            ts = None
        if ts is not None:
            when = f"in {format_duration(ts - now)}" if ts > now else "now"
            parts.append(f"releases {when} ({local_text(ts)[11:16]})")
    return ", ".join(parts)


def status_rows(doc: dict[str, Any], now: float) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for s in doc.get("slots", []):
        ips = s.get("ips") or []
        ip_text = ips[0] + (f" +{len(ips) - 1}" if len(ips) > 1 else "") if ips else ""
        rows.append(
            (
                str(s.get("name", "")),
                str(s.get("zone", "")),
                str(s.get("accelerator") or ""),
                str(s.get("want") or "-"),
                str(s.get("state", "")),
                age(s.get("state_since"), now),
                str(s.get("node_state") or ""),
                ip_text,
                str(s.get("race_group") or ""),
                _note(s, now),
            )
        )
    return rows


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)
    ]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(out)


def format_status(doc: dict[str, Any], now: float) -> str:
    ctl = doc.get("controller") or {}
    desired = doc.get("desired") or {}
    head = [
        f"desired: {desired.get('file')} "
        + ("(valid)" if desired.get("valid") else "(INVALID — last valid intent in force)"),
        "controller: "
        + (f"running (pid {ctl.get('pid')})" if ctl.get("running") else "not running"),
        f"snapshot: {age(doc.get('generated_at'), now) or '?'} old, observed "
        f"{age(doc.get('observed_at'), now) + ' ago' if doc.get('observed_at') else 'never'}"
        f" via {doc.get('backend')}",
    ]
    if doc.get("suspended"):
        head.insert(0, SUSPENDED_BANNER)
    for err in desired.get("errors") or []:
        head.append(f"  {err}")
    if doc.get("note"):
        head.append(str(doc["note"]))
    if doc.get("observe_error"):
        head.append(f"last observation failed: {doc['observe_error']}")
    if doc.get("unreachable_zones"):
        head.append(f"unreachable zones: {', '.join(doc['unreachable_zones'])}")
    rows = status_rows(doc, now)
    body = format_table(_COLUMNS, rows) if rows else "no slots"
    tail = []
    for race in doc.get("race_groups") or []:
        winners = ", ".join(race["winners"]) or "none yet"
        tail.append(f"race {race['name']}: {len(race['winners'])}/{race['count']} won ({winners})")
    orphans = (doc.get("tmux") or {}).get("orphans") or []
    if orphans:
        tail.append(f"tmux orphans (slot not ACTIVE; left open): {', '.join(orphans)}")
    plan = doc.get("plan") or {}
    guard = plan.get("guard")
    if guard:
        tail.append(
            f"delete guard: {len(guard.get('deletes') or [])} deletes of ACTIVE TPUs wait "
            f"({', '.join(guard.get('slots') or [])}); confirm exactly these: "
            f"{guard.get('command')}"
        )
    if plan.get("summary"):
        tail.append(f"next: {plan['summary']}")
    return "\n".join([*head, "", body, *(["", *tail] if tail else [])]) + "\n"
