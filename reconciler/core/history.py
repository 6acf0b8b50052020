"""What happened to each capacity request, as history records: the diff of successive looks.

The controller hands the recorder one ``Observation`` (and its memory) per pass; the recorder,
off the controller's hot path, feeds them to a ``Tracker``, which compares each look with the
last one and returns the records worth keeping:

- ``Transition``: a request changed state (``before``/``after``: the API's words, None =
  absent), with the cloud's error code and message when the request carries one;
- ``Wait``: one queued request ended — served (times to PROVISIONING and to ACTIVE) or not
  (deleted or failed while still queued: a *censored* wait);
- ``Lifetime``: a node instance stopped holding capacity (ACTIVE → preempted, deleted or
  expired);
- ``RaceWon`` / ``LoserDeleted``: a race candidate got capacity while others waited, and how
  long each loser's delete took;
- ``Refusal``: a create the cloud refused (PERMISSION_DENIED = code 7, a closed queue, ...).

The same tracker replays the event log (``qr.state`` and failed creates) to fill a new store
with the past, so live recording and backfill agree on what a wait is. It decides on each
request's neutral state (``model/capacity.RequestState``) and records the API's word.

May: compare values and build records. May not: do I/O, read a clock, or await.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.core.capacity import Open, Place, code_of, queue_closed
from reconciler.core.chip_use import ChipSummary
from reconciler.model.capacity import DEFAULT_API, WAITING_STATES, WON_STATES, RequestState

#: The request stopped holding capacity without being deleted (its node's lifetime ends).
LOST = frozenset(
    {RequestState.SUSPENDING, RequestState.SUSPENDED, RequestState.FAILED, RequestState.ENDED}
)
UNKNOWN = "?"
#: The neutral state of an API's state word, read with that API's words (``word``, ``api``):
#: for event records older than the ``request`` key and history rows, which keep only the
#: word (the runtime passes ``runtime/backends.word_state``).
StateOf = Callable[[str, str], RequestState]


@dataclass(frozen=True, slots=True)
class Transition:
    slot: str
    zone: str
    accelerator: str
    mode: str
    before: str | None
    after: str | None
    at: float
    code: int | None = None
    message: str = ""
    api: str = DEFAULT_API  # whose words ``before`` and ``after`` are


@dataclass(frozen=True, slots=True)
class Wait:
    slot: str
    zone: str
    accelerator: str
    mode: str
    queued_at: float
    to_provisioning: float | None  # None: never got capacity (censored at ``waited``)
    to_active: float | None
    waited: float  # how long it was queued in all
    api: str = DEFAULT_API


@dataclass(frozen=True, slots=True)
class Lifetime:
    slot: str
    zone: str
    accelerator: str
    mode: str
    ready_at: float
    ended_at: float
    end: str  # "preempted" | "deleted" | "expired" (a flex-start run's end)
    api: str = DEFAULT_API

    @property
    def seconds(self) -> float:
        return self.ended_at - self.ready_at


@dataclass(frozen=True, slots=True)
class RaceWon:
    group: str
    winner: str
    zone: str
    at: float
    losers: tuple[tuple[str, str, float], ...]  # (slot, zone, seconds waited so far)


@dataclass(frozen=True, slots=True)
class LoserDeleted:
    group: str
    slot: str
    zone: str
    seconds: float  # DELETING first seen -> gone


@dataclass(frozen=True, slots=True)
class Refusal:
    slot: str
    zone: str
    accelerator: str
    mode: str
    at: float
    code: int | None
    message: str
    closed: bool
    api: str = DEFAULT_API


@dataclass(frozen=True, slots=True)
class WorkloadAttempt:
    """One attempt of a slot's workload (recorded through the recorder)."""

    slot: str
    zone: str
    accelerator: str
    run_id: str
    attempt: int
    started_at: float
    ended_at: float | None = None
    exit_code: int | None = None
    cause: str = ""  # e.g. succeeded, failed, interrupted, stopped, stalled
    #: its chips (``setup.telemetry``; ``core.chip_use``): None when they were never read
    chips: ChipSummary | None = None


Record = Transition | Wait | Lifetime | RaceWon | LoserDeleted | Refusal | WorkloadAttempt


@dataclass(frozen=True, slots=True)
class Seen:
    """One request as a look saw it: ``state`` its API's word (None: gone), ``request`` its
    neutral state (None with a word: unknown)."""

    slot: str
    zone: str
    state: str | None
    accelerator: str = UNKNOWN
    mode: str = UNKNOWN
    code: int | None = None
    message: str = ""
    request: RequestState | None = None
    api: str = DEFAULT_API  # the API it was seen through (its words are ``state``'s)

    @property
    def phase(self) -> RequestState | None:
        if self.state is None:
            return None
        return self.request or RequestState.UNKNOWN


