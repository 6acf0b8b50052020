"""Text for humans: plans (Terraform style) and status tables. ``format_*`` return strings;
only the CLI prints them. The plan's own words (``plan_summary``, ``action_note``, ``one_line``)
live here too: ``core/status`` puts the same text in the snapshot, so it imports them from here,
never the other way round. Pure: the current time is an argument.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from reconciler.core.ends_text import before_end_note, boot_note
from reconciler.model.durations import format_duration
from reconciler.model.stamps import epoch

if TYPE_CHECKING:  # `status` only formats a snapshot: it must not pay for the plan model
    from reconciler.core.plan import Action, Plan
    from reconciler.model.status import RaceGroupStatus, SlotStatus, StatusSnapshot, WorkloadStatus


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines, tabs, other control characters that
    ``str.split`` knows) folded to one space: what a table cell, an event or a pane shows."""
    return " ".join(text.split())


def action_note(action: Action) -> str:
    """The warning shown beside an action (``plan``, ``--json``, the TUI), or ""."""
    if action.unlisted_zone and action.create is not None:
        return f"zone not known to offer {action.create.accelerator}"
    return ""


def plan_summary(plan: Plan) -> str:
    if plan.suspended:
        return f"SUSPENDED: {len(plan.gated)} action(s) held; nothing is done until resume."
    if plan.empty:
        return "No changes." + (" (some deletes wait for confirmation)" if plan.guard else "")
    add, change, destroy = plan.counts()
    return f"Plan: {add} to add, {change} to change, {destroy} to destroy."


def format_plan(plan: Plan, *, now: float | None = None) -> str:
    lines: list[str] = []
    width = max((len(a.symbol) for a in plan.actions), default=1)
    name_w = max((len(a.slot) for a in plan.actions), default=0)
    kind_w = max((len(a.kind.value) for a in plan.actions), default=0)
    kind_w = max(kind_w, 9)  # "before_end" is the one longer kind
    for a in plan.actions:
        flag = "  [destructive]" if a.destructive else ""
        if note := action_note(a):
            flag += f"  [{note}]"
        lines.append(
            f"  {a.symbol:>{width}} {a.kind.value:<{kind_w}} {a.slot:<{name_w}}  {a.zone:<16} "
            f"{a.reason}{flag}"
        )
    if lines:
        lines.insert(0, "tpu-reconciler will perform these actions:")
        lines.append("")
    for h in plan.deferred:
        when = ""
        if h.until is not None and now is not None:
            when = f" (in {format_duration(h.until - now)})"
        lines.append(f"  deferred {h.action.kind.value} {h.action.slot}: {one_line(h.why)}{when}")
    for h in plan.blocked:
        lines.append(f"  blocked  {h.action.kind.value} {h.action.slot}: {one_line(h.why)}")
    lines += _control_lines(plan, now)
    for w in plan.warnings:
        lines.append(f"  warning: {w}")
    lines += [f"  expired  {one_line(e)}" for e in plan.ended]
    if plan.unmanaged:
        names = ", ".join(f"{r.name} ({r.zone}, {r.api_state})" for r in plan.unmanaged)
        lines.append(f"  unmanaged (not in the file; left alone): {names}")
    notes = (plan.deferred, plan.blocked, plan.warnings, plan.unmanaged, plan.gated, plan.ended)
    if any(notes) or plan.releases_at:
        lines.append("")
    lines.append(plan_summary(plan))
    if plan.suspended:
        lines.insert(0, SUSPENDED_BANNER)
    return "\n".join(lines) + "\n"


SUSPENDED_BANNER: Final = (
    "SUSPENDED: the controller observes and plans, and takes no action (`tpu-reconciler resume`)."
)


