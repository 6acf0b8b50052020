"""Capacity statistics: how long queues take and how long capacity lives, per place.

A *place* is ``(zone, accelerator, mode, api)``: the same accelerator in the same zone is
another place on another API (a TPU API queue and Compute Engine's are not one queue). The
history store hands this module plain samples per place (``Samples``: waits in seconds,
lifetimes, failure counts); this module turns them into figures (``PlaceStats``: percentiles,
median lifetime before preemption, preemptions per day held, "queue closed") and ranks places
for an accelerator by expected time to capacity.

Expected time to capacity counts the requests that never got capacity too: a request deleted
or failed while still queued is a *censored* wait ("waited at least this long"), so the median
is the Kaplan-Meier estimate, not the median of the lucky ones. A request still queued is
censored the same way at "now" (``Open``: the caller says what now is), and so is the held
time of a node still alive when preemptions per day are counted. A zone whose requests mostly
never got through has no finite median and ranks after every zone that has one.

May: compute. May not: do I/O, read a clock, or know where the samples came from.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

from reconciler.model.accelerators import default_api, family_of
from reconciler.model.capacity import DEFAULT_API, WAITING_STATES
from reconciler.model.multislice import place_accelerator
from reconciler.model.observed import Observation
from reconciler.model.rpc_codes import RPC_CODES

if TYPE_CHECKING:
    from reconciler.model.desired import Desired

#: Samples a figure needs before ``plan`` / ``status`` show it as an expected wait.
MIN_SAMPLES: Final = 3

#: Message fragments of a create refused because the queue is closed to the project.
CLOSED_QUEUE_FRAGMENTS: Final = ("no permission to submit into this queue",)


Place = tuple[str, str, str, str]  # (zone, accelerator, mode, api)


def queue_closed(message: str) -> bool:
    """True when a refusal's message says the queue is closed to the project."""
    lowered = message.lower()
    return any(fragment in lowered for fragment in CLOSED_QUEUE_FRAGMENTS)