@dataclass(slots=True)
class RequestTrack:
    state: str  # the API's word
    accelerator: str
    mode: str
    queued_at: float | None = None
    provisioning_at: float | None = None
    active_at: float | None = None
    deleting_at: float | None = None
    lost_race: str | None = None  # the group it lost, until its delete finishes
    request: str = ""  # the neutral state (``RequestState``); "" in a tracker saved before it
    api: str = DEFAULT_API  # the API that holds it (a tracker saved before it: the TPU API)

    @property
    def phase(self) -> RequestState:
        return RequestState(self.request) if self.request else RequestState.UNKNOWN


@dataclass(slots=True)
class Tracker:
    """Per-request memory between looks. Deterministic: the same looks give the same
    records."""

    tracks: dict[tuple[str, str], RequestTrack] = field(default_factory=dict)
    failures_seen: dict[str, float] = field(default_factory=dict)  # action key -> not_before

    def step(
        self,
        seen: Iterable[Seen],
        now: float,
        *,
        gone_zones: Iterable[str] = (),
        complete: bool = False,
        groups: Mapping[str, str] | None = None,
        present: set[tuple[str, str]] | None = None,
    ) -> list[Record]:
        """Records for one look. With ``complete``, every tracked request in ``gone_zones``
        (zones the look saw fully) that is not in ``seen`` (or in ``present``, the (zone, name)
        of every request the look saw, when ``seen`` holds only the changed ones) is gone."""
        groups = groups or {}
        out: list[Record] = []
        won: list[Transition] = []
        keys: set[tuple[str, str]] = set() if present is None else present
        for s in seen:
            if present is None:
                keys.add((s.zone, s.slot))
            self._update(s, now, out, won)
        if complete:
            known = set(gone_zones)
            for key in [k for k in self.tracks if k not in keys and k[0] in known]:
                self._update(Seen(slot=key[1], zone=key[0], state=None), now, out, won)
        self._races(out, won, now, groups)
        return out

    def _update(self, s: Seen, now: float, out: list[Record], won: list[Transition]) -> None:
        key = (s.zone, s.slot)
        track = self.tracks.get(key)
        before = track.state if track else None
        if before == s.state:
            return
        phase, was = s.phase, track.phase if track else None
        accelerator = s.accelerator if s.accelerator != UNKNOWN or not track else track.accelerator
        mode = s.mode if s.mode != UNKNOWN or not track else track.mode
        api = s.api if s.state is not None or not track else track.api
        transition = Transition(
            s.slot, s.zone, accelerator, mode, before, s.state, now, s.code, s.message, api
        )
        out.append(transition)
        if phase in WON_STATES and was not in WON_STATES:
            won.append(transition)  # capacity got: a race win when it is a candidate
        if phase is None:
            if track is not None:
                self._ended(key, track, now, out, deleted=True)
                if track.lost_race is not None and track.deleting_at is not None:
                    out.append(
                        LoserDeleted(track.lost_race, s.slot, s.zone, now - track.deleting_at)
                    )
                del self.tracks[key]
            return
        assert s.state is not None
        if track is None or was in LOST or was == RequestState.DELETING:
            if track is not None:
                self._ended(key, track, now, out, deleted=False)
            track = RequestTrack(state=s.state, accelerator=accelerator, mode=mode, api=api)
            if phase in WAITING_STATES:
                track.queued_at = now
            self.tracks[key] = track
        track.state, track.accelerator, track.mode, track.api = s.state, accelerator, mode, api
        track.request = phase.value
        if phase == RequestState.PROVISIONING and track.provisioning_at is None:
            track.provisioning_at = now
        elif phase == RequestState.ACTIVE and track.active_at is None:
            track.active_at = now
            if track.provisioning_at is None:
                track.provisioning_at = now
            if track.queued_at is not None:
                out.append(
                    Wait(
                        s.slot,
                        s.zone,
                        accelerator,
                        mode,
                        track.queued_at,
                        track.provisioning_at - track.queued_at,
                        now - track.queued_at,
                        now - track.queued_at,
                        api,
                    )
                )
                track.queued_at = None  # counted
        elif phase in LOST or phase == RequestState.DELETING:
            deleting = phase == RequestState.DELETING
            self._ended(key, track, now, out, deleted=deleting, ended=phase == RequestState.ENDED)
            if deleting:
                track.deleting_at = now

    def _ended(
        self,
        key: tuple[str, str],
        t: RequestTrack,
        now: float,
        out: list[Record],
        *,
        deleted: bool,
        ended: bool = False,
    ) -> None:
        """The request stopped waiting or the instance stopped holding capacity."""
        zone, slot = key
        if t.queued_at is not None:
            out.append(
                Wait(
                    slot, zone, t.accelerator, t.mode, t.queued_at, None, None,
                    now - t.queued_at, t.api,
                )
            )  # fmt: skip
            t.queued_at = None
        if t.active_at is not None:
            end = "deleted" if deleted else "preempted"
            if end == "preempted" and (ended or t.mode == "flex-start"):
                end = "expired"  # a run over at its end (flex-start suspended): no preemption
            out.append(Lifetime(slot, zone, t.accelerator, t.mode, t.active_at, now, end, t.api))
            t.active_at = None

    def _races(
        self, out: list[Record], won: list[Transition], now: float, groups: Mapping[str, str]
    ) -> None:
        if not groups:
            return
        for record in won:
            group = groups.get(record.slot)
            if group is None:
                continue
            losers = []
            for (zone, slot), t in self.tracks.items():
                if slot == record.slot or groups.get(slot) != group:
                    continue
                if t.phase in WAITING_STATES and t.queued_at is not None:
                    losers.append((slot, zone, now - t.queued_at))
                    t.lost_race = group
            out.append(RaceWon(group, record.slot, record.zone, now, tuple(sorted(losers))))

    def refusals(
        self,
        errors: Mapping[str, tuple[float, str]],
        absent: Mapping[str, tuple[str, str, str, str]],
        now: float,
    ) -> list[Record]:
        """Create refusals among the controller's action errors.

        ``errors``: action key (``zone/slot:cloud``) -> (not_before, message), from memory;
        ``absent``: action key -> (slot, accelerator, mode, api) for cloud keys whose request
        does not exist (so the failing action was a create). A failure is new when its
        not_before changed since the last look."""
        out: list[Record] = []
        for key, (not_before, message) in errors.items():
            if self.failures_seen.get(key) == not_before:
                continue
            self.failures_seen[key] = not_before
            if key not in absent:
                continue
            slot, accelerator, mode, api = absent[key]
            zone = key.split("/", 1)[0]
            out.append(
                Refusal(
                    slot,
                    zone,
                    accelerator,
                    mode,
                    now,
                    code_of(message),
                    message,
                    queue_closed(message),
                    api,
                )
            )
        for key in [k for k in self.failures_seen if k not in errors]:
            del self.failures_seen[key]
        return out