def _control_lines(plan: Plan, now: float | None) -> list[str]:
    """Gated actions (paused, guarded, suspended, waiting on a quota) and upcoming releases."""
    lines = []
    for h in plan.gated:
        if h.gate == "paused":
            lines.append(f"  paused   {h.action.kind.value} {h.action.slot}")
        elif h.gate == "suspended":
            lines.append(f"  held     {h.action.kind.value} {h.action.slot} (suspended)")
        elif h.gate == "quota":
            lines.append(f"  waiting  {h.action.kind.value} {h.action.slot}: {h.why}")
    guarded = [h.action.slot for h in plan.gated if h.gate == "guard"]
    if guarded and plan.guard is not None:
        lines.append(f"  guarded  delete {', '.join(guarded)}: {plan.guard.why}")
    from reconciler.model.times import local_text  # datetime: not on `status`'s path

    for slot, at in sorted(plan.releases_at.items()):
        lines.append(f"  {slot} releases {_when(at, now)} (at {local_text(at)})")
    return lines


def _when(at: float, now: float | None) -> str:
    return f"in {format_duration(at - now)}" if now is not None and at > now else "now"


def age(stamp: str | None, now: float) -> str:
    """How long ago an ISO-8601 ``stamp`` was, compactly (``3m``); empty when unknown."""
    if not stamp:
        return ""
    try:
        ts = epoch(stamp)
    except ValueError:
        return ""
    return format_duration(now - ts)


_COLUMNS = (
    "SLOT",
    "ZONE",
    "LATENCY",
    "ACCEL",
    "WANT",
    "STATE",
    "FOR",
    "NODE",
    "IPS",
    "RACE",
    "NOTE",
)


def status_columns(snapshot: StatusSnapshot) -> tuple[str, ...]:
    """The names of ``status_rows``' cells, in order: a WORKLOAD cell comes before NOTE when
    any slot has a workload, an OWNER cell after SLOT when any slot has an owner."""
    if any(s.workload for s in snapshot.slots):
        return _owner_column(snapshot, (*_COLUMNS[:-1], "WORKLOAD", _COLUMNS[-1]))
    return _owner_column(snapshot, _COLUMNS)


def _owned(snapshot: StatusSnapshot) -> bool:
    return any(s.owner for s in snapshot.slots)


def _owner_column(snapshot: StatusSnapshot, columns: tuple[str, ...]) -> tuple[str, ...]:
    """``columns`` with OWNER after SLOT when a slot names an owner (a lab's table); without
    one the table is as it always was."""
    return (columns[0], "OWNER", *columns[1:]) if _owned(snapshot) else columns


def _owner_cells(snapshot: StatusSnapshot, rows: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Each row with its slot's owner (``-``: nobody's) after SLOT, as ``_owner_column``."""
    if not _owned(snapshot):
        return rows
    return [(row[0], s.owner or "-", *row[1:]) for row, s in zip(rows, snapshot.slots, strict=True)]


_QUIET: Final = frozenset(("off", "done", "waiting"))  # setup states the NOTE column leaves out
_NOTE_WIDTH: Final = 60  # an error longer than this is cut in NOTE and shown whole below


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def error_lines(snapshot: StatusSnapshot, now: float) -> list[str]:
    """The errors the NOTE column does not show whole (cut, or behind a pause), each once
    with the slots that have it: the cause must be readable without ``--json``."""
    by_text: dict[str, list[str]] = {}
    for s in snapshot.slots:
        if s.last_error and _note(s, now) != s.last_error:
            by_text.setdefault(str(s.last_error), []).append(s.name)
    return [f"last error of {', '.join(slots)}: {text}" for text, slots in by_text.items()]


def _note(row: SlotStatus, now: float) -> str:
    if not row.managed:
        return "unmanaged (not in file)"
    if row.paused or row.releases_at:
        control = _control_note(row, now)
        if control:
            return control
    if row.quota is not None and row.quota.state in ("waiting", "never-fits"):
        return row.quota.message
    if row.last_error:  # a run's end and the node's signals stay in sight (error below)
        return _cut(", ".join([*_run_notes(row, now), str(row.last_error)]), _NOTE_WIDTH)
    parts = []
    setup = row.setup
    if setup is not None:
        if setup.bootstrap not in _QUIET:
            parts.append(boot_note(setup) or f"bootstrap {setup.bootstrap}")
        if setup.tailscale not in _QUIET:
            parts.append(f"tailscale {setup.tailscale}")
    if row.slices:  # multislice: every slice's node state, slice 0 first
        parts.append(f"{len(row.slices)} slices " + "/".join(s.state or "?" for s in row.slices))
    wait = row.expected_wait
    if wait is not None and wait.p50_seconds is not None:
        parts.append(f"p50 {format_duration(wait.p50_seconds)} here, {wait.samples} samples")
    parts += _run_notes(row, now)
    return ", ".join(parts)


def _run_notes(row: SlotStatus, now: float) -> list[str]:
    """A flex-start run's end (``ends in 5h12m``, ``expired: ...``) and the node's health
    signals with what the user can do (``health_note``)."""
    out = []
    if row.expired:
        out.append("expired: flex-start run ended (renew: true, or release and hold, for more)")
    elif row.ends_at and row.active:
        with contextlib.suppress(ValueError):
            out.append(f"ends {_when(epoch(row.ends_at), now)}")
    if row.health_note:
        out.append(str(row.health_note))
    if (ends := before_end_note(row.before_end, now)) is not None:
        out.append(ends)
    return out


def _control_note(row: SlotStatus, now: float) -> str:
    """``paused``, ``releases in 3h12m (20:00)``: what the user asked of this slot's time."""
    parts = ["paused"] if row.paused else []
    if row.releases_at:
        from reconciler.model.times import local_text  # datetime, for the rows that need it

        try:
            ts: float | None = epoch(row.releases_at)
        except ValueError:
            ts = None
        if ts is not None:
            parts.append(f"releases {_when(ts, now)} ({local_text(ts)[11:16]})")
    return ", ".join(parts)


