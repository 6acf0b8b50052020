"""The status document (schema ``tpu-reconciler.status.v1``), built from values.

One document answers "what do I hold right now?": every slot's desired and observed state,
unmanaged QRs, races, the pending plan, tmux windows. The controller writes it after every
pass (``status.json``); ``status --live`` builds it from a fresh observation. The schema is
documented in ``docs/status-snapshot.md`` and ``docs/json.md``. Pure: times are arguments.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from reconciler.core.memory import Memory
from reconciler.core.plan import Action, Plan
from reconciler.model.desired import Desired
from reconciler.model.names import zone_code
from reconciler.model.observed import Observation, QueuedResource

STATUS_SCHEMA: Final = "tpu-reconciler.status.v1"


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def action_dict(action: Action) -> dict[str, Any]:
    return {
        "symbol": action.symbol,
        "kind": action.kind.value,
        "slot": action.slot,
        "zone": action.zone,
        "reason": action.reason,
        "destructive": action.destructive,
    }


def plan_summary(plan: Plan) -> str:
    if plan.suspended:
        return f"SUSPENDED: {len(plan.held)} action(s) held; nothing is done until resume."
    if plan.empty:
        return "No changes." + (" (some wait for confirmation)" if plan.guard else "")
    add, change, destroy = plan.counts()
    return f"Plan: {add} to add, {change} to change, {destroy} to destroy."


def plan_dict(plan: Plan) -> dict[str, Any]:
    return {
        "summary": plan_summary(plan),
        "actions": [action_dict(a) for a in plan.actions],
        "deferred": [
            {**action_dict(h.action), "why": h.why, "until": iso(h.until)} for h in plan.deferred
        ],
        "blocked": [{**action_dict(h.action), "why": h.why} for h in plan.blocked],
        "warnings": list(plan.warnings),
        **control_dict(plan),
    }


def control_dict(plan: Plan) -> dict[str, Any]:
    """What control holds back (``core.control``): held actions, the guard, suspended."""
    guard = plan.guard
    return {
        "held": [{**action_dict(h.action), "why": h.why, "rule": h.rule} for h in plan.held],
        "guard": None
        if guard is None
        else {
            "limit": guard.limit,
            "deletes": list(guard.deletes),
            "slots": [h.action.slot for h in plan.held if h.rule == "guard"],
            "fingerprint": guard.fingerprint,
            "command": guard.command,
        },
        "suspended": plan.suspended,
    }


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


def _qr_row(
    qr: QueuedResource,
    observed: Observation,
    want: str | None,
    managed: bool,
    race: str | None,
    mode: str | None,
    accelerator: str | None,
) -> dict[str, Any]:
    node = observed.node(qr.zone, qr.node_id or qr.name)
    return {
        "name": qr.name,
        "zone": qr.zone,
        "accelerator": accelerator or qr.accelerator_type,
        "mode": mode or qr.mode,
        "want": want,
        "managed": managed,
        "race_group": race,
        "state": qr.state.value,
        "node_state": node.state.value if node else None,
        "health": node.health if node else None,
        "ips": list(node.ips()) if node else [],
        "create_time": qr.create_time,
        "labelled": qr.managed,
    }


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
) -> dict[str, Any]:
    """The whole document except ``controller``, which readers fill in from the lock."""
    observed = observation or Observation(zones=frozenset())
    decided = plan.decided_want if plan else {}
    windows = set(tmux_windows)
    slots: list[dict[str, Any]] = []
    for spec in desired.slots if desired else ():
        qr = observed.qr(spec.zone, spec.name)
        want = decided.get(spec.name, spec.want)
        mem = memory.slot(spec.name)
        cloud_error = memory.error(f"{spec.zone}/{spec.name}:cloud")
        if qr is not None:
            row = _qr_row(qr, observed, want, True, spec.race_group, spec.mode, spec.accelerator)
        else:
            row = {
                "name": spec.name,
                "zone": spec.zone,
                "accelerator": spec.accelerator,
                "mode": spec.mode,
                "want": want,
                "managed": True,
                "race_group": spec.race_group,
                "state": "NOT_QUEUED" if observed.knows(spec.zone) else "UNKNOWN",
                "node_state": None,
                "health": None,
                "ips": [],
                "create_time": None,
                "labelled": None,
            }
        node = observed.node(spec.zone, (qr.node_id if qr else None) or spec.name)
        instance = node.instance if node is not None and qr is not None else None
        last_error = cloud_error.message if cloud_error else None
        if qr is not None and qr.error and qr.error.message and last_error is None:
            last_error = f"code {qr.error.code}: {qr.error.message}"
        setup_errors = {
            k: memory.error(f"{spec.zone}/{spec.name}:{k}")
            for k in ("bootstrap", "tailscale", "tmux")
        }
        failing = next((e for e in setup_errors.values() if e is not None), None)
        detail = failing.message if failing else None
        if failing and failing.detail:
            detail = f"{detail}\n{failing.detail}"
        target = f"tpu-{desired.zone_code(spec.zone) if desired else zone_code(spec.zone)}"
        target = f"{target}:{spec.name}"
        row.update(
            state_since=iso(mem.state_since) if mem.state == row["state"] else None,
            last_error=last_error,
            setup={
                "bootstrap": _setup_state(
                    memory,
                    spec.name,
                    "bootstrap",
                    spec.setup.bootstrap,
                    instance,
                    spec.setup.generation,
                    detail if setup_errors["bootstrap"] else None,
                ),
                "tailscale": _setup_state(
                    memory,
                    spec.name,
                    "tailscale",
                    spec.setup.tailscale,
                    instance,
                    spec.setup.generation,
                    detail if setup_errors["tailscale"] else None,
                ),
                "generation": spec.setup.generation,
                "detail": detail,
            },
            tmux={"target": target if spec.setup.tmux else None, "open": target in windows},
            instance=instance,
            paused=spec.hold.paused,
            releases_at=iso(plan.releases_at.get(spec.name)) if plan else None,
        )
        slots.append(row)
    unmanaged = plan.unmanaged if plan else ()
    for qr in unmanaged:
        slots.append(
            _qr_row(qr, observed, None, False, None, None, None)
            | {
                "state_since": None,
                "last_error": None,
                "setup": None,
                "tmux": None,
                "instance": None,
                "paused": False,
                "releases_at": None,
            }
        )
    return {
        "schema_version": STATUS_SCHEMA,
        "generated_at": iso(now),
        "controller": {"running": False, "pid": None},
        "backend": backend,
        "desired": {
            "file": desired_file,
            "valid": not errors,
            "errors": list(errors),
            "digest": desired.digest if desired else None,
        },
        "suspended": plan.suspended if plan else bool(desired and desired.settings.suspend),
        "observed_at": iso(observed_at),
        "observe_error": observe_error,
        "unreachable_zones": sorted(observed.unreachable),
        "slots": slots,
        "race_groups": [
            {
                "name": r.name,
                "count": r.count,
                "winners": list(r.winners),
                "candidates": list(r.candidates),
                "open": r.open,
            }
            for r in (plan.races if plan else ())
        ],
        "plan": plan_dict(plan)
        if plan
        else {
            "summary": (
                "No plan yet: waiting for a successful observation."
                if desired is not None
                else "No valid desired state: nothing will be created or deleted."
            ),
            "actions": [],
            "deferred": [],
            "blocked": [],
            "warnings": [],
        },
        "tmux": {"windows": sorted(windows), "orphans": sorted(tmux_orphans)},
    }
