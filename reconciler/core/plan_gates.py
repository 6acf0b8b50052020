"""The gates, applied to a plan the planner made (``core/plan.py``): a paused slot's actions,
creates past a quota or a member's cap (``core/quota``), deletes (and replaces of a reshaped
running TPU) the delete guard holds until confirmed, everything while suspended; and when each
held slot's timed hold releases it. Each gated action is kept with why (``Withheld``, its
``gate`` named), so plan and status show it; a notice announcing an action that does not go
(``Notice.announces``) is not sent.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from reconciler.core import control
from reconciler.core.memory import Memory
from reconciler.core.plan_values import Action, Kind, Plan, Withheld
from reconciler.core.quota import gate
from reconciler.core.quota_share import lab as quota_lab
from reconciler.model.desired import NO_HOLD, Desired
from reconciler.model.observed import Observation


def apply_gates(
    plan: Plan, desired: Desired, observed: Observation, memory: Memory, confirmed: Collection[str]
) -> Plan:
    """Gate what must wait (see ``core.control``): paused slots, creates past a quota, guarded
    deletes, everything while suspended; and say when held slots will be released."""
    paused = {s.name for s in desired.slots if s.hold is not NO_HOLD and s.hold.paused}
    paused |= {g.name for g in desired.race_groups if g.paused and g.workload}  # its program
    gated: list[Withheld] = []
    actions: list[Action] = []
    for a in plan.actions:
        if a.slot in paused:
            gated.append(Withheld(a, control.PAUSED_WHY, gate="paused"))
        else:
            actions.append(a)
    lab = quota_lab(desired, observed)  # owners, caps and priority, when a lab shares it
    actions, waits = gate(desired.quotas, observed, actions, lab)  # creates past a limit
    gated += waits
    ids: dict[str, str] = {}
    for a in actions:
        if not a.destructive or not (a.kind == Kind.DELETE or a.reshape):
            continue
        if control.counts_for_guard(plan.releases.get(a.slot), memory):
            node = observed.node(a.zone, a.slot)
            ids[control.delete_id(a.zone, a.slot, node.instance if node else None)] = a.key
    guard = control.guard(ids, desired.settings.delete_guard, confirmed)
    if guard is not None:
        keys = {ids[i] for i in guard.deletes}
        gated += [Withheld(a, guard.why, gate="guard") for a in actions if a.key in keys]
        actions = [a for a in actions if a.key not in keys]
    suspended = desired.settings.suspend
    if suspended:
        gated += [Withheld(a, control.SUSPENDED_WHY, gate="suspended") for a in actions]
        actions = []
    timed = (s for s in desired.slots if s.hold is not NO_HOLD)
    at = {
        s.name: t
        for s in timed
        if plan.decided_want.get(s.name) == "held"
        and (t := control.releases_at(s, observed, memory)) is not None
    }
    going = {a.key for a in actions}
    return replace(
        plan,
        actions=tuple(actions),
        notices=tuple(n for n in plan.notices if n.announces is None or n.announces in going),
        gated=tuple(gated),
        suspended=suspended,
        guard=guard,
        releases_at=at,
    )