def format_latency(ms: float | None) -> str:
    """The LATENCY cell: ``~140ms``, ``<1ms``, or ``-`` when unknown or nothing is held."""
    if ms is None:
        return "-"
    return "<1ms" if ms < 1.0 else f"~{ms:.0f}ms"


def format_workload(
    state: str,
    running_for: float | None,
    attempt: int,
    failures: int,
    max_failures: int | None,
    detail: str = "",
    note: str = "",
) -> str:
    """One workload cell: ``running 2h13m · attempt 3 · 1/3 failures``,
    ``gave-up (exit 1 on worker 2)``; ``note`` last (``restarting in 40s``)."""
    if state == "not-started":
        return f"not started: {detail}" if detail else "not started"
    if state in ("gave-up", "failed", "released") and detail:
        return f"{state} ({detail})"
    head = f"{state} {format_duration(running_for)}" if running_for is not None else state
    parts = [head, f"attempt {attempt}"] if attempt else [head]
    if failures and max_failures is not None:
        parts.append(f"{failures}/{max_failures} failures")
    if note:
        parts.append(note)
    return " · ".join(parts)


def _workload(w: WorkloadStatus | None, now: float) -> str:
    if w is None:
        return ""
    running_for = None
    if w.state == "running" and w.since:
        with contextlib.suppress(ValueError):
            running_for = now - epoch(w.since)
    note = restart_note(_seconds_until(w.restart_at, now))
    cell = format_workload(
        w.state, running_for, w.attempt, w.failures, w.max_failures, w.detail, note
    )
    return f"{cell} · {w.tpu}" if w.tpu else cell


def restart_note(wait: float | None) -> str:
    """``restarting in 40s`` (rounded up) while a relaunch waits out its backoff, else ""."""
    return "" if wait is None else f"restarting in {format_duration(math.ceil(wait))}"


def _seconds_until(at: str | None, now: float) -> float | None:
    """Seconds from ``now`` to the ISO time ``at``; None when it is past, absent or unreadable."""
    if not at:
        return None
    try:
        left = epoch(at) - now
    except ValueError:
        return None
    return left if left > 0 else None


