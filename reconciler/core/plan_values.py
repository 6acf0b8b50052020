"""What a plan is: the values ``core.plan.plan`` returns (``Plan``, its ``Action``s and the
``Withheld`` ones, ``Notice``s, ``RaceStatus``), and the action kinds.

Each word here has one meaning (the glossary in docs/architecture.md): *held* is a slot's
capacity kept (``want: held``); an action not taken this pass is *withheld* — *deferred* by
backoff, *blocked* by a permanent error, or *gated* (paused, the delete guard, suspended, a
quota); a *quota* is a chip limit (``QuotaSpec``); *confirmed* deletes are the ones the user
confirmed past the delete guard; a *generation* is a setup or workload counter.

An action's ``key`` is its identity for backoff and for "one action per slot in flight" (the
cloud kinds share one); its ``fingerprint`` changes when the intent or the world behind it
changes, which is what lets a permanent error block only the decision it answered. How the
planner decides is ``core/plan.py``; these are re-exported there.

Values only: no I/O, no clock, no await.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from reconciler.core import control
from reconciler.core import workload as wl
from reconciler.model.capacity import DEFAULT_API, CapacityRequest
from reconciler.model.desired import QuotaSpec
from reconciler.model.ends import EndAct
from reconciler.model.requests import CreateRequest


class Kind(StrEnum):
    CREATE = "create"
    DELETE = "delete"
    REPLACE = "replace"  # delete a dead or reshaped request now; the create follows later
    BOOTSTRAP = "bootstrap"
    TAILSCALE = "tailscale"
    TMUX = "tmux"
    LAUNCH = "launch"
    STOP = "stop"
    BEFORE_END = "before_end"  # a workload's command before a known end (core/before_end)


SYMBOL: Final = {
    Kind.CREATE: "+",
    Kind.DELETE: "-",
    Kind.REPLACE: "-/+",
    Kind.BOOTSTRAP: "~",
    Kind.TAILSCALE: "~",
    Kind.TMUX: "~",
    Kind.LAUNCH: "~",
    Kind.STOP: "~",
    Kind.BEFORE_END: "~",
}
CLOUD_KINDS: Final = frozenset({Kind.CREATE, Kind.DELETE, Kind.REPLACE})
SETUP_KINDS: Final = frozenset({Kind.BOOTSTRAP, Kind.TAILSCALE, Kind.TMUX})
WORKLOAD_KINDS: Final = frozenset({Kind.LAUNCH, Kind.STOP})


@dataclass(frozen=True, slots=True)
class Action:
    kind: Kind
    slot: str
    zone: str
    reason: str
    destructive: bool = False
    force: bool = False
    create: CreateRequest | None = None
    instance: str | None = None  # setup actions: the node instance they apply to
    generation: int = 0
    #: the request's state this decision was made on, the API's word ("NOT_QUEUED" if none)
    state: str | None = None
    workload: wl.WorkloadAct | None = None  # launch / stop: run id, attempt, grace
    #: create: the zone is not known to offer the accelerator (``model.tpu_zones``, which may
    #: be behind Google's list): it goes ahead, and ``plan`` says so next to it
    unlisted_zone: bool = False
    #: create: chips counted in its (zone, n) and (region, n) for its family and mode when it
    #: was planned (``core.quota``); a quota refusal records the count of the place it names
    chips_counted: tuple[tuple[str, int], ...] = field(default=(), compare=False)
    #: create: the limits known for its API, family and mode when it was planned, (zone or
    #: region, chips); a quota refusal keeps the one of the place it names (``core.quota``)
    limits_known: tuple[tuple[str, int], ...] = field(default=(), compare=False)
    #: the API that holds the request it creates or deletes (the port routes it by this)
    api: str = DEFAULT_API
    #: replace: the file changed the request's API or shape (``core.reshape``), not a death:
    #: the delete guard counts it like a delete, and it is no dead request in a row
    reshape: bool = False
    end: EndAct | None = None  # before_end: the attempt and the end it runs before

    @property
    def symbol(self) -> str:
        return SYMBOL[self.kind]

    @property
    def key(self) -> str:
        """Identity for backoff and "one action per slot in flight" (cloud kinds share one)."""
        group = "cloud" if self.kind in CLOUD_KINDS else self.kind.value
        return f"{self.zone}/{self.slot}:{group}"

    @property
    def fingerprint(self) -> str:
        """Changes when the intent or the world behind this action changes."""
        parts = (self.kind, self.slot, self.zone, self.state, self.instance, self.generation)
        extra = (self.end,) if self.end is not None else ()  # older kinds keep their value
        what = (parts, self.create, self.workload, *extra)
        return hashlib.sha256(repr(what).encode()).hexdigest()[:16]


#: Permanent failures of one action key in a row after which a changed fingerprint no longer
#: skips the backoff (see ``_Planner`` on permanent errors).
UNBACKED_NEW_DECISIONS: Final = 3


@dataclass(frozen=True, slots=True)
class Withheld:
    """An action not taken this pass, and why (backoff, a permanent error or a gate)."""

    action: Action
    why: str
    until: float | None = None  # backoff: when it may run
    gate: str | None = None  # gated: "paused" | "guard" | "suspended" | "quota"
    limit: QuotaSpec | None = None  # gate "quota": the quota it waits on (None: a member's cap)


@dataclass(frozen=True, slots=True)
class Notice:
    key: str  # "<instance>:<event>", sent once
    slot: str
    event: str  # "active" | "preempted" | "failed"
    title: str
    message: str
    #: the key of the action it announces ("before_end command sent"): sent only when that
    #: action goes (``plan_gates`` drops it with a gated one); None: it tells what was seen
    announces: str | None = None


@dataclass(frozen=True, slots=True)
class RaceStatus:
    name: str
    count: int
    winners: tuple[str, ...]
    candidates: tuple[str, ...]

    @property
    def open(self) -> bool:
        return len(self.winners) < self.count


@dataclass(frozen=True, slots=True)
class Plan:
    actions: tuple[Action, ...] = ()
    deferred: tuple[Withheld, ...] = ()
    blocked: tuple[Withheld, ...] = ()
    unmanaged: tuple[CapacityRequest, ...] = ()
    races: tuple[RaceStatus, ...] = ()
    notices: tuple[Notice, ...] = ()
    warnings: tuple[str, ...] = ()
    decided_want: dict[str, str] = field(default_factory=dict)  # slot -> held/released
    gated: tuple[Withheld, ...] = ()  # waiting on a gate: paused, guarded, suspended, quota
    suspended: bool = False
    guard: control.Guard | None = None
    releases: Mapping[str, control.Release] = field(default_factory=dict)  # released now
    releases_at: Mapping[str, float] = field(default_factory=dict)  # held slots: when
    ended: tuple[str, ...] = ()  # flex-start runs over and not queued again: why, one line each

    @property
    def empty(self) -> bool:
        return not self.actions

    @property
    def cloud_actions(self) -> tuple[Action, ...]:
        return tuple(a for a in self.actions if a.kind in CLOUD_KINDS)

    def counts(self) -> tuple[int, int, int]:
        """(to add, to change, to destroy), Terraform style: a replace counts as both."""
        add = sum(a.kind in (Kind.CREATE, Kind.REPLACE) for a in self.actions)
        change = sum(
            a.kind in SETUP_KINDS or a.kind in WORKLOAD_KINDS or a.kind == Kind.BEFORE_END
            for a in self.actions
        )
        destroy = sum(a.kind in (Kind.DELETE, Kind.REPLACE) for a in self.actions)
        return add, change, destroy
