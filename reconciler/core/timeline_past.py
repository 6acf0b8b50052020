"""What each slot's request did over time, from the capacity history's transitions: the spans
it was queued, held or dead (suspended, failed, being deleted: still counted, no capacity) and
the moments it was preempted or its flex-start run ended.

The history store keeps every change of a request's state (``core.history.Transition``, the
``transitions`` table: slot, zone, before, after, at); ``spans`` folds them, oldest first, into
per-(zone, slot) ``Span`` and ``Mark`` values for the lab's timeline (``core.timeline``). A
request seen in one state stays in it until the next transition of the same slot and zone; the
last one stays open (``end`` None) for the caller to close with what the snapshot says now.

May: compute. May not: do I/O, read a clock, or draw.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from reconciler.core.history import LOST, StateOf, Transition
from reconciler.model.capacity import DEFAULT_API, WAITING_STATES, WON_STATES, RequestState
from reconciler.model.vocabulary import FLEX_START

HELD: Final = "held"  # PROVISIONING or ACTIVE: the capacity is there
QUEUED_SPAN: Final = "queued"  # in the cloud's queue, waiting for capacity
WAITING: Final = "waiting"  # the create held back for a quota or a member's cap (not sent)
DEAD: Final = "dead"  # suspended, failed or being deleted: counted, no capacity
EST_QUEUED: Final = "queued (estimate)"  # sent, the history's expected queue wait
EST_HELD: Final = "held (estimate)"  # from the estimated start to its end

PREEMPTION: Final = "preempted"
RUN_ENDED: Final = "run ended"  # a run's end (flex-start suspended, ENDED), not a preemption
FLEX: Final = FLEX_START


@dataclass(frozen=True, slots=True)
class Span:
    """``kind`` from ``start`` to ``end`` (None: still going on at the end of what is known)."""

    kind: str
    start: float
    end: float | None = None
    estimate: bool = False


@dataclass(frozen=True, slots=True)
class Mark:
    """A moment on a slot's row (``until``: a window's end, e.g. maintenance)."""

    kind: str
    at: float
    until: float | None = None
    text: str = ""


#: The snapshot's words for a slot with no request seen (none of them an API's state).
NO_REQUEST: Final = frozenset({"NOT_QUEUED", "UNKNOWN"})
_NEUTRAL: Final = frozenset(s.value for s in RequestState)


def kind_of(
    state: str | None, state_of: StateOf, told: str | None = None, api: str = DEFAULT_API
) -> str | None:
    """The span a request in ``state`` (the word of ``api``, read by ``state_of`` unless a
    status row ``told`` its neutral state) draws (None: no request)."""
    if state is None or state in NO_REQUEST:
        return None
    neutral = RequestState(told) if told in _NEUTRAL else state_of(state, api)
    if neutral in WON_STATES:
        return HELD
    if neutral in WAITING_STATES:
        return QUEUED_SPAN
    return DEAD  # suspending, suspended, failed, ended, deleting, a state not known


@dataclass(frozen=True, slots=True)
class Past:
    """One slot's history in one zone: its spans (the last may be open) and marks."""

    spans: tuple[Span, ...]
    marks: tuple[Mark, ...]
    state: str | None  # its state after the last transition (None: gone)
    accelerator: str = "?"
    mode: str = "?"


def spans(transitions: Iterable[Transition], state_of: StateOf) -> dict[tuple[str, str], Past]:
    """Per (zone, slot): the spans and marks of ``transitions`` (taken oldest first); the
    history keeps each state in its API's word, ``state_of`` reads it with the row's API."""
    open_: dict[tuple[str, str], tuple[str, float] | None] = {}
    done: dict[tuple[str, str], list[Span]] = {}
    marks: dict[tuple[str, str], list[Mark]] = {}
    last: dict[tuple[str, str], str | None] = {}
    kind: dict[tuple[str, str], tuple[str, str]] = {}  # (accelerator, mode) last recorded
    for t in sorted(transitions, key=lambda t: t.at):
        where = (t.zone, t.slot)
        going = open_.get(where)
        after = kind_of(t.after, state_of, api=t.api)
        kind[where] = (t.accelerator, t.mode)
        if going is not None and going[0] == after:
            last[where] = t.after
            continue
        if going is not None:
            done.setdefault(where, []).append(Span(going[0], going[1], t.at))
        lost = state_of(t.after, t.api) if t.after is not None else None
        if t.before is not None and state_of(t.before, t.api) in WON_STATES and lost in LOST:
            ended = t.mode == FLEX or lost == RequestState.ENDED
            marks.setdefault(where, []).append(
                Mark(RUN_ENDED if ended else PREEMPTION, t.at, text=t.after or "")
            )
        open_[where] = (after, t.at) if after is not None else None
        last[where] = t.after
    out: dict[tuple[str, str], Past] = {}
    for where in last.keys() | done.keys():
        going = open_.get(where)
        tail = [Span(going[0], going[1])] if going is not None else []
        out[where] = Past(
            tuple(done.get(where, []) + tail),
            tuple(marks.get(where, [])),
            last.get(where),
            *kind.get(where, ("?", "?")),
        )
    return out
