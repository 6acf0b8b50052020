"""What one screen of the TUI shows, as values: read from the controller's snapshot and the file.

``load_frame`` joins the controller's status snapshot (``status.json``), the desired file's
validity (the controller's own ``parse_desired``, through the ``IntentEditor``), whether a
controller holds the lock, and the event log's tail into one ``Frame``. The widgets render a
``Frame`` and nothing else; the clock and the controller probe are arguments, so a screen is
reproducible (snapshot tests, benchmarks).

Light on purpose: the first frame needs only the snapshot (``intent.status_view``, the typed
``model.status``), so the intent engine and the desired-state model (a second of imports and
parsing at 1,000 slots) load on a thread after it.

May: read status.json, desired.yaml, events.jsonl and probe the controller lock.
May not: import textual, write anything, construct a cloud client, SSH or run tmux.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from reconciler.errors import StatusUnreadable
from reconciler.intent.status_view import StateDir, read_snapshot, restart_words, terminal_safe
from reconciler.model.durations import format_duration
from reconciler.model.stamps import epoch_or_none
from reconciler.model.status import (
    ActionStatus,
    PlanStatus,
    SetupStatus,
    SlotStatus,
    StatusSnapshot,
    TmuxStatus,
)
from reconciler.model.vocabulary import MODE_SHORT

if TYPE_CHECKING:
    from reconciler.intent.engine import IntentEditor
    from reconciler.model.desired import Desired

#: Slot states with a TPU that is, or is about to be, running (releasing one deletes it).
RUNNING: Final = frozenset({"ACTIVE", "PROVISIONING", "SUSPENDING", "SUSPENDED"})
EVENTS_SHOWN: Final = 200

Holder = Callable[[StateDir], int | None]


_ts = epoch_or_none


def _text(value: Any, default: str = "") -> str:
    """Snapshot text made safe for a terminal: control characters escaped."""
    if value is None:
        return default
    return terminal_safe(str(value))


@dataclass(frozen=True, slots=True)
class SlotRow:
    """One slot as the table and the info pane show it."""

    name: str
    zone: str = ""
    accelerator: str = ""
    mode: str = ""
    want: str = ""
    state: str = "UNKNOWN"
    since: float | None = None
    node: str = ""
    ips: tuple[str, ...] = ()
    instance: str | None = None
    setup: Mapping[str, str] = field(default_factory=dict)
    setup_detail: str | None = None
    workload: str = ""
    tmux_target: str | None = None
    tmux_open: bool = False
    race_group: str | None = None
    managed: bool = True
    generated: bool = False
    create_time: str | None = None
    last_error: str | None = None
    latency_ms: float | None = None  # round trip to the slot's zone, when something is held there
    owner: str | None = None  # the Unix user who holds it (desired.yaml ``owner:``)
    restart_at: float | None = None  # the workload's relaunch waits (restart backoff) until then
    ends_at: float | None = None  # a flex-start run's end (its ``terminationTime``)
    #: its create waits for quota ("quota 16/16"), the cloud refused it ("quota refused") or
    #: it can never fit ("never fits 32>16")
    quota: str = ""

    @property
    def running(self) -> bool:
        return self.state in RUNNING

    def want_cell(self) -> str:
        """What the slot wants, as every view says it: a race member's group decides for it
        (``race:GROUP``), a slot of its own says ``held`` / ``released``."""
        if self.race_group:
            return f"race:{self.race_group}"
        return self.want or ("-" if self.managed else "unmanaged")

    def setup_cell(self) -> str:
        """The worst state among the enabled setup steps; ``-`` when none is on."""
        on = [v for k, v in self.setup.items() if k in ("bootstrap", "tailscale") and v != "off"]
        for state in ("failed", "running", "pending", "waiting", "done"):
            if state in on:
                return state
        return "-"

    def state_cell(self, now: float) -> str:
        """The state; a running flex-start run adds the time it has left (``ACTIVE 5h12m
        left``)."""
        if self.ends_at is not None and self.state == "ACTIVE" and self.ends_at > now:
            return f"{self.state} {format_duration(self.ends_at - now)} left"
        if self.quota:  # nothing queued yet, and why (status's NOTE; the info pane says all)
            if self.state in ("NOT_QUEUED", "UNKNOWN"):
                return self.quota.upper()
            return f"{self.state} · {self.quota}"
        return self.state

    def tmux_cell(self) -> str:
        if self.tmux_open:
            return "open"
        return "closed" if self.tmux_target else "-"

    def cells(self, now: float) -> tuple[str, ...]:
        """The table's cells, in ``COLUMNS`` order."""
        return (
            self.name,
            self.zone,
            format_latency(self.latency_ms),
            self.accelerator,
            MODE_SHORT.get(self.mode, self.mode),
            self.want_cell(),
            self.state_cell(now),
            format_duration(now - self.since) if self.since is not None else "",
            self.node or "-",
            str(len(self.ips)) if self.ips else "-",
            self.setup_cell(),
            _with_note(self.workload, self.restart_at, now) or "-",
            self.tmux_cell(),
        )


