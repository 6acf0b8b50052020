"""What the lab's timeline knows of each slot, from the status snapshot and the desired file:
the chips it counts and where (``Need``), when they stop counting (``end_of``), and the
estimate's inputs (``estimates``: the holders, the waiting creates, the limits and the lab's
fair order for ``core.timeline_estimate``).

The snapshot says what the controller last saw (states, use under each limit, who waits on
which quota, scheduled releases, flex-start ends); the file says what is not in it (holds in
time, flex-start runs, members' caps and priorities, file order). Without the file the
snapshot alone is used: owners, no caps, no priorities, no holds of a waiting slot.

May: compute. May not: do I/O, read a clock (``as_of`` is given), or draw.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from reconciler.core import quota_share as share
from reconciler.core import timeline_estimate as est
from reconciler.core.capacity import Place, WaitHint
from reconciler.core.history import StateOf
from reconciler.errors import UnsafeName
from reconciler.model import flex
from reconciler.model.accelerators import TPU_API
from reconciler.model.desired import Desired, QuotaSpec, SlotSpec
from reconciler.model.multislice import chips as chips_of
from reconciler.model.multislice import place_accelerator
from reconciler.model.names import accelerator_family
from reconciler.model.quotas import quota_mode
from reconciler.model.stamps import epoch_or_none
from reconciler.model.status import SlotStatus, StatusSnapshot

FLEX_END: Final = "flex-start run ends"
RELEASING: Final = "being released"
#: a slot's ``quota.state`` when its create waits
WAITING_STATES: Final = ("waiting", "refused", "never-fits")


def run_seconds(spec: SlotSpec | None) -> float | None:
    """How long a slot holds once ACTIVE: its ``hold_for``, else a flex-start run's length."""
    if spec is None:
        return None
    return spec.hold.hold_for_seconds or (spec.max_run_seconds if spec.mode == flex.MODE else None)


def need_of(row: SlotStatus, spec: SlotSpec | None) -> est.Need | None:
    accelerator = spec.accelerator if spec is not None else row.accelerator
    if not accelerator or not row.zone:
        return None
    slices = spec.slices if spec is not None else max(1, len(row.slices))
    try:
        family, n = accelerator_family(accelerator), chips_of(accelerator, slices)
    except UnsafeName:
        return None
    api = spec.api if spec is not None else row.api or TPU_API
    return est.Need(row.name, family, quota_mode(row.mode), row.zone, n, api)


def counted(row: SlotStatus) -> bool:
    """The cloud counts this row's request now (it exists, whatever its state)."""
    if row.state in (None, "NOT_QUEUED"):
        return False
    return row.state != "UNKNOWN" or row.create_time is not None


def snapshot_limits(snapshot: StatusSnapshot) -> list[est.Limit]:
    return [
        est.Limit(
            QuotaSpec(
                q.family, q.mode, q.scope, q.place, q.chips, q.source, q.quota_id, q.api or TPU_API
            ),
            q.used,
        )
        for q in snapshot.quotas
    ]


def _refused_limit(row: SlotStatus, need: est.Need) -> QuotaSpec | None:
    """The limit the cloud named when it refused ``row``'s create for quota."""
    q = row.quota
    if q is None or q.limit is None or not q.place:
        return None
    scope = "zone" if q.place == need.zone else "region"
    return QuotaSpec(need.family, need.mode, scope, q.place, q.limit, "cloud", q.quota_id, need.api)


def end_of(row: SlotStatus, spec: SlotSpec | None) -> tuple[float | None, str | None]:
    """The row's scheduled end and its reason: its release, else a flex-start run's end."""
    release = epoch_or_none(row.releases_at)
    run_end = epoch_or_none(row.ends_at)
    if release is not None and (run_end is None or release <= run_end):
        until = spec.hold.hold_until if spec is not None else None
        return release, "hold_until" if until is not None and until == release else "hold_for"
    if run_end is not None:
        return run_end, FLEX_END
    return None, None


