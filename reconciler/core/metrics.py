"""The controller's Prometheus metrics, as values: their names and labels, the bounded sets
every label value comes from, and the figures themselves computed from a status snapshot and
from event records.

``SPECS`` is the documented list (docs/operations.md, "Metrics"; tests/golden/metrics.txt
holds it stable). Names follow controller-runtime's style under the ``tpu_reconciler_``
prefix (a counter's ``_total`` is added by the exposition). A label never carries an unbounded
value — no run id, no error text, no operation name: each is one of a fixed set (``result``,
``kind``, ``outcome``, ``retry``, ``state``, ``mode``, ``cause``, ``api``) or, for ``zone`` and
``accelerator``, a value the desired file names or the zone catalogue knows, else ``other``.
A place is labelled ``zone``, ``accelerator``, ``mode`` and ``api`` (the API that holds the
request: ``tpu``, ``compute``), as the capacity history keeps a place.
The ``state`` of ``slots`` is a request's state in its API's own words: the set is the words
of every API the controller serves (``runtime/backends.STATE_WORDS``), which the runtime
passes in (``state_values``), so nothing here names an API's vocabulary.

``runtime.metrics`` owns the registry and the HTTP endpoint; it asks here what to count.

May: compute values. May not: do I/O, read a clock, or import prometheus_client.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from reconciler.core.capacity_chart import chips_of
from reconciler.core.history import (
    UNKNOWN,
    Lifetime,
    RaceWon,
    Record,
    Seen,
    StateOf,
    Tracker,
    Wait,
    api_of,
    request_of,
)
from reconciler.core.plan_values import Kind
from reconciler.model import names
from reconciler.model.status import StatusSnapshot
from reconciler.model.tpu_zones import ZONES_BY_FAMILY
from reconciler.model.vocabulary import APIS, DEFAULT_API, ON_DEMAND, RESERVED, SPOT
from reconciler.model.workload import WorkloadState

PREFIX: Final = "tpu_reconciler_"
OTHER: Final = "other"
#: A desired slot with no request in the cloud, and one whose zone was not seen (the status
#: snapshot's words).
NOT_QUEUED: Final = "NOT_QUEUED"
UNSEEN: Final = "UNKNOWN"

MetricType = Literal["counter", "gauge", "histogram"]

#: Label -> its values, where the set is fixed (zone and accelerator are bounded by the file).
RESULTS: Final = ("success", "observe_failed", "no_intent", "error")
OUTCOMES: Final = ("succeeded", "failed", "cancelled")
RETRY: Final = ("transient", "permanent")
SOURCES: Final = ("action", "observe")
#: (a flex-start slot's mode reads ``other``: the label's documented values predate it)
MODES: Final = (SPOT, ON_DEMAND, RESERVED, OTHER)
API_VALUES: Final = (*APIS, OTHER)
WORKLOAD_STATES: Final[tuple[str, ...]] = (*WorkloadState.__args__, OTHER)  # type: ignore[attr-defined]
CAUSES: Final = (
    "failed",
    "interrupted",
    "succeeded",
    "stalled",
    "stopping",
    "gave-up",
    "superseded",
    "released",
    "not-started",
    OTHER,
)
LABEL_VALUES: Final[Mapping[str, tuple[str, ...]]] = {
    "result": RESULTS,
    "kind": tuple(k.value for k in Kind),
    "outcome": OUTCOMES,
    "retry": RETRY,
    "source": SOURCES,
    "mode": MODES,
    "cause": CAUSES,
    "api": API_VALUES,
}
#: Where one metric's label has a set of its own (the workloads' ``state``).
METRIC_LABEL_VALUES: Final[Mapping[tuple[str, str], tuple[str, ...]]] = {
    ("workloads", "state"): WORKLOAD_STATES,
}


def state_values(words: Iterable[str]) -> tuple[str, ...]:
    """The ``state`` label's values: the APIs' own state ``words``, then the snapshot's own
    (UNKNOWN, NOT_QUEUED) and other."""
    return (*dict.fromkeys((*words, UNSEEN)), NOT_QUEUED, OTHER)


def allowed_values(metric: str, label: str, words: Iterable[str] = ()) -> tuple[str, ...]:
    """The documented values of ``label`` on ``metric`` (its short name), the ``state`` of
    ``slots`` from the APIs' state ``words``; zone and accelerator are not a fixed set
    (``zone_label``, ``accelerator_label``)."""
    if label == "state" and (metric, label) not in METRIC_LABEL_VALUES:
        return state_values(words)
    return METRIC_LABEL_VALUES.get((metric, label), LABEL_VALUES.get(label, ()))


#: Zones any label may name without the desired file naming them (the zone catalogue).
CATALOGUE_ZONES: Final = frozenset().union(*ZONES_BY_FAMILY.values())

#: Histogram buckets, in seconds (or requests).
PASS_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
OBSERVE_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
REQUEST_BUCKETS: Final = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)
WAIT_BUCKETS: Final = (
    10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 21600.0, 43200.0, 86400.0,
    259200.0, 604800.0,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Spec:
    """One metric family: its full name (without a counter's ``_total``), type, labels, help."""

    name: str
    type: MetricType
    labels: tuple[str, ...]
    help: str


def _spec(name: str, type_: MetricType, labels: tuple[str, ...], help_: str) -> Spec:
    return Spec(PREFIX + name, type_, labels, help_)


PLACE: Final = ("zone", "accelerator", "mode", "api")

SPECS: Final = (
    _spec("reconcile", "counter", ("result",), "Reconcile passes, by result."),
    _spec("reconcile_time_seconds", "histogram", (), "How long each reconcile pass took."),
    _spec("actions", "counter", ("kind", "outcome"), "Actions finished, by kind and outcome."),
    _spec(
        "errors", "counter", ("source", "retry"), "Failed actions and observations, by retry class."
    ),
    _spec(
        "observe_duration_seconds", "histogram", (), "How long one observation of the cloud took."
    ),
    _spec(
        "observe_requests", "histogram", (), "Cloud API requests (or gcloud runs) per observation."
    ),
    _spec("slots", "gauge", ("state", *PLACE), "Slots and queued resources, by state and place."),
    _spec("chips_held", "gauge", PLACE, "TPU chips held in ACTIVE queued resources."),
    _spec("in_flight_actions", "gauge", (), "Actions running now (the work queue's depth)."),
    _spec(
        "preemptions", "counter", PLACE, "ACTIVE queued resources preempted (suspended or failed)."
    ),
    _spec(
        "queue_wait_seconds",
        "histogram",
        PLACE,
        "Time from queued to ACTIVE of each request served.",
    ),
    _spec(
        "race_duration_seconds",
        "histogram",
        (),
        "Age of a race (its longest queued candidate) when won.",
    ),
    _spec("workloads", "gauge", ("state",), "Workloads, by state."),
    _spec(
        "workload_restarts",
        "counter",
        ("cause",),
        "Workload attempts followed by another attempt of the same run, by how the first ended.",
    ),
    _spec(
        "history_write_failures",
        "counter",
        (),
        "Times the capacity-history store began failing (a new error).",
    ),
    _spec("desired_valid", "gauge", (), "1 when desired.yaml is valid as saved, else 0."),
    _spec(
        "desired_last_load_timestamp_seconds",
        "gauge",
        (),
        "When a new valid desired.yaml was last loaded (Unix time).",
    ),
)
SPEC: Final[Mapping[str, Spec]] = {s.name.removeprefix(PREFIX): s for s in SPECS}


def golden_lines() -> list[str]:
    """The stable list: ``name type label,label`` per line (tests/golden/metrics.txt)."""
    return [f"{s.name} {s.type} {','.join(s.labels)}".rstrip() for s in SPECS]


# -- label values -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Known:
    """What the desired file names: zones and accelerators a label may carry as they are."""

    zones: frozenset[str] = frozenset()
    accelerators: frozenset[str] = frozenset()


def zone_label(zone: str | None, known: Known) -> str:
    if zone and (zone in known.zones or zone in CATALOGUE_ZONES):
        return zone
    return OTHER


def accelerator_label(accelerator: str | None, known: Known) -> str:
    """As written in the file, or a catalogued family with a power-of-two size; else other."""
    if not accelerator:
        return OTHER
    if accelerator in known.accelerators:
        return accelerator
    m = names.ACCELERATOR_RE.fullmatch(accelerator)
    if m is None or m.group(1) not in ZONES_BY_FAMILY:
        return OTHER
    size = int(m.group(2))
    return accelerator if size & (size - 1) == 0 else OTHER


def mode_label(mode: str | None) -> str:
    return mode if mode in MODES else OTHER


def api_label(api: str | None) -> str:
    """``tpu``, ``compute``; a row that does not say (an older snapshot) is the TPU API's."""
    return one_of(api or DEFAULT_API, API_VALUES)


def one_of(value: object, allowed: tuple[str, ...]) -> str:
    return value if isinstance(value, str) and value in allowed else OTHER


def pass_result(*, has_intent: bool, observe_error: str | None) -> str:
    if not has_intent:
        return "no_intent"
    return "observe_failed" if observe_error is not None else "success"


# -- gauges from the snapshot ----------------------------------------------------------------
Labels = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Gauges:
    slots: dict[Labels, float]
    chips_held: dict[Labels, float]
    workloads: dict[Labels, float]
    in_flight: float
    desired_valid: float


#: (zone, accelerator, mode, api) as in the snapshot
Raw = tuple[str | None, str | None, str | None, str | None]


def gauges(snapshot: StatusSnapshot, words: Collection[str]) -> Gauges:
    """Every gauge the snapshot answers (``words``: the APIs' state words a ``state`` label
    may carry). One walk over the slots counts by state and raw place; the labels are then
    worked out once per distinct place (a handful), so a scrape of 1,000 slots spends well
    under a millisecond here."""
    allowed = frozenset(state_values(words))
    counts: dict[tuple[str, Raw], float] = {}
    active: dict[Raw, float] = {}
    managed: set[Raw] = set()
    workloads: dict[Labels, float] = {(s,): 0.0 for s in WORKLOAD_STATES if s != OTHER}
    for s in snapshot.slots:
        raw = (s.zone, s.accelerator, s.mode, s.api)
        state = s.state if s.state in allowed else (OTHER if s.state else NOT_QUEUED)
        counts[state, raw] = counts.get((state, raw), 0.0) + 1.0
        if s.active:  # slices held: a multislice slot holds each of its slices
            active[raw] = active.get(raw, 0.0) + float(max(1, len(s.slices)))
        if s.managed:
            managed.add(raw)
        if s.workload is not None:
            wkey = (one_of(s.workload.state, WORKLOAD_STATES),)
            workloads[wkey] = workloads.get(wkey, 0.0) + 1.0
    known = Known(
        zones=frozenset(r[0] for r in managed if r[0]),
        accelerators=frozenset(r[1] for r in managed if r[1]),
    )
    places = {
        raw: (
            zone_label(raw[0], known),
            accelerator_label(raw[1], known),
            mode_label(raw[2]),
            api_label(raw[3]),
        )
        for raw in {raw for _, raw in counts}
    }
    slots: dict[Labels, float] = {}
    for (state, raw), n in counts.items():
        key = (state, *places[raw])
        slots[key] = slots.get(key, 0.0) + n
    held: dict[Labels, float] = {}
    for raw, n in active.items():
        held[places[raw]] = held.get(places[raw], 0.0) + n * chips_of(raw[1] or "?")
    return Gauges(
        slots=slots,
        chips_held=held,
        workloads=workloads,
        in_flight=float(len(snapshot.in_flight or ())),
        desired_valid=1.0 if snapshot.desired.valid else 0.0,
    )


# -- counters and histograms from events --------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Count:
    """Add ``value`` to counter ``metric`` (a key of ``SPEC``) at ``labels``."""

    metric: str
    labels: Labels = ()
    value: float = 1.0


@dataclass(frozen=True, slots=True)
class Observe:
    """Put ``value`` into histogram ``metric`` at ``labels``."""

    metric: str
    value: float
    labels: Labels = ()


Change = Count | Observe


@dataclass(frozen=True, slots=True)
class SlotInfo:
    zone: str
    accelerator: str
    mode: str
    group: str | None
    api: str = DEFAULT_API


@dataclass
class EventFold:
    """Turns event records (``runtime.events`` dicts) into counter and histogram changes.

    It keeps a ``core.history.Tracker`` fed with ``qr.state`` records, so waits, preemptions and
    races mean here exactly what they mean in the capacity history. ``intent`` tells it each
    slot's place and race group (the events carry only slot and zone); ``state_of`` reads a
    record's neutral state from its API's word when the record does not say it."""

    tracker: Tracker = field(default_factory=Tracker)
    state_of: StateOf | None = None
    slots: Mapping[str, SlotInfo] = field(default_factory=dict)
    known: Known = field(default_factory=Known)
    groups: Mapping[str, str] = field(default_factory=dict)

    def intent(self, slots: Mapping[str, SlotInfo]) -> None:
        self.slots = slots
        self.groups = {name: s.group for name, s in slots.items() if s.group}
        self.known = Known(
            zones=frozenset(s.zone for s in slots.values()),
            accelerators=frozenset(s.accelerator for s in slots.values()),
        )

    def fold(self, event: Mapping[str, Any], now: float) -> list[Change]:
        kind = event.get("kind")
        if kind == "qr.state":
            return self._request_state(event, now)
        if kind in ("action.succeeded", "action.failed", "action.cancelled"):
            out: list[Change] = [
                Count(
                    "actions",
                    (
                        one_of(event.get("action"), LABEL_VALUES["kind"]),
                        str(kind).removeprefix("action."),
                    ),
                )
            ]
            if kind == "action.failed":
                out.append(Count("errors", ("action", one_of(event.get("retry"), RETRY))))
            return out
        if kind == "observe.failed":
            return [Count("errors", ("observe", one_of(event.get("retry"), RETRY)))]
        if kind == "history.failed":
            return [Count("history_write_failures")]
        return []

    def _request_state(self, event: Mapping[str, Any], now: float) -> list[Change]:
        slot, zone, after = event.get("slot"), event.get("zone"), event.get("after")
        if not isinstance(slot, str) or not isinstance(zone, str):
            return []
        info = self.slots.get(slot)
        seen = Seen(
            slot=slot,
            zone=zone,
            state=after if isinstance(after, str) else None,
            accelerator=info.accelerator if info else UNKNOWN,
            mode=info.mode if info else UNKNOWN,
            request=request_of(event, self.state_of),
            api=api_of(event) if "api" in event or info is None else info.api,
        )
        return self.changes(self.tracker.step([seen], now, groups=self.groups), now)

    def changes(self, records: Iterable[Record], now: float) -> list[Change]:
        out: list[Change] = []
        waits: dict[str, float] = {}
        for r in records:
            if isinstance(r, Wait) and r.to_active is not None:
                out.append(Observe("queue_wait_seconds", r.to_active, self._place(r)))
                if r.to_provisioning is not None:
                    waits[r.slot] = r.to_provisioning
            elif isinstance(r, Lifetime) and r.end == "preempted":
                out.append(Count("preemptions", self._place(r)))
            elif isinstance(r, RaceWon):
                track = self.tracker.tracks.get((r.zone, r.winner))
                won = [s for _, _, s in r.losers]
                if track is not None and track.queued_at is not None:
                    won.append(now - track.queued_at)
                elif r.winner in waits:
                    won.append(waits[r.winner])
                out.append(Observe("race_duration_seconds", max(won, default=0.0)))
        return out

    def _place(self, r: Wait | Lifetime) -> Labels:
        return (
            zone_label(r.zone, self.known),
            accelerator_label(r.accelerator, self.known),
            mode_label(r.mode),
            api_label(r.api),
        )


def restart_cause(cause: str) -> str:
    """``failed: exit 1 on worker 2`` -> ``failed``, ``not started: ...`` ->
    ``not-started``; a phase outside the set -> other."""
    return one_of(cause.split(":", 1)[0].strip().replace(" ", "-"), CAUSES)