COLUMNS: Final = (
    ("slot", "slot"),
    ("zone", "zone"),
    ("lat", "latency"),
    ("accel", "accelerator"),
    ("mode", "mode"),
    ("want", "want"),
    ("state", "state"),
    ("for", "for"),
    ("node", "node"),
    ("wk", "workers"),
    ("setup", "setup"),
    ("workload", "workload"),
    ("tmux", "tmux"),
)


#: Columns a narrow table leaves out, first to last, until the rest fit: the slot's name
#: carries mode and accelerator, and the info pane shows everything. Slot, zone, want and
#: state are always shown.
DROP_ORDER: Final = (
    "mode",
    "node",
    "accelerator",
    "tmux",
    "workers",
    "latency",
    "setup",
    "workload",
    "for",
)
#: Long states shortened in a narrow table (the info pane says them in full).
NARROW_STATES: Final = {"WAITING_FOR_RESOURCES": "WAITING"}


def format_latency(ms: float | None) -> str:
    """``~140ms`` (``~1.2s`` from a second on); ``-`` when nothing is held in the zone."""
    if ms is None or ms != ms or ms < 0:
        return "-"
    if ms >= 1000:
        return f"~{ms / 1000:.1f}s"
    return f"~{ms:.0f}ms"


def fit_columns(widths: Sequence[int], room: int) -> tuple[int, ...]:
    """Which columns (indexes into ``COLUMNS``) to show in ``room`` cells, given each
    column's widest cell: all of them when they fit, else without the ``DROP_ORDER``
    columns, one at a time, until the rest fit (each column takes its width + 2)."""
    shown = list(range(len(COLUMNS)))
    keys = [key for _, key in COLUMNS]
    for key in DROP_ORDER:
        if sum(widths[i] + 2 for i in shown) <= room:
            break
        shown.remove(keys.index(key))
    return tuple(shown)


@dataclass(frozen=True, slots=True)
class RaceRow:
    name: str
    count: int
    winners: tuple[str, ...]
    candidates: tuple[str, ...]
    program: str = ""  # workload.across: group: its one program's state cell ("" for none)

    def text(self) -> str:
        won = ", ".join(self.winners) if self.winners else "none yet"
        ran = f", program {self.program}" if self.program else ""
        return f"{self.name} {len(self.winners)}/{self.count} won: {won}{ran}"


@dataclass(frozen=True, slots=True)
class Frame:
    """Everything on screen, at one instant ``now``."""

    file: str
    now: float
    valid: bool
    errors: tuple[str, ...] = ()
    checked: bool = True  # False: the file was not parsed yet (the first frame of a big one)
    controller_pid: int | None = None
    snapshot_present: bool = False
    snapshot_error: str | None = None
    backend: str | None = None
    observed_at: float | None = None
    observe_error: str | None = None
    slots: tuple[SlotRow, ...] = ()
    races: tuple[RaceRow, ...] = ()
    plan: tuple[str, ...] = ()
    events: tuple[str, ...] = ()
    desired: Desired | None = None

    @property
    def running(self) -> bool:
        return self.controller_pid is not None

    def slot(self, name: str | None) -> SlotRow | None:
        return next((s for s in self.slots if s.name == name), None)

    def header(self) -> str:
        valid = "file valid" if self.valid else "FILE INVALID"
        if not self.checked:
            valid = "file: checking"
        ctl = f"controller pid {self.controller_pid}" if self.running else "NO CONTROLLER"
        if self.observed_at is None:
            seen = "never observed"
        else:
            seen = f"observed {format_duration(self.now - self.observed_at)} ago"
        backend = self.backend or "-"
        count = len(self.slots)
        return f"{valid} · {ctl} · {backend} · {seen} · {count} slot{'' if count == 1 else 's'}"

    def banner(self, command: str) -> str | None:
        """Why the screen cannot be trusted, and what to do; None when all is well."""
        lines: list[str] = []
        if not self.valid:
            lines.append(f"{self.file} is invalid; nothing changes until it is fixed:")
            lines.extend(f"  {e}" for e in self.errors[:6])
            if len(self.errors) > 6:
                lines.append(f"  ... and {len(self.errors) - 6} more")
        if not self.running:
            lines.append(f"No controller is running. Start it with:  {command}")
        if self.snapshot_error:
            lines.append(self.snapshot_error)
        return "\n".join(lines) if lines else None


