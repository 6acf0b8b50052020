"""``plan(desired, observed, memory, now) -> Plan``: the whole decision, as a value.

Rules (each action carries a human reason; reasons are shown, never used to decide):

The world is capacity requests (``model/capacity``: a neutral ``RequestState``, whatever API
holds them) and the nodes they yield; the planner decides on the neutral state and shows the
API's own word (``api_state``) in reasons.

- ``want: held`` and no request → ``+ create``. A dead request (SUSPENDED: preempted; FAILED:
  capacity, expired window; ENDED) → ``-/+ replace``: delete now, create on a later pass once
  it is gone, with backoff after repeated deaths. ``want: released`` → ``- delete`` (force when
  a node exists); deleting an ACTIVE TPU is marked destructive. The create, delete and replace
  actions, and when a held request is replaced, are ``core/plan_requests.py``.
- A race group with ``count: N``: while fewer than N candidates are PROVISIONING or ACTIVE,
  every candidate without a request is queued (dead ones replaced). Once N have won, every
  other candidate's request is deleted. Winners are ranked deterministically: further along
  first (ACTIVE before PROVISIONING), then earliest created, then file order. A lost winner
  reopens the race.
- A request whose name is not in the file is *unmanaged*: reported, never touched, unless
  ``settings.prune`` is on and it carries our label.
- Nothing is created or deleted in a zone the observation could not see. A create in a zone
  ``model.tpu_zones`` does not know to offer the accelerator goes ahead (that table may be
  behind Google's) and carries ``unlisted_zone``, which ``plan`` shows next to it.
- A held request the file now describes otherwise — another ``api``, accelerator, slice
  count, machine type, topology or host count (``core.reshape``) — cannot change in place:
  ``-/+ replace``, the reason naming each change, destructive when it deletes a running TPU
  and counted by the delete guard like a delete (``Action.reshape``).
- On an ACTIVE request whose node is READY: setup steps (``~ bootstrap``, ``~ tailscale``) once
  per node instance and setup generation; ``~ tmux`` whenever the slot's window is missing
  from the tmux inventory; and notices.
- Workloads (``core.workload``): ``~ launch`` once the node is READY and set up for this
  instance and generation, ``~ stop`` when the attempt failed, the workload was removed or
  changed, or the slot was released; a workload that succeeded with ``when_done: release``
  releases its slot (a race group's: every candidate) through the normal delete path: it is
  one of ``core.control``'s release rules.
- A race group with ``workload.across: group`` (``core.across``): the same workload rules on
  one virtual slot named after the group whose node is its winners (set up, sorted by name);
  a lost winner interrupts it and ``~ stop`` ends it on the winners still up, once.
- An action whose key is backing off is *deferred*; one whose last permanent error happened
  under the same fingerprint (same intent, same world) is *blocked*. Both are reported. Once
  the fingerprint changed, the action is a new decision and goes ahead at once (a fixed typo
  does not wait out the backoff of the refusal), for ``UNBACKED_NEW_DECISIONS`` refusals in
  a row; after that the backoff paces it again.
- Control (``core.control``): a slot a release rule answers for (``hold_until`` reached,
  ``hold_for`` served, ``when_done: release`` met) is released; a create carries the slot's
  start (``start_at`` / ``start_after``). Then, in order, gates withhold actions in
  ``gated`` (``core/plan_gates.py``; reported like deferred ones):
  those of a ``paused`` slot; deletes of ACTIVE TPUs past ``settings.delete_guard`` not
  confirmed (``Plan.guard`` names the set); and every action while ``settings.suspend``.
- Quota (``core.quota``): a create that would pass a chip limit of ``Desired.quotas`` waits
  in ``gated`` (``gate="quota"``); a create the cloud refused for quota is blocked until the
  chips counted under that quota drop, a higher limit is known for it, or its intent changes.

The values it returns (``Plan``, ``Action``, ``Kind``, ...) are ``core/plan_values.py``.

No I/O, no clock (``now`` is an argument), no await.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Final

from reconciler.core import across, before_end, boot_setup, control, flex, node_health
from reconciler.core import workload as wl
from reconciler.core.memory import Memory
from reconciler.core.plan_gates import apply_gates
from reconciler.core.plan_requests import create_action, delete_action, replacement
from reconciler.core.plan_values import (
    CLOUD_KINDS,
    SETUP_KINDS,
    SYMBOL,
    UNBACKED_NEW_DECISIONS,
    WORKLOAD_KINDS,
    Action,
    Kind,
    Notice,
    Plan,
    RaceStatus,
    Withheld,
)
from reconciler.core.quota import GATE as QUOTA_GATE
from reconciler.core.quota import refusal_lifted, refused_text
from reconciler.model.capacity import (
    DEAD_STATES,
    MOVING_STATES,
    WON_STATES,
    CapacityRequest,
    RequestState,
)
from reconciler.model.desired import Desired, RaceGroupSpec, SlotSpec
from reconciler.model.observed import NodeState, Observation

#: The plan's values live in ``core.plan_values``; importers may take them from here.
__all__ = [
    "CLOUD_KINDS",
    "SETUP_KINDS",
    "SYMBOL",
    "UNBACKED_NEW_DECISIONS",
    "WORKLOAD_KINDS",
    "Action",
    "Kind",
    "Notice",
    "Plan",
    "RaceStatus",
    "Withheld",
    "in_motion",
    "plan",
]

_RANK: Final = {RequestState.ACTIVE: 0, RequestState.PROVISIONING: 1}
_EVENT_WORDS: Final = {
    "active": "is ACTIVE",
    "preempted": "was preempted",
    "failed": "failed",
    "released": "was released",
}


def _time_key(stamp: str | None) -> tuple[str, str]:
    """Sortable RFC 3339 (UTC, as the API writes it) with 0-9 fractional digits:
    ``2026-01-01T00:00:00Z`` < ``2026-01-01T00:00:00.5Z``. Unknown times sort last."""
    if not stamp:
        return ("~", "")
    head, _, rest = stamp.rstrip("Z").partition(".")
    return (head, rest.ljust(9, "0"))


class _Planner:
    def __init__(
        self,
        desired: Desired,
        observed: Observation,
        memory: Memory,
        now: float,
        windows: Collection[str] | None = None,
        probes: wl.Probes | None = None,
    ):
        self.desired, self.observed, self.memory, self.now = desired, observed, memory, now
        self.probes = probes
        self.windows = frozenset(windows) if windows is not None else None
        self.actions: list[Action] = []
        self.deferred: list[Withheld] = []
        self.blocked: list[Withheld] = []
        self.warnings: list[str] = []
        self.notices: list[Notice] = []
        self.ended: list[str] = []  # flex-start runs over: why nothing is planned for them
        self.decided: dict[str, str] = {}
        self.releases = control.release_reasons(desired, observed, memory, now)

    # -- gatekeeping ----------------------------------------------------------------------
    def propose(self, action: Action) -> None:
        if action.kind in CLOUD_KINDS and not self.observed.knows(action.zone):
            # Requests may be listed while the zone's nodes (or part of it) were not: a delete or
            # create decided on half a zone could be wrong, so it waits for a full look.
            self.warnings.append(
                f"{action.slot}: zone {action.zone} not fully observed; not acting"
            )
            return
        if not self.memory.errors:
            self.actions.append(action)
            return
        error = self.memory.error(action.key)
        refused = error is not None and error.permanent_fingerprint == action.fingerprint
        if refused and error is not None and error.quota is not None:
            if not refusal_lifted(error, action, self.observed, self.desired.quotas):
                self.blocked.append(Withheld(action, refused_text(error, action), gate=QUOTA_GATE))
                return
            self.actions.append(action)  # fewer chips under it, or a higher limit: new decision
        elif refused and error is not None:
            self.blocked.append(Withheld(action, f"permanent error: {error.message}"))
        elif (
            error is not None
            and error.permanent_fingerprint is not None
            and error.failures < UNBACKED_NEW_DECISIONS
        ):
            # A permanent error answered one fingerprint; the intent or the world behind this
            # action has changed since (a fixed typo, a moved request), so this is a new decision,
            # not a retry of the refused one: it waits for no backoff. Only a few times in a
            # row, though: a world that keeps flipping between states the cloud refuses would
            # otherwise get a request per flip; after that the backoff paces it again.
            self.actions.append(action)
        elif error is not None and error.not_before > self.now:
            self.deferred.append(
                Withheld(action, f"retrying after error: {error.message}", error.not_before)
            )
        else:
            self.actions.append(action)

    # -- per slot ---------------------------------------------------------------------------
    def hold(self, spec: SlotSpec, reason: str) -> None:
        request = self.observed.request(spec.zone, spec.name)
        if request is None:
            if not self.observed.knows(spec.zone):
                self.warnings.append(f"{spec.name}: zone {spec.zone} unreachable; not acting")
                return
            action = create_action(self.desired, spec, reason, self.now)
            not_before = self.memory.slot(spec.name).create_not_before
            if not_before > self.now:
                self.deferred.append(
                    Withheld(action, "re-queue backing off after repeated failures", not_before)
                )
            else:
                self.propose(action)
        elif flex.expired(spec, request, self.now) and not flex.renews(spec, request, self.now):
            self.ended.append(flex.why_idle(spec, request))
        elif (replaced := replacement(spec, request, self.observed, self.now)) is not None:
            self.propose(replaced)
        elif request.state == RequestState.UNKNOWN:
            self.warnings.append(
                f"{spec.name}: unknown {request.api_kind} state {request.raw_state!r}; not acting"
            )

    def release(self, spec: SlotSpec, reason: str) -> None:
        request = self.observed.request(spec.zone, spec.name)
        if request is not None and request.state != RequestState.DELETING:
            self.propose(delete_action(self.observed, request, reason, Kind.DELETE))

    def released(self, spec: SlotSpec) -> None:
        """A release rule answered for ``spec``: the ordinary delete, and a notice once."""
        rel = self.releases[spec.name]
        self.decided[spec.name] = "released"
        self.release(spec, rel.reason)
        request = self.observed.request(spec.zone, spec.name)
        if request is not None and request.state != RequestState.DELETING:
            instance = self.memory.slot(spec.name).active_instance or f"{spec.name}@{rel.due:.0f}"
            self.notice(spec, instance, "released", lambda: f"{rel.reason}; deleting it")

    def setup(self, spec: SlotSpec) -> None:
        request = self.observed.request(spec.zone, spec.name)
        if request is None or request.state != RequestState.ACTIVE:
            return
        node = self.observed.node_of(request)
        if node is None or node.state != NodeState.READY or not node.endpoints:
            return
        setup, instance = spec.setup, node.instance
        self.notice(spec, instance, "active", lambda: f"{spec.accelerator} in {spec.zone} is ready")
        steps = [(Kind.BOOTSTRAP, setup.bootstrap), (Kind.TAILSCALE, setup.tailscale)]
        for kind, wanted in steps:
            if not wanted:
                continue
            if self.memory.setup_done(spec.name, kind.value, instance, setup.generation):
                continue
            over_ssh = boot_setup.ssh_reason(kind, spec, node, self.memory, self.now)
            if over_ssh == "":
                break  # setup.at_boot: the node's boot script runs it; tailscale waits
            self.propose(
                Action(
                    kind,
                    spec.name,
                    spec.zone,
                    over_ssh or f"node {instance} generation {setup.generation} not set up",
                    instance=instance,
                    generation=setup.generation,
                    state="ACTIVE",
                )
            )
            break  # tailscale waits for bootstrap: scripts may install it
        if setup.tmux and self.window_missing(spec, instance):
            self.propose(
                Action(
                    Kind.TMUX,
                    spec.name,
                    spec.zone,
                    "open an SSH window",
                    instance=instance,
                    state="ACTIVE",
                )
            )

    def workload(self, spec: SlotSpec) -> None:
        wm = self.memory.workload(spec.name)
        if spec.workload is None and wm is None:
            return
        at = wl.where(self.observed, spec, wm.instance if wm else None)
        set_up = at.ready is not None and all(
            self.memory.setup_done(spec.name, kind.value, at.ready, spec.setup.generation)
            for kind, on in (
                (Kind.BOOTSTRAP, spec.setup.bootstrap),
                (Kind.TAILSCALE, spec.setup.tailscale),
            )
            if on
        )
        probes = self.probes.get(spec.name) if self.probes is not None else None
        held = self.decided.get(spec.name) == "held"
        d = wl.decide(spec, wm, held=held, at=at, set_up=set_up, probes=probes, now=self.now)
        request = self.observed.request(spec.zone, spec.name)
        for act, reason in d.acts:
            kind = Kind.LAUNCH if act.verb == "launch" else Kind.STOP
            act = flex.with_end(act, request)
            self.propose(
                Action(
                    kind,
                    spec.name,
                    spec.zone,
                    reason,
                    instance=at.ready,
                    generation=spec.workload.generation if spec.workload else 0,
                    state="ACTIVE",
                    workload=act,
                )
            )
        for n in d.notices:
            if n.key not in self.memory.notified:
                self.notices.append(Notice(n.key, spec.name, n.event, n.title, n.message))
        if d.warning:
            self.warnings.append(d.warning)

    def ends(self, spec: SlotSpec) -> None:
        """``before_end`` due now (``core/before_end``); a boot script's failure told."""
        for action, notice in before_end.decide(spec, self.observed, self.memory, self.now):
            self.propose(action)
            if notice.key not in self.memory.notified:
                self.notices.append(notice)  # sent only if the action goes (plan_gates)
        self.notices += boot_setup.notices(self.memory, spec, self.observed)

    def across(self, v: across.GroupView, view: Observation) -> None:
        """A race group's one program across its winners (``core/across.py``): the workload
        rules on its virtual slot, and the stop of a lost winner's program everywhere."""
        real, self.observed = self.observed, view
        self.decided[v.spec.name] = v.spec.want or "held"
        try:
            self.workload(v.spec)
        finally:
            self.observed = real
        stop = across.cleanup(v, self.memory.workload(v.spec.name))
        if stop is not None:
            act, reason = stop
            self.propose(
                Action(
                    Kind.STOP, v.spec.name, v.spec.zone, reason,
                    instance=v.node.instance if v.node else None, state="ACTIVE", workload=act,
                )
            )  # fmt: skip

    def window_missing(self, spec: SlotSpec, instance: str) -> bool:
        """Once per node instance (so a re-created node gets its dead window respawned), and
        level-triggered when the tmux inventory is known: a window closed by hand comes back,
        as the old tool's sync did."""
        if not self.memory.setup_done(spec.name, Kind.TMUX.value, instance, 0):
            return True
        if self.windows is not None:
            return f"tpu-{self.desired.zone_code(spec.zone)}:{spec.name}" not in self.windows
        return False

    def notice(self, spec: SlotSpec, instance: str, event: str, text: Callable[[], str]) -> None:
        key = f"{instance}:{event}"
        if key not in self.memory.notified:
            title = f"{spec.name} {_EVENT_WORDS[event]}"
            self.notices.append(Notice(key, spec.name, event, title, text()))

    def signal_notices(self, spec: SlotSpec) -> None:
        """Flex-start's run ending and ended, and the node's health signals: told, once
        each; none of them is by itself a reason to act."""
        request = self.observed.request(spec.zone, spec.name)
        node = self.observed.node_of(request) if request is not None else None
        found = flex.notices(spec, request, self.now)
        found += node_health.notices(spec.name, node, ())
        self.notices += [n for n in found if n.key not in self.memory.notified]

    def dead_notices(self, spec: SlotSpec) -> None:
        request = self.observed.request(spec.zone, spec.name)
        if (
            request is None
            or request.state not in DEAD_STATES
            or flex.expired(spec, request, self.now)
        ):
            return
        instance = f"{spec.name}@{request.create_time or '?'}"
        held = self.decided.get(spec.name) == "held"
        then = "re-queueing" if held else "deleting it (not held)"
        if request.preempted:
            self.notice(
                spec, instance, "preempted", lambda: f"{spec.accelerator} in {spec.zone}; {then}"
            )
        elif request.state == RequestState.FAILED:
            error = request.error
            reason = (
                error.message
                if error and error.message
                else f"{request.api_kind} {request.api_state}"
            )
            self.notice(spec, instance, "failed", lambda: f"{reason}; {then}")

    # -- races ------------------------------------------------------------------------------
    def race(self, group: RaceGroupSpec) -> RaceStatus:
        specs = [s for n in group.slots if (s := self.desired.slot(n)) is not None]
        won: list[tuple[tuple[int, tuple[str, str], int], SlotSpec]] = []
        for spec in specs:
            request = self.observed.request(spec.zone, spec.name)
            if request is not None and request.state in WON_STATES:
                won.append(
                    ((_RANK[request.state], _time_key(request.create_time), spec.order), spec)
                )
            elif request is not None and flex.expired(spec, request, self.now) and not spec.renew:
                won.append(((len(_RANK), _time_key(request.create_time), spec.order), spec))
        won.sort(key=lambda item: item[0])
        done = [s for s in specs if s.name in self.releases]  # a hold that ran out
        won = [item for item in won if item[1].name not in self.releases]
        count = max(0, group.count - len(done))
        keep = [spec for _, spec in won[:count]]
        kept = {s.name for s in keep}
        unseen = [s.name for s in specs if not self.observed.knows(s.zone)]
        closed = len(keep) >= count
        for spec in specs:
            if spec.name in self.releases:
                self.released(spec)
            elif spec.name in kept:
                self.decided[spec.name] = "held"
                self.hold(spec, f"race {group.name}: winner")
            elif closed:
                self.decided[spec.name] = "released"
                why = (
                    f"race {group.name} won by {', '.join(sorted(kept))}"
                    if kept
                    else f"race {group.name} has count 0"
                    if not done
                    else f"race {group.name}: its hold ran out ({done[0].name})"
                )
                self.release(spec, why)
            else:
                self.decided[spec.name] = "held"
                self.hold(spec, f"race {group.name}: {len(keep)}/{group.count} won; queue")
        if unseen and not closed:
            self.warnings.append(
                f"race {group.name}: zones of {', '.join(unseen)} unreachable; a winner there "
                "would be invisible"
            )
        # A hold that ran out lowers the count: the group does not race again to replace it.
        return RaceStatus(group.name, count, tuple(s.name for s in keep), tuple(group.slots))