def open_samples(
    tracks: Mapping[tuple[str, str], RequestTrack], now: float, *, since: float | None = None
) -> dict[Place, Open]:
    """What the tracked requests still have in progress at ``now``, per place: every request
    queued as a censored wait of ``now - queued_at`` (queued at or after ``since``, as stored
    waits are filtered), and the READY time so far of every node still alive."""
    waiting: dict[Place, list[float]] = {}
    held: dict[Place, float] = {}
    for (zone, _slot), t in tracks.items():
        place = (zone, t.accelerator, t.mode, t.api)
        if t.queued_at is not None and (since is None or t.queued_at >= since):
            waiting.setdefault(place, []).append(max(0.0, now - t.queued_at))
        if t.active_at is not None:
            held[place] = held.get(place, 0.0) + max(0.0, now - t.active_at)
    return {
        place: Open(waiting=tuple(sorted(waiting.get(place, ()))), held=held.get(place, 0.0))
        for place in sorted(waiting.keys() | held.keys())
    }


def from_event(
    event: Mapping[str, Any],
    at: float,
    slots: Mapping[str, tuple[str, str, str, str]],
    state_of: StateOf | None = None,
) -> Seen | Refusal | None:
    """One event-log record as a look (``qr.state``) or a refusal (a failed create); ``slots``
    maps slot name -> (zone, accelerator, mode, api) from the current intent (the log does not
    carry accelerator and mode, nor the zone of a failed action; a ``qr.state`` record says its
    API since it said ``request``, an older one is the TPU API's). A look's neutral state is
    the record's ``request``; ``state_of`` reads it from the API's word in a record without
    one."""
    slot = event.get("slot")
    if not isinstance(slot, str):
        return None
    home, accelerator, mode, api = slots.get(slot, (UNKNOWN, UNKNOWN, UNKNOWN, DEFAULT_API))
    kind = event.get("kind")
    if kind == "qr.state":
        zone = event.get("zone")
        after = event.get("after")
        if not isinstance(zone, str) or not (after is None or isinstance(after, str)):
            return None
        return Seen(
            slot=slot,
            zone=zone,
            state=after,
            accelerator=accelerator,
            mode=mode,
            request=request_of(event, state_of),
            api=api_of(event),
        )
    if kind == "action.failed" and event.get("action") == "create":
        message = str(event.get("error") or "")
        zone = event.get("zone")
        return Refusal(
            slot,
            zone if isinstance(zone, str) else home,
            accelerator,
            mode,
            at,
            code_of(message),
            message,
            queue_closed(message),
            api,
        )
    return None


def api_of(event: Mapping[str, Any]) -> str:
    """The API a ``qr.state`` record is about (one written before it said: the TPU API's)."""
    api = event.get("api")
    return api if isinstance(api, str) and api else DEFAULT_API


def request_of(event: Mapping[str, Any], state_of: StateOf | None) -> RequestState | None:
    """The neutral state a ``qr.state`` record tells (None: gone, or not told)."""
    after, told = event.get("after"), event.get("request")
    if not isinstance(after, str):
        return None
    if isinstance(told, str) and told in _STATES:
        return RequestState(told)
    return state_of(after, api_of(event)) if state_of is not None else None


_STATES = frozenset(s.value for s in RequestState)
