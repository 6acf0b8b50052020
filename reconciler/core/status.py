"""The status snapshot (``tpu-reconciler.status.v1``), built from values.

One snapshot answers "what do I hold right now?": every slot's desired and observed state,
unmanaged requests, races, the pending plan, tmux windows. The controller writes it after every
pass (``status.json``, through ``adapters/status_file``); ``status --live`` builds it from a
fresh observation. The values are ``model/status``'s dataclasses; the schema is documented in
``docs/status-snapshot.md`` and ``docs/json.md``. Pure: times are arguments.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any

from reconciler.core import flex, node_health
from reconciler.core import latency as lat
from reconciler.core import workload as wl
from reconciler.core.across import views as across_views
from reconciler.core.capacity import ExpectedWait, WaitHints, waiting_hints
from reconciler.core.ends_status import with_ends
from reconciler.core.memory import Memory
from reconciler.core.plan import Action, Plan
from reconciler.core.quota import slot_states as quota_slot_states
from reconciler.core.quota import statuses as quota_statuses
from reconciler.core.render import (
    action_note,
    format_workload,
    one_line,
    plan_summary,
    restart_note,
)
from reconciler.core.telemetry import chips_status, tpu_figure
from reconciler.core.workload_backoff import restart_wait
from reconciler.core.workload_memory import WorkloadMemory
from reconciler.model.capacity import CapacityRequest
from reconciler.model.desired import Desired, SlotSpec, WorkloadSpec
from reconciler.model.multislice import slice_rows
from reconciler.model.observed import Node, Observation
from reconciler.model.status import (
    STATUS_SCHEMA,
    ActionStatus,
    BlockedActionStatus,
    DeferredActionStatus,
    DesiredInfo,
    ExpectedWaitStatus,
    GuardStatus,
    HeldActionStatus,
    MaintenanceStatus,
    PlanStatus,
    RaceGroupStatus,
    SetupStatus,
    SlotStatus,
    StatusSnapshot,
    SymptomStatus,
    TmuxInventoryStatus,
    TmuxStatus,
    WorkerStatus,
    WorkloadStatus,
    encode,
)
from reconciler.model.times import utc_text

__all__ = [
    "STATUS_SCHEMA",
    "build_status",
    "iso",
    "plan_dict",
    "plan_status",
    "workload_status",
]

_SETUP_STEPS = ("bootstrap", "tailscale", "tmux")
_STEP_KEYS = (*_SETUP_STEPS, "launch", "stop")  # the memory keys of a slot's non-cloud actions


def iso(ts: float | None) -> str | None:
    return None if ts is None else utc_text(ts)


def _action_fields(action: Action) -> dict[str, Any]:
    return {
        "symbol": action.symbol,
        "kind": action.kind.value,
        "slot": action.slot,
        "zone": action.zone,
        "reason": one_line(action.reason),
        "destructive": action.destructive,
        "note": action_note(action),
    }


def plan_status(plan: Plan) -> PlanStatus:
    return PlanStatus(
        summary=plan_summary(plan),
        actions=tuple(ActionStatus(**_action_fields(a)) for a in plan.actions),
        deferred=tuple(
            DeferredActionStatus(
                **_action_fields(h.action), why=one_line(h.why), until=iso(h.until)
            )
            for h in plan.deferred
        ),
        blocked=tuple(
            BlockedActionStatus(**_action_fields(h.action), why=one_line(h.why))
            for h in plan.blocked
        ),
        warnings=tuple(one_line(w) for w in plan.warnings),
        ended=tuple(one_line(e) for e in plan.ended),
        **_control_fields(plan),
    )


def _control_fields(plan: Plan) -> dict[str, Any]:
    """What the gates hold back (``core/plan_gates``): the gated actions (JSON ``held``), the
    guard, suspended."""
    guard = plan.guard
    return {
        "held": tuple(
            HeldActionStatus(**_action_fields(h.action), why=one_line(h.why), rule=h.gate)
            for h in plan.gated
        ),
        "guard": None
        if guard is None
        else GuardStatus(
            limit=guard.limit,
            deletes=guard.deletes,
            slots=tuple(h.action.slot for h in plan.gated if h.gate == "guard"),
            fingerprint=guard.fingerprint,
            command=guard.command,
        ),
        "suspended": plan.suspended,
    }


def plan_dict(plan: Plan) -> dict[str, Any]:
    """The plan as JSON (``plan --json`` and the snapshot's ``plan``)."""
    return encode(plan_status(plan))


def _no_plan(desired: Desired | None) -> PlanStatus:
    return PlanStatus(
        summary=(
            "No plan yet: waiting for a successful observation."
            if desired is not None
            else "No valid desired state: nothing will be created or deleted."
        )
    )


def _setup_state(
    memory: Memory,
    slot: str,
    kind: str,
    enabled: bool,
    instance: str | None,
    generation: int,
    error: str | None,
) -> str:
    if not enabled:
        return "off"
    if instance is None:
        return "waiting"
    if memory.setup_done(slot, kind, instance, generation):
        return "done"
    return "failed" if error else "pending"


def _setup_status(memory: Memory, spec: SlotSpec, instance: str | None) -> SetupStatus:
    """Each step's state; ``detail`` is the first failing step's message (on one line) and,
    below it, the failing worker's log when the message does not already hold it."""
    errors = {k: memory.error(f"{spec.zone}/{spec.name}:{k}") for k in _SETUP_STEPS}
    failing = next((e for e in errors.values() if e is not None), None)
    detail = one_line(failing.message) if failing else None
    log = failing.detail.strip() if failing else ""
    if detail is not None and log and one_line(log) not in detail:
        detail = f"{detail}\n{log}"

    def step(kind: str, enabled: bool) -> str:
        error = detail if errors[kind] else None
        return _setup_state(
            memory, spec.name, kind, enabled, instance, spec.setup.generation, error
        )

    return SetupStatus(
        bootstrap=step("bootstrap", spec.setup.bootstrap),
        tailscale=step("tailscale", spec.setup.tailscale),
        generation=spec.setup.generation,
        detail=detail,
    )


def _request_fields(request: CapacityRequest, observed: Observation) -> dict[str, Any]:
    """What the cloud says about one request and its node."""
    node = observed.node_of(request)
    return {
        "state": request.api_state,
        "request": request.state.value,
        "node_state": node.state.value if node else None,
        "health": node.health if node else None,
        "ips": tuple(node.ips()) if node else (),
        "create_time": request.create_time,
        "labelled": request.managed,
        **_signal_fields(request, node),
        **({"slices": slice_rows(node)} if node is not None and node.slices else {}),
    }


def _signal_fields(request: CapacityRequest, node: Node | None) -> dict[str, Any]:
    """A flex-start run's end and the node's health signals (``core/node_health``)."""
    out: dict[str, Any] = {"ends_at": request.termination_time}
    if node is None:
        return out
    m = node.maintenance
    return out | {
        "symptoms": tuple(
            SymptomStatus(x.kind, x.worker, x.details, x.create_time) for x in node.symptoms
        ),
        "maintenance": None
        if m is None
        else MaintenanceStatus(
            kind=m.kind,
            status=m.status,
            window_start=m.window_start,
            window_end=m.window_end,
            can_reschedule=m.can_reschedule,
        ),
        "health_note": node_health.note(node),
    }


def _last_error(
    memory: Memory, spec: SlotSpec, request: CapacityRequest | None, instance: str | None
) -> str | None:
    """The slot's most pressing failure, on one line: the cloud action's, else the cloud's
    word on the request, else, while it has a node, the first failing setup step's or workload
    action's (named; without a node they wait, as ``setup`` says)."""
    cloud_error = memory.error(f"{spec.zone}/{spec.name}:cloud")
    if cloud_error:
        return one_line(cloud_error.message)
    if request is not None and request.error and request.error.message:
        return f"code {request.error.code}: {one_line(request.error.message)}"
    for step in _STEP_KEYS if instance is not None else ():
        error = memory.error(f"{spec.zone}/{spec.name}:{step}")
        if error:
            return f"{step} failed: {one_line(error.message)}"
    wm = memory.workload(spec.name)
    return wm.left if wm is not None and wm.left and instance is not None else None


def _managed_row(
    spec: SlotSpec,
    desired: Desired,
    observed: Observation,
    memory: Memory,
    want: str | None,
    windows: Collection[str],
    now: float,
    releases_at: float | None = None,
) -> SlotStatus:
    request = observed.request(spec.zone, spec.name)
    if request is not None:
        seen = _request_fields(request, observed)
    else:
        seen = {"state": "NOT_QUEUED" if observed.knows(spec.zone) else "UNKNOWN"}
    node = observed.node(spec.zone, (request.node_name if request else None) or spec.name)
    instance = node.instance if node is not None and request is not None else None
    target = f"tpu-{desired.zone_code(spec.zone)}:{spec.name}"
    mem = memory.slot(spec.name)
    return SlotStatus(
        name=spec.name,
        zone=spec.zone,
        accelerator=spec.accelerator or (request.accelerator if request else None),
        mode=spec.mode or (request.mode if request else None),
        want=want,
        managed=True,
        race_group=spec.race_group,
        **seen,
        state_since=iso(mem.state_since) if mem.state == seen["state"] else None,
        last_error=_last_error(memory, spec, request, instance),
        setup=_setup_status(memory, spec, instance),
        tmux=TmuxStatus(target=target if spec.setup.tmux else None, open=target in windows),
        instance=instance,
        paused=spec.hold.paused,
        releases_at=iso(releases_at),
        workload=workload_status(memory.workload(spec.name), spec.workload, now),
        owner=spec.owner,
        expired=flex.expired(spec, request, now),
        api=spec.api,
    )


def workload_summary(wm: WorkloadMemory | None, w: WorkloadSpec | None, now: float) -> str:
    """One status cell: ``running 2h13m · attempt 3 · 1/3 failures``, ``gave-up (exit 1 on
    worker 2)``."""
    state = wl.state_of(wm)
    if wm is None:
        return state
    running_for = now - wm.since if state == "running" else None
    max_failures = w.max_failures if w is not None else None
    detail = _workload_detail(wm, left=False)
    note = restart_note(restart_wait(wm, now))
    cell = format_workload(state, running_for, wm.attempt, wm.failures, max_failures, detail, note)
    tpu = tpu_figure(wm)
    return f"{cell} · {tpu}" if tpu else cell


def _workload_detail(wm: WorkloadMemory, *, left: bool = True) -> str:
    """``left``: with the processes that outlived the stop (the status cell leaves them to
    NOTE, which shows them as the slot's last error)."""
    detail = f"not started: {wm.unsent}" if wm.phase == "starting" and wm.unsent else wm.detail
    if wm.left and left:  # processes that outlived the stop: they hold back the next attempt
        return f"{detail}; {wm.left}" if detail else wm.left
    return detail


def workload_status(
    wm: WorkloadMemory | None, w: WorkloadSpec | None, now: float
) -> WorkloadStatus | None:
    """``slots[].workload`` of the status snapshot (docs/json.md); None: no workload."""
    if wm is None and w is None:
        return None
    return WorkloadStatus(
        state=wl.state_of(wm),
        run_id=wm.run_id if wm else None,
        attempt=wm.attempt if wm else 0,
        failures=wm.failures if wm else 0,
        max_failures=w.max_failures if w else None,
        since=iso(wm.since) if wm is not None else None,
        workers=tuple(
            WorkerStatus(index=s.index, state=s.state, exit_code=s.exit_code, chips=chips_status(s))
            for s in (wm.workers if wm else ())
        ),
        last_lines=wm.last_lines if wm else (),
        detail=_workload_detail(wm) if wm else "",
        summary=workload_summary(wm, w, now),
        tpu=tpu_figure(wm),
        restart_at=iso(wm.not_before) if wm and restart_wait(wm, now) is not None else None,
    )


def _unmanaged_row(request: CapacityRequest, observed: Observation) -> SlotStatus:
    return SlotStatus(
        name=request.name,
        zone=request.zone,
        accelerator=request.accelerator,
        mode=request.mode,
        managed=False,
        **_request_fields(request, observed),
        api=request.api,
    )


def _slots(
    desired: Desired | None,
    observed: Observation,
    memory: Memory,
    plan: Plan | None,
    windows: Collection[str],
    now: float,
) -> tuple[SlotStatus, ...]:
    """Managed slots in file order, then the unmanaged requests the plan found."""
    decided = plan.decided_want if plan else {}
    at = plan.releases_at if plan else {}
    rows = (
        [
            _managed_row(
                spec,
                desired,
                observed,
                memory,
                decided.get(spec.name, spec.want),
                windows,
                now,
                at.get(spec.name),
            )
            for spec in desired.slots
        ]
        if desired
        else []
    )
    rows += [_unmanaged_row(request, observed) for request in (plan.unmanaged if plan else ())]
    return tuple(rows)


def _with_waits(
    rows: tuple[SlotStatus, ...], waits: Sequence[ExpectedWait]
) -> tuple[SlotStatus, ...]:
    by_slot = {w.slot: w.hint for w in waits}
    return tuple(
        replace(
            row,
            expected_wait=ExpectedWaitStatus(
                p50_seconds=round(by_slot[row.name].p50_seconds, 1),
                samples=by_slot[row.name].samples,
            ),
        )
        if row.name in by_slot and row.managed
        else row
        for row in rows
    )


def _with_latency(
    rows: tuple[SlotStatus, ...], by_zone: dict[str, float]
) -> tuple[SlotStatus, ...]:
    """Each row gets its zone's round trip (also a row not held there); none where nothing
    is held in the zone or it is not measured yet."""
    if not by_zone:
        return rows
    return tuple(
        replace(row, latency_ms=by_zone[row.zone])
        if row.zone is not None and row.zone in by_zone
        else row
        for row in rows
    )


def _with_quota(
    rows: tuple[SlotStatus, ...], desired: Desired | None, plan: Plan | None, memory: Memory
) -> tuple[SlotStatus, ...]:
    """Each slot whose create waits for quota, or was refused for it, says so."""
    quotas = desired.quotas if desired is not None else ()
    by_slot = quota_slot_states(quotas, plan.gated, plan.blocked, memory) if plan else {}
    if not by_slot:
        return rows
    return tuple(
        replace(row, quota=by_slot[row.name]) if row.managed and row.name in by_slot else row
        for row in rows
    )


def _race_groups(
    desired: Desired | None, plan: Plan | None, memory: Memory, now: float, observed: Observation
) -> tuple[RaceGroupStatus, ...]:
    paused = {g.name for g in desired.race_groups if g.paused} if desired else set()
    across = {g.name: g.workload for g in desired.race_groups if g.workload} if desired else {}
    views = across_views(desired, observed, memory) if desired else ()
    nodes = {v.spec.name: v.node for v in views if v.node}
    return tuple(
        RaceGroupStatus(
            name=r.name,
            count=r.count,
            winners=tuple(r.winners),
            candidates=tuple(r.candidates),
            open=r.open,
            paused=r.name in paused,
            workload=workload_status(memory.workload(r.name), across[r.name], now)
            if r.name in across
            else None,
            instance=nodes[r.name].instance if r.name in nodes else None,
            ips=nodes[r.name].ips() if r.name in nodes else (),
        )
        for r in (plan.races if plan else ())
    )


def build_status(
    *,
    desired: Desired | None,
    desired_file: str,
    errors: Sequence[str],
    observation: Observation | None,
    observed_at: float | None,
    memory: Memory,
    plan: Plan | None,
    now: float,
    backend: str,
    tmux_windows: Collection[str] = (),
    tmux_orphans: Collection[str] = (),
    observe_error: str | None = None,
    wait_hints: WaitHints | None = None,
) -> StatusSnapshot:
    """The whole snapshot; ``controller`` says "not running": writers and readers fill it in
    from the lock. ``wait_hints``: the capacity history's figures per place (a value the
    caller computed from the store), shown on the slots that wait for capacity."""
    observed = observation or Observation(zones=frozenset())
    windows = frozenset(tmux_windows)
    slots = _slots(desired, observed, memory, plan, windows, now)
    if wait_hints and desired is not None:
        slots = _with_waits(slots, waiting_hints(desired, observed, wait_hints))
    slots = _with_latency(slots, lat.zone_values(desired, observed, memory.latency))
    slots = _with_quota(slots, desired, plan, memory)
    slots = with_ends(slots, desired, observed, memory, now)  # at_boot, before_end, maintenance
    return StatusSnapshot(
        generated_at=iso(now),
        backend=backend,
        desired=DesiredInfo(
            file=desired_file,
            valid=not errors,
            errors=tuple(errors),
            digest=desired.digest if desired else None,
        ),
        observed_at=iso(observed_at),
        observe_error=one_line(observe_error) if observe_error else observe_error,
        unreachable_zones=tuple(sorted(observed.unreachable)),
        slots=slots,
        race_groups=_race_groups(desired, plan, memory, now, observed),
        plan=plan_status(plan) if plan else _no_plan(desired),
        tmux=TmuxInventoryStatus(
            windows=tuple(sorted(windows)), orphans=tuple(sorted(tmux_orphans))
        ),
        suspended=plan.suspended if plan else bool(desired and desired.settings.suspend),
        quotas=quota_statuses(desired, observed, plan.gated if plan else ()),
    )