def plan(
    desired: Desired | None,
    observed: Observation,
    memory: Memory | None = None,
    now: float = 0.0,
    tmux_windows: Collection[str] | None = None,
    confirmed: Collection[str] = (),
    *,
    probes: wl.Probes | None = None,
    view: tuple[Desired, Observation, tuple[across.GroupView, ...]] | None = None,
) -> Plan:
    """Decide what to do. ``desired`` None (no valid intent yet) plans nothing at all.
    ``tmux_windows``: the ``session:window`` targets that exist, None when unknown.
    ``confirmed``: the deletes the user confirmed past the guard (``control.delete_id``s).
    ``probes``: this pass's workload probes per slot (None: not probed). ``view``: the
    caller's ``across.view`` of these three (computed here when not given)."""
    memory = memory or Memory()
    if desired is None:
        return Plan(
            unmanaged=observed.requests,
            warnings=("no valid desired state: nothing will be created or deleted",),
        )
    p = _Planner(desired, observed, memory, now, tmux_windows, probes)
    races = tuple(p.race(g) for g in desired.race_groups)
    for spec in desired.slots:
        if spec.race_group is None:
            p.decided[spec.name] = spec.want or "held"
            if spec.want == "released":
                p.release(spec, "want: released")
            elif spec.name in p.releases:  # a release rule: hold_for, hold_until, when_done
                p.released(spec)
            else:
                p.hold(spec, "want: held, not queued")
        if p.decided.get(spec.name) == "held":
            p.setup(spec)
            p.ends(spec)
        if spec.workload is not None or spec.name in memory.workloads:
            p.workload(spec)
        p.dead_notices(spec)
        p.signal_notices(spec)
    if desired.race_groups:
        _, seen, groups = view or across.view(desired, observed, memory)
        for v in groups:
            p.across(v, seen)
    unmanaged = _unmanaged(desired, observed.requests)
    if desired.settings.prune:
        for request in unmanaged:
            if (
                request.managed
                and request.state != RequestState.DELETING
                and observed.knows(request.zone)
            ):
                p.propose(
                    delete_action(
                        observed,
                        request,
                        "prune: labelled managed-by=tpu-reconciler but not in the file",
                        Kind.DELETE,
                    )
                )
    return apply_gates(
        Plan(
            actions=tuple(p.actions),
            deferred=tuple(p.deferred),
            blocked=tuple(p.blocked),
            unmanaged=unmanaged,
            races=races,
            notices=tuple(p.notices),
            warnings=tuple(p.warnings),
            ended=tuple(p.ended),
            decided_want=p.decided,
            releases=p.releases,
        ),
        desired,
        observed,
        memory,
        confirmed,
    )


def _unmanaged(
    desired: Desired, requests: Iterable[CapacityRequest]
) -> tuple[CapacityRequest, ...]:
    out = []
    for request in requests:
        spec = desired.slot(request.name)
        if spec is None or spec.zone != request.zone:
            out.append(request)
    return tuple(sorted(out, key=lambda q: (q.zone, q.name)))


def in_motion(
    desired: Desired | None, observed: Observation, races: Collection[RaceStatus]
) -> bool:
    """True while anything is queued, provisioning, deleting or racing: poll fast."""
    if any(r.open for r in races):
        return True
    names = {s.name for s in desired.slots} if desired else set()
    return any(q.state in MOVING_STATES for q in observed.requests if q.name in names)