def code_of(message: str, code: int | None = None) -> int | None:
    """The rpc code of a failure: ``code`` when known, else from a leading status name."""
    if code is not None:
        return code
    head = message.split(":", 1)[0].strip().upper()
    return RPC_CODES.get(head)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) by linear interpolation between closest ranks (numpy's
    default); None for no values."""
    if not values:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: Sequence[float]) -> float | None:
    return percentile(values, 50.0)


def km_quantile(
    observed: Sequence[float], censored: Sequence[float], q: float = 0.5
) -> float | None:
    """Kaplan-Meier estimate of the time by which a fraction ``q`` of requests got capacity.

    ``observed``: waits that ended with capacity; ``censored``: waits that ended without it
    (deleted, failed, still queued). None when the estimate never reaches ``q`` (too many
    requests never served) or there is nothing to go on. At a tie, served waits count before
    censored ones (the usual convention)."""
    return km_quantile_sorted(sorted(observed), sorted(censored), q)


def km_quantile_sorted(
    served: Sequence[float], censored: Sequence[float], q: float = 0.5
) -> float | None:
    """``km_quantile`` for inputs already in ascending order, in O(censored x log served):
    between two censored waits the survival falls by a run of served ones at once, since
    (r-1)/r * (r-2)/(r-1) * ... * (r-m)/(r-m+1) = (r-m)/r for r requests at risk."""
    target = 1.0 - q + 1e-12  # survival at or below this: a fraction q has been served
    total = len(served) + len(censored)
    survival, gone, i = 1.0, 0, 0
    for c in [*censored, None]:
        j = len(served) if c is None else bisect.bisect_right(served, c, lo=i)
        m, risk = j - i, total - gone
        if m:
            if survival * (risk - m) / risk <= target:
                k = max(1, math.ceil(risk - target * risk / survival))
                while k > 1 and survival * (risk - k + 1) / risk <= target:
                    k -= 1
                while survival * (risk - k) / risk > target:
                    k += 1
                return served[i + k - 1]
            survival *= (risk - m) / risk
        gone += m + (c is not None)
        i = j
    return None


@dataclass(frozen=True, slots=True)
class Samples:
    """What the store knows about one place, in seconds."""

    to_provisioning: tuple[float, ...] = ()  # queued -> PROVISIONING, served requests
    to_active: tuple[float, ...] = ()  # queued -> ACTIVE, served requests
    unserved: tuple[float, ...] = ()  # queued and then deleted / failed without capacity
    lifetimes_preempted: tuple[float, ...] = ()  # READY -> preempted, per node instance
    held_seconds: float = 0.0  # total READY time of ended node instances
    failures: Mapping[int | str, int] = field(default_factory=dict)  # rpc code (or "?") -> n
    refusals: int = 0
    closed: bool = False  # a create here was refused as "queue closed"
    last_seen: float | None = None  # newest sample time (epoch seconds)
    waiting: tuple[float, ...] = ()  # still queued: waited at least this long (up to now)
    held_open: float = 0.0  # READY time so far (up to now) of node instances still alive


@dataclass(frozen=True, slots=True)
class Open:
    """What is still in progress at one place at a moment: requests still queued (how long
    each has waited so far) and the READY time so far of node instances still alive."""

    waiting: tuple[float, ...] = ()
    held: float = 0.0


def with_open(
    per_place: Mapping[Place, Samples], open_: Mapping[Place, Open]
) -> dict[Place, Samples]:
    """``per_place`` with the open waits and holdings added (a place known only by them too)."""
    out = dict(per_place)
    for place, o in open_.items():
        base = out.get(place, Samples())
        out[place] = replace(
            base, waiting=base.waiting + o.waiting, held_open=base.held_open + o.held
        )
    return out


def per_day(preemptions: int, held_seconds: float) -> float | None:
    """Preemptions per day of capacity held (ended and still-alive instances alike)."""
    return preemptions / (held_seconds / 86400.0) if held_seconds > 0 else None


@dataclass(frozen=True, slots=True)
class PlaceStats:
    zone: str
    accelerator: str
    mode: str
    samples: int  # served requests (to ACTIVE)
    unserved: int
    p50_provisioning: float | None
    p90_provisioning: float | None
    p50_active: float | None
    p90_active: float | None
    expected_wait: float | None  # Kaplan-Meier median to ACTIVE
    median_lifetime: float | None  # before preemption
    preemptions: int
    preemptions_per_day: float | None  # per day of capacity held
    failures: Mapping[str, int]
    queue_closed: bool
    last_seen: float | None
    waiting: int = 0  # requests still queued (censored waits "at least this long")
    api: str = DEFAULT_API  # the API the requests went to ("tpu", "compute")

    @property
    def place(self) -> Place:
        return (self.zone, self.accelerator, self.mode, self.api)


def stats_for(place: Place, samples: Samples) -> PlaceStats:
    preemptions = len(samples.lifetimes_preempted)
    return PlaceStats(
        zone=place[0],
        accelerator=place[1],
        mode=place[2],
        samples=len(samples.to_active),
        unserved=len(samples.unserved),
        p50_provisioning=percentile(samples.to_provisioning, 50),
        p90_provisioning=percentile(samples.to_provisioning, 90),
        p50_active=percentile(samples.to_active, 50),
        p90_active=percentile(samples.to_active, 90),
        expected_wait=km_quantile(samples.to_active, samples.unserved + samples.waiting),
        median_lifetime=median(samples.lifetimes_preempted),
        preemptions=preemptions,
        preemptions_per_day=per_day(preemptions, samples.held_seconds + samples.held_open),
        failures={
            str(k): v for k, v in sorted(samples.failures.items(), key=lambda kv: str(kv[0]))
        },
        queue_closed=samples.closed,
        last_seen=samples.last_seen,
        waiting=len(samples.waiting),
        api=place[3],
    )


def summarize(per_place: Mapping[Place, Samples]) -> list[PlaceStats]:
    """Figures for every place, ordered by zone, accelerator, mode, API."""
    return [stats_for(place, per_place[place]) for place in sorted(per_place)]


@dataclass(frozen=True, slots=True)
class Recommendation:
    zone: str
    expected_wait: float | None  # None: not enough evidence that it ever serves
    samples: int
    unserved: int
    median_lifetime: float | None
    preemptions_per_day: float | None
    waiting: int = 0  # requests still queued there
    api: str = DEFAULT_API  # the API whose queue this is


def rank(
    stats: Iterable[PlaceStats],
    accelerator: str,
    mode: str,
    *,
    count: int | None = None,
    api: str | None = None,
) -> list[Recommendation]:
    """Places (a zone on an API) for ``accelerator`` in ``mode`` (on ``api`` only, when
    given), soonest expected capacity first; closed queues left out. Places without a finite
    estimate follow, those with fewer failed or still-open waits first.
    Ties break on more samples, then longer median lifetime, then the zone name and API."""
    chosen = [
        s
        for s in stats
        if s.accelerator == accelerator and s.mode == mode and (api is None or s.api == api)
    ]
    picks = [
        Recommendation(
            zone=s.zone,
            expected_wait=s.expected_wait,
            samples=s.samples,
            unserved=s.unserved,
            median_lifetime=s.median_lifetime,
            preemptions_per_day=s.preemptions_per_day,
            waiting=s.waiting,
            api=s.api,
        )
        for s in chosen
        if not s.queue_closed
    ]

    def key(r: Recommendation) -> tuple[int, float, int, float, str, str]:
        known = r.expected_wait is not None
        return (
            0 if known else 1,
            r.expected_wait if r.expected_wait is not None else float(r.unserved + r.waiting),
            -r.samples,
            -(r.median_lifetime or 0.0),
            r.zone,
            r.api,
        )

    ordered = sorted(picks, key=key)
    return ordered if count is None else ordered[: max(count, 0)]


@dataclass(frozen=True, slots=True)
class WaitHint:
    """What ``plan`` and ``status`` show for a waiting candidate."""

    p50_seconds: float
    samples: int


WaitHints = Mapping[Place, WaitHint]


def wait_hints(
    stats: Iterable[PlaceStats], *, min_samples: int = MIN_SAMPLES
) -> dict[Place, WaitHint]:
    """The small value handed to the planner and status: places with enough samples only."""
    out: dict[Place, WaitHint] = {}
    for s in stats:
        if s.samples >= min_samples and s.p50_active is not None:
            out[s.place] = WaitHint(p50_seconds=s.p50_active, samples=s.samples)
    return out


def race_group_yaml(
    group: str,
    accelerator: str,
    mode: str,
    picks: Sequence[Recommendation],
    *,
    count: int = 1,
    slot_names: Sequence[str],
) -> str:
    """A ready-to-paste ``slots`` + ``race_groups`` fragment for the ranked places; a pick on
    another API than its family's default says ``api:``."""
    lines = ["slots:"]
    # flex-start needs each run's length: an example to change (at most 7d)
    run = ", max_run_duration: 1d" if mode == "flex-start" else ""
    if run:
        lines.insert(0, "# max_run_duration: how long each flex-start run lasts (at most 7d)")
    usual = default_api(family_of(accelerator) or "")
    for pick, name in zip(picks, slot_names, strict=True):
        api = f", api: {pick.api}" if pick.api != usual else ""
        lines.append(
            f"  - {{name: {name}, zone: {pick.zone}, accelerator: {accelerator}, mode: {mode}"
            f"{api}{run}}}"
        )
    lines.append("race_groups:")
    lines.append(f"  - name: {group}")
    lines.append(f"    count: {count}")
    lines.append(f"    slots: [{', '.join(slot_names)}]")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class ExpectedWait:
    slot: str
    zone: str
    hint: WaitHint

    def text(self) -> str:
        """``p50 2h10m here, 14 samples`` (as ``plan`` and ``status`` show it)."""
        from reconciler.model.durations import format_duration

        return f"p50 {format_duration(self.hint.p50_seconds)} here, {self.hint.samples} samples"


def waiting_hints(
    desired: Desired, observation: Observation, hints: WaitHints
) -> list[ExpectedWait]:
    """For every slot that waits for capacity (queued, or about to be queued), the history's
    figure for its place when there is one (``hints`` holds only places with enough samples)."""
    out = []
    for spec in desired.slots:
        place = (spec.zone, place_accelerator(spec.accelerator, spec.slices), spec.mode, spec.api)
        hint = hints.get(place)
        if hint is None:
            continue
        request = observation.request(spec.zone, spec.name)
        queued = (
            request.state in WAITING_STATES
            if request is not None
            else (spec.want == "held" or spec.race_group is not None)
        )
        if queued:
            out.append(ExpectedWait(spec.name, spec.zone, hint))
    return out
