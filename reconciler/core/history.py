"""What happened to each queued resource, as history records: the diff of successive looks.

The controller hands the recorder one ``Observation`` (and its memory) per pass; the recorder,
off the controller's hot path, feeds them to a ``Tracker``, which compares each look with the
last one and returns the records worth keeping:

- ``Transition``: a QR changed state (``before``/``after`` None = absent), with the cloud's
  error code and message when the QR carries one;
- ``Wait``: one queued request ended — served (times to PROVISIONING and to ACTIVE) or not
  (deleted or failed while still queued: a *censored* wait);
- ``Lifetime``: a node instance stopped holding capacity (ACTIVE → preempted or deleted);
- ``RaceWon`` / ``LoserDeleted``: a race candidate got capacity while others waited, and how
  long each loser's delete took;
- ``Refusal``: a create the cloud refused (PERMISSION_DENIED = code 7, a closed queue, ...).

The same tracker replays the event log (``qr.state`` and failed creates) to fill a new store
with the past, so live recording and backfill agree on what a wait is.

May: compare values and build records. May not: do I/O, read a clock, or await.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.core.capacity import Open, Place, code_of, queue_closed
from reconciler.core.chip_use import ChipSummary

QUEUED = frozenset({"CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES"})
WON = frozenset({"PROVISIONING", "ACTIVE"})
PREEMPTED = frozenset({"SUSPENDING", "SUSPENDED", "FAILED"})
UNKNOWN = "?"


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


@dataclass(frozen=True, slots=True)
class Lifetime:
    slot: str
    zone: str
    accelerator: str
    mode: str
    ready_at: float
    ended_at: float
    end: str  # "preempted" | "deleted" | "expired" (a flex-start run's end)

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
    """One QR as a look saw it (``state`` None: gone)."""

    slot: str
    zone: str
    state: str | None
    accelerator: str = UNKNOWN
    mode: str = UNKNOWN
    code: int | None = None
    message: str = ""


@dataclass(slots=True)
class QRTrack:
    state: str
    accelerator: str
    mode: str
    queued_at: float | None = None
    provisioning_at: float | None = None
    active_at: float | None = None
    deleting_at: float | None = None
    lost_race: str | None = None  # the group it lost, until its delete finishes


@dataclass(slots=True)
class Tracker:
    """Per-QR memory between looks. Deterministic: the same looks give the same records."""

    tracks: dict[tuple[str, str], QRTrack] = field(default_factory=dict)
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
        """Records for one look. With ``complete``, every tracked QR in ``gone_zones`` (zones
        the look saw fully) that is not in ``seen`` (or in ``present``, the (zone, name) of
        every QR the look saw, when ``seen`` holds only the changed ones) is gone."""
        groups = groups or {}
        out: list[Record] = []
        keys: set[tuple[str, str]] = set() if present is None else present
        for s in seen:
            if present is None:
                keys.add((s.zone, s.slot))
            self._update(s, now, out)
        if complete:
            known = set(gone_zones)
            for key in [k for k in self.tracks if k not in keys and k[0] in known]:
                self._update(Seen(slot=key[1], zone=key[0], state=None), now, out)
        self._races(out, now, groups)
        return out

    def _update(self, s: Seen, now: float, out: list[Record]) -> None:
        key = (s.zone, s.slot)
        track = self.tracks.get(key)
        before = track.state if track else None
        if before == s.state:
            return
        accelerator = s.accelerator if s.accelerator != UNKNOWN or not track else track.accelerator
        mode = s.mode if s.mode != UNKNOWN or not track else track.mode
        out.append(
            Transition(s.slot, s.zone, accelerator, mode, before, s.state, now, s.code, s.message)
        )
        if s.state is None:
            if track is not None:
                self._ended(key, track, now, out, deleted=True)
                if track.lost_race is not None and track.deleting_at is not None:
                    out.append(
                        LoserDeleted(track.lost_race, s.slot, s.zone, now - track.deleting_at)
                    )
                del self.tracks[key]
            return
        if track is None or before in PREEMPTED or before == "DELETING":
            if track is not None:
                self._ended(key, track, now, out, deleted=False)
            track = QRTrack(state=s.state, accelerator=accelerator, mode=mode)
            if s.state in QUEUED:
                track.queued_at = now
            self.tracks[key] = track
        track.state, track.accelerator, track.mode = s.state, accelerator, mode
        if s.state == "PROVISIONING" and track.provisioning_at is None:
            track.provisioning_at = now
        elif s.state == "ACTIVE" and track.active_at is None:
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
                    )
                )
                track.queued_at = None  # counted
        elif s.state in PREEMPTED or s.state == "DELETING":
            self._ended(key, track, now, out, deleted=s.state == "DELETING")
            if s.state == "DELETING":
                track.deleting_at = now

    def _ended(
        self, key: tuple[str, str], t: QRTrack, now: float, out: list[Record], *, deleted: bool
    ) -> None:
        """The request stopped waiting or the instance stopped holding capacity."""
        zone, slot = key
        if t.queued_at is not None:
            out.append(
                Wait(slot, zone, t.accelerator, t.mode, t.queued_at, None, None, now - t.queued_at)
            )
            t.queued_at = None
        if t.active_at is not None:
            end = "deleted" if deleted else "preempted"
            if end == "preempted" and t.mode == "flex-start":
                end = "expired"  # a flex-start run suspended at its end: no preemption
            out.append(Lifetime(slot, zone, t.accelerator, t.mode, t.active_at, now, end))
            t.active_at = None

    def _races(self, out: list[Record], now: float, groups: Mapping[str, str]) -> None:
        if not groups:
            return
        for record in list(out):
            if not isinstance(record, Transition) or record.after not in WON:
                continue
            if record.before in WON:
                continue
            group = groups.get(record.slot)
            if group is None:
                continue
            losers = []
            for (zone, slot), t in self.tracks.items():
                if slot == record.slot or groups.get(slot) != group:
                    continue
                if t.state in QUEUED and t.queued_at is not None:
                    losers.append((slot, zone, now - t.queued_at))
                    t.lost_race = group
            out.append(RaceWon(group, record.slot, record.zone, now, tuple(sorted(losers))))

    def refusals(
        self,
        errors: Mapping[str, tuple[float, str]],
        absent: Mapping[str, tuple[str, str, str]],
        now: float,
    ) -> list[Record]:
        """Create refusals among the controller's action errors.

        ``errors``: action key (``zone/slot:cloud``) -> (not_before, message), from memory;
        ``absent``: action key -> (slot, accelerator, mode) for cloud keys whose QR does not
        exist (so the failing action was a create). A failure is new when its not_before
        changed since the last look."""
        out: list[Record] = []
        for key, (not_before, message) in errors.items():
            if self.failures_seen.get(key) == not_before:
                continue
            self.failures_seen[key] = not_before
            if key not in absent:
                continue
            slot, accelerator, mode = absent[key]
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
                )
            )
        for key in [k for k in self.failures_seen if k not in errors]:
            del self.failures_seen[key]
        return out


def open_samples(
    tracks: Mapping[tuple[str, str], QRTrack], now: float, *, since: float | None = None
) -> dict[Place, Open]:
    """What the tracked QRs still have in progress at ``now``, per place: every request still
    queued as a censored wait of ``now - queued_at`` (queued at or after ``since``, as stored
    waits are filtered), and the READY time so far of every node still alive."""
    waiting: dict[Place, list[float]] = {}
    held: dict[Place, float] = {}
    for (zone, _slot), t in tracks.items():
        place = (zone, t.accelerator, t.mode)
        if t.queued_at is not None and (since is None or t.queued_at >= since):
            waiting.setdefault(place, []).append(max(0.0, now - t.queued_at))
        if t.active_at is not None:
            held[place] = held.get(place, 0.0) + max(0.0, now - t.active_at)
    return {
        place: Open(waiting=tuple(sorted(waiting.get(place, ()))), held=held.get(place, 0.0))
        for place in sorted(waiting.keys() | held.keys())
    }


def from_event(
    event: Mapping[str, Any], at: float, slots: Mapping[str, tuple[str, str, str]]
) -> Seen | Refusal | None:
    """One event-log record as a look (``qr.state``) or a refusal (a failed create); ``slots``
    maps slot name -> (zone, accelerator, mode) from the current intent (the log does not carry
    accelerator and mode, nor the zone of a failed action)."""
    slot = event.get("slot")
    if not isinstance(slot, str):
        return None
    home, accelerator, mode = slots.get(slot, (UNKNOWN, UNKNOWN, UNKNOWN))
    kind = event.get("kind")
    if kind == "qr.state":
        zone = event.get("zone")
        after = event.get("after")
        if not isinstance(zone, str) or not (after is None or isinstance(after, str)):
            return None
        return Seen(slot=slot, zone=zone, state=after, accelerator=accelerator, mode=mode)
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
        )
    return None