def status_rows(snapshot: StatusSnapshot, now: float) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    ages: dict[str | None, str] = {}  # rows share a few state_since stamps: parse each once
    workloads = any(s.workload for s in snapshot.slots)
    for s in snapshot.slots:
        ips = s.ips
        ip_text = ips[0] + (f" +{len(ips) - 1}" if len(ips) > 1 else "") if ips else ""
        since = ages.get(s.state_since)
        if since is None:
            since = ages[s.state_since] = age(s.state_since, now)
        row = (
            s.name,
            str(s.zone or ""),
            format_latency(s.latency_ms),
            str(s.accelerator or ""),
            str(s.want or "-"),
            "expired" if s.expired else str(s.state or ""),
            since,
            str(s.node_state or ""),
            ip_text,
            str(s.race_group or ""),
        )
        note = _note(s, now)
        rows.append((*row, _workload(s.workload, now), note) if workloads else (*row, note))
    return _owner_cells(snapshot, rows)


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns two spaces apart, trailing spaces cut (one ``%`` format per row:
    it parses its template faster than ``str.format``, ~40 % of the table at 1,000 rows)."""
    columns = zip(*rows, strict=True) if rows else ((),) * len(header)
    widths = [max(len(h), *map(len, c), 0) for h, c in zip(header, columns, strict=True)]
    line = "  ".join(f"%-{w}s" for w in widths)
    return "\n".join([(line % tuple(header)).rstrip(), *[(line % tuple(r)).rstrip() for r in rows]])


def _count(n: int, noun: str) -> str:
    """``1 delete``, ``3 deletes``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def race_line(race: RaceGroupStatus) -> str:
    winners = ", ".join(race.winners) or "none yet"
    line = f"race {race.name}: {len(race.winners)}/{race.count} won ({winners})"
    if race.workload is not None:  # workload.across: group: its one program (info GROUP)
        line += f"; program {race.workload.summary or race.workload.state}"
    return line


def snapshot_line(snapshot: StatusSnapshot, now: float) -> str:
    """``snapshot: 4s old, observed 5s ago via rest``; for a document made from desired.yaml
    alone (it has a ``note``: no controller wrote it) no age, which would be this moment's."""
    if snapshot.note:
        return f"snapshot: none, nothing observed (desired.yaml alone; backend {snapshot.backend})"
    observed = snapshot.observed_at
    return (
        f"snapshot: {age(snapshot.generated_at, now) or '?'} old, observed "
        f"{age(observed, now) + ' ago' if observed else 'never'} via {snapshot.backend}"
    )


def format_status(snapshot: StatusSnapshot, now: float) -> str:
    ctl = snapshot.controller
    desired = snapshot.desired
    head = [
        f"desired: {desired.file} "
        + (
            "(valid)"
            if desired.valid
            else "(INVALID — last valid intent in force)"
            if desired.digest is not None
            else "(INVALID — no valid intent yet: nothing acts)"
        ),
        "controller: " + (f"running (pid {ctl.pid})" if ctl.running else "not running"),
        snapshot_line(snapshot, now),
    ]
    if snapshot.suspended:
        head.insert(0, SUSPENDED_BANNER)
    for err in desired.errors:
        head.append(f"  {err}")
    if snapshot.note:
        head.append(str(snapshot.note))
    if snapshot.observe_error:
        head.append(f"last observation failed: {snapshot.observe_error}")
    if snapshot.unreachable_zones:
        head.append(f"unreachable zones: {', '.join(snapshot.unreachable_zones)}")
    if snapshot.history_error:
        head.append(f"capacity history not written: {snapshot.history_error}")
    rows = status_rows(snapshot, now)
    body = format_table(status_columns(snapshot), rows) if rows else "no slots"
    tail = [*error_lines(snapshot, now), *(race_line(race) for race in snapshot.race_groups)]
    orphans = snapshot.tmux.orphans
    if orphans:
        tail.append(f"tmux orphans (slot not ACTIVE; left open): {', '.join(orphans)}")
    guard = snapshot.plan.guard if snapshot.plan is not None else None
    if guard is not None:
        tail.append(
            f"delete guard: {_count(len(guard.deletes), 'delete')} of ACTIVE TPUs wait "
            f"({', '.join(guard.slots)}); confirm exactly these: {guard.command}"
        )
    if snapshot.plan is not None and snapshot.plan.summary:
        tail.append(f"next: {snapshot.plan.summary}")
    return "\n".join([*head, "", body, *(["", *tail] if tail else [])]) + "\n"