@dataclass(frozen=True, slots=True)
class Facts:
    snapshot: StatusSnapshot
    desired: Desired | None
    hints: Mapping[Place, WaitHint]
    as_of: float
    state_of: StateOf  # a request's neutral state from its API's word

    def spec(self, name: str) -> SlotSpec | None:
        return self.desired.slot(name) if self.desired is not None else None

    def hint(self, row: SlotStatus) -> WaitHint | None:
        spec = self.spec(row.name)
        if row.zone and row.accelerator and row.mode:
            slices = spec.slices if spec is not None else max(1, len(row.slices))
            place = place_accelerator(row.accelerator, slices)
            found = self.hints.get((row.zone, place, row.mode, row.api or TPU_API))
            if found is not None:
                return found
        w = row.expected_wait
        return WaitHint(w.p50_seconds, w.samples) if w and w.p50_seconds is not None else None

    def lab(self) -> share.Lab | None:
        rows = self.snapshot.slots
        members = self.desired.members if self.desired is not None else ()
        if not members and not any(r.owner for r in rows):
            return None
        return share.Lab(
            owners={r.name: r.owner for r in rows},
            priority={m.name: m.priority for m in members},
            caps={m.name: m.chips for m in members},
        )


def estimates(facts: Facts) -> tuple[dict[str, est.Estimate], list[str]]:
    """The estimate of every slot waiting on a quota or a cap (and of flex-start runs that
    renew), and notes on what it rests on."""
    snap = facts.snapshot
    if snap.observed_at is None:
        return {}, ["no observation yet: the chips in use are not known, so nothing is estimated"]
    limits = snapshot_limits(snap)
    named: list[QuotaSpec] = []  # limits only a refusal names
    holders: list[est.Holder] = []
    waiters: list[est.Waiter] = []
    guarded = {h.slot for h in snap.plan.held if h.rule == "guard"} if snap.plan else set()
    for row in snap.slots:
        spec = facts.spec(row.name)
        need = need_of(row, spec)
        if need is None:
            continue
        index = spec.order if spec is not None else len(snap.slots)
        hint = facts.hint(row)
        wait = hint.p50_seconds if hint else 0.0
        if counted(row):
            frozen = snap.suspended or row.name in guarded
            holders.append(_holder(row, spec, need, index, wait, frozen, facts.as_of))
            continue
        if not row.managed or row.quota is None or row.quota.state not in WAITING_STATES:
            continue
        refused = _refused_limit(row, need) if row.quota.state != "waiting" else None
        if refused is not None and not any(
            need.under(s) for s in [*named, *(lim.spec for lim in limits)]
        ):
            named.append(refused)
        blocked = None
        if snap.suspended:
            blocked = "the controller is suspended (`tpu-reconciler resume` lets it act)"
        elif row.paused:
            blocked = "paused (paused: true): nothing is done for it"
        hold = spec.hold if spec is not None else None
        waiters.append(
            est.Waiter(
                need,
                index,
                wait=wait,
                run=run_seconds(spec),
                until=hold.hold_until if hold else None,
                start_at=hold.start_at if hold else None,
                start_after=hold.start_after_seconds if hold else None,
                blocked=blocked,
            )
        )
    for spec_ in named:
        used = sum(h.need.chips for h in holders if h.need.under(spec_))
        limits.append(est.Limit(spec_, used))
    return est.estimate(limits, holders, waiters, facts.lab(), facts.as_of), []


def _holder(
    row: SlotStatus,
    spec: SlotSpec | None,
    need: est.Need,
    index: int,
    wait: float,
    frozen: bool,
    as_of: float,
) -> est.Holder:
    """What the estimate needs of a request the cloud counts: when its chips stop counting."""
    if not row.managed or frozen or row.paused:  # nothing the controller will end
        return est.Holder(need, index=index)
    if row.want == "released":
        return est.Holder(need, as_of, RELEASING, index=index)
    ends, why = end_of(row, spec)
    if why == FLEX_END:
        if spec is not None and spec.renew:
            run = run_seconds(spec)
            return est.Holder(need, ends, why, renews=True, index=index, wait=wait, run=run)
        return est.Holder(need, None, "flex-start run over, counted until released", index=index)
    return est.Holder(need, ends, why or "", index=index)