def _workload_cell(workload: Any) -> str:
    """``running``, or ``running a2`` from the second attempt on; empty without a workload.
    With chip telemetry, the least busy worker's duty cycle follows: ``running · TPU 97%``."""
    state = _text(getattr(workload, "state", None))
    attempt = getattr(workload, "attempt", 0)
    cell = f"{state} a{attempt}" if state and isinstance(attempt, int) and attempt > 1 else state
    tpu = _text(getattr(workload, "tpu", None))
    return f"{cell} · {tpu.split(' · ')[0]}" if cell and tpu else cell


def _slices_cell(slot: SlotStatus) -> str:
    """`` 1/2 slices`` (READY of all) on a multislice slot's NODE cell; empty otherwise."""
    if not slot.slices:
        return ""
    ready = sum(s.state == "READY" for s in slot.slices)
    return f" {ready}/{len(slot.slices)} slices"


def _with_note(cell: str, restart_at: float | None, now: float) -> str:
    """The workload cell, and ``restarting in 40s`` while a relaunch waits out its backoff."""
    wait = restart_at - now if restart_at is not None and restart_at > now else None
    return " · ".join(part for part in (cell, restart_words(wait)) if part)


def _slot_row(slot: SlotStatus, desired: Desired | None) -> SlotRow:
    setup = slot.setup or SetupStatus()
    tmux = slot.tmux or TmuxStatus()
    spec = desired.slot(slot.name) if desired is not None else None
    workload = getattr(slot, "workload", None)  # added by the workload feature, when present
    health = slot.health
    sick = f"/{_text(health)}" if health and health != "HEALTHY" else ""
    sick += " !" if slot.symptoms or slot.maintenance else ""  # the info pane says what
    return SlotRow(
        name=_text(slot.name),
        zone=_text(slot.zone),
        accelerator=_text(slot.accelerator),
        mode=_text(slot.mode),
        want=_text(slot.want),
        state="expired" if slot.expired else _text(slot.state, "UNKNOWN"),
        since=_ts(slot.state_since),
        node=_text(slot.node_state) + sick + _slices_cell(slot),
        ips=tuple(_text(ip) for ip in slot.ips),
        instance=_text(slot.instance) or None,
        setup={k: _text(getattr(setup, k), "off") for k in ("bootstrap", "tailscale")},
        setup_detail=_text(setup.detail) or None,
        workload=_workload_cell(workload),
        restart_at=_ts(getattr(workload, "restart_at", None)),
        tmux_target=_text(tmux.target) or None,
        tmux_open=tmux.open,
        race_group=_text(slot.race_group) or None,
        managed=slot.managed is not False,
        generated=bool(spec.generated) if spec is not None else False,
        create_time=_text(slot.create_time) or None,
        last_error=_text(slot.last_error) or None,
        latency_ms=slot.latency_ms,
        owner=(spec.owner if spec is not None else None) or slot.owner,
        ends_at=_ts(slot.ends_at),
        quota=_quota_cell(slot),
    )


def _quota_cell(slot: SlotStatus) -> str:
    """``quota 16/16`` (the chips counted and the limit) while its create waits for quota,
    ``quota refused`` after the cloud refused it for quota, ``never fits 32>16`` when it
    asks for more than the limit allows at all; "" otherwise."""
    quota = slot.quota
    if quota is None or quota.state not in ("waiting", "refused", "never-fits"):
        return ""
    if quota.state == "never-fits":
        numbers = re.search(r"needs (\d+), (?:limit|\S+ cap) (\d+)", quota.message)
        return f"never fits {numbers.group(1)}>{numbers.group(2)}" if numbers else "never fits"
    if quota.state == "refused":
        return "quota refused"
    numbers = re.search(r"\b\d+/\d+\b", quota.message)
    return f"quota {numbers.group(0)}" if numbers else "quota wait"


def _desired_only(desired: Desired) -> list[SlotRow]:
    return [
        SlotRow(
            name=s.name,
            zone=s.zone,
            accelerator=s.accelerator,
            mode=s.mode,
            want=s.want or "",
            race_group=s.race_group,
            generated=s.generated,
            owner=s.owner,
        )
        for s in desired.slots
    ]


def _action(a: ActionStatus) -> str:
    return f"{_text(a.symbol)} {_text(a.kind)} {_text(a.slot)}"


def plan_lines(plan: PlanStatus | None) -> tuple[str, ...]:
    """The snapshot's plan as Terraform-style lines (``+`` create, ``-`` delete, ``~`` set up)."""
    if plan is None:
        return ("No plan yet.",)
    lines = [
        f"{_action(a)} ({_text(a.zone)}): {_text(a.reason)}"
        + ("  [destructive]" if a.destructive else "")
        + (f"  [{_text(a.note)}]" if _text(a.note) else "")
        for a in plan.actions
    ]
    lines += [f"  deferred: {_action(d)}: {_text(d.why)}" for d in plan.deferred]
    lines += [f"  blocked: {_action(b)}: {_text(b.why)}" for b in plan.blocked]
    lines += [f"  waiting: {_action(h)}: {_text(h.why)}" for h in plan.held if h.rule == "quota"]
    lines += [f"  warning: {_text(w)}" for w in plan.warnings]
    lines += [f"  expired: {_text(e)}" for e in plan.ended]
    lines.append(_text(plan.summary, "No changes.") or "No changes.")
    return tuple(lines)


Parsed = tuple["Desired | None", tuple[str, ...]]


def parse_file(editor: IntentEditor) -> Parsed:
    """desired.yaml through the controller's own parser: the value, or its diagnostics."""
    from reconciler.errors import InvalidDesiredState, ReconcilerError

    try:
        return editor.parse(editor.read().decode("utf-8", "replace")), ()
    except InvalidDesiredState as e:
        return None, tuple(str(d) for d in e.diagnostics) or (str(e),)
    except ReconcilerError as e:
        return None, (str(e),)


def event_lines(editor: IntentEditor, limit: int = EVENTS_SHOWN) -> tuple[str, ...]:
    """The event log's tail, one line each as ``tpu-reconciler events`` prints them."""
    from reconciler.intent.event_text import format_event
    from reconciler.intent.views import events

    records: Sequence[Mapping[str, Any]] = events(editor, limit).get("events") or []
    width = max((len(str(r.get("slot") or "-")) for r in records), default=0)
    return tuple(format_event(r, width) for r in records)


def _verdict(path: Path, snap: StatusSnapshot | None) -> tuple[bool, tuple[str, ...]]:
    """The controller's verdict on the file, when its snapshot is of these very bytes."""
    if snap is None:
        return False, ()
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return False, ()
    if snap.desired.digest == digest:
        return snap.desired.valid, tuple(_text(e) for e in snap.desired.errors)
    return False, ()


def load_frame(
    file: Path,
    state: StateDir,
    *,
    now: float,
    holder: Holder,
    parsed: Parsed | None = None,
    events: tuple[str, ...] = (),
) -> Frame:
    """One frame: the snapshot, the controller, and (when given) the parsed file and the
    events' tail. Never raises for a missing or unreadable snapshot: the frame says so.
    Without ``parsed`` (the first frame: a 1,000-slot file takes the YAML parser a second)
    the file's validity is the controller's verdict when its snapshot is of the same bytes,
    else not known yet."""
    snapshot_error = None
    try:
        snap = read_snapshot(state.status)
    except StatusUnreadable as e:
        snap, snapshot_error = None, str(e)
    path = file.expanduser().resolve()
    if parsed is not None:
        desired, errors = parsed
        valid, checked = desired is not None, True
    else:
        desired = None
        valid, errors = _verdict(path, snap)
        checked = valid or bool(errors)
        valid = valid or not checked
    if snap is not None:
        rows = [_slot_row(r, desired) for r in snap.slots]
        races = tuple(
            RaceRow(
                name=_text(g.name),
                count=g.count,
                winners=tuple(_text(w) for w in g.winners),
                candidates=tuple(_text(c) for c in g.candidates),
                program=(_text(g.workload.summary) or _text(g.workload.state))
                if g.workload
                else "",
            )
            for g in snap.race_groups
        )
        plan = plan_lines(snap.plan)
    else:
        rows = _desired_only(desired) if desired is not None else []
        races = tuple(
            RaceRow(g.name, g.count, (), tuple(g.slots))
            for g in (desired.race_groups if desired else ())
        )
        plan = ("No status snapshot yet: the controller has not run a pass.",)
    return Frame(
        file=str(file),
        now=now,
        valid=valid,
        errors=errors,
        checked=checked,
        controller_pid=holder(state),
        snapshot_present=snap is not None,
        snapshot_error=snapshot_error,
        backend=_text(snap.backend) if snap else None,
        observed_at=_ts(snap.observed_at) if snap else None,
        observe_error=(_text(snap.observe_error) or None) if snap else None,
        slots=tuple(rows),
        races=races,
        plan=plan,
        events=events,
        desired=desired,
    )


def tilde(text: str) -> str:
    """Paths under the home directory shown as ``~/...`` (shorter; the same on every machine).
    Display only: what ``s`` copies keeps the absolute paths."""
    home = str(Path.home())
    return text.replace(home + "/", "~/") if home not in ("", "/") else text
