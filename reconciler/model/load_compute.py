"""What a slot on ``api: compute`` asks that Compute Engine cannot do, refused at its line by
``validate`` rather than at its first create:

- ``mode: reserved`` in a zone without a reservation named in ``settings.reservations``
  (Compute Engine consumes a *named* reservation: ``reservationAffinity`` SPECIFIC);
- ``start_after`` (Compute Engine has no queue that starts a request later; ``start_at`` is
  kept by the controller, which sends the create at that moment).

A released slot asks for nothing and is let be. Pure: values in, problems to ``err``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reconciler.model.accelerators import COMPUTE_API
from reconciler.model.desired import SlotSpec

Err = Callable[..., Any]
Loc = tuple[int | str, ...]


def sibling(loc: Loc, key: str) -> Loc:
    """``key`` of the slot entry whose ``name`` is at ``loc`` (the resolver's place of a
    written slot); a generated slot's place as it is. A key the entry does not write falls
    back to the entry's line where the diagnostics are placed."""
    return (*loc[:-1], key) if loc[0] == "slots" and loc[-1] == "name" else loc


def check_compute(
    slots: Sequence[SlotSpec], where: Mapping[str, Loc], reservations: Mapping[str, str], err: Err
) -> None:
    """Each Compute Engine slot's ``mode: reserved`` without a reservation in its zone, and
    its ``start_after``, at the slot's key (its entry's line when a default or a race group
    gave the value)."""
    for spec in slots:
        if spec.api != COMPUTE_API or spec.want == "released" or spec.name not in where:
            continue
        loc = where[spec.name]

        def at(key: str, loc: Loc = loc) -> Loc:
            return sibling(loc, key)

        if spec.mode == "reserved" and spec.zone not in reservations:
            err(
                at("mode"),
                f"slot {spec.name!r}: mode: reserved on Compute Engine needs the reservation "
                f"to use in {spec.zone}: name it in settings.reservations "
                f"({spec.zone}: NAME)",
            )
        if spec.hold.start_after_seconds is not None:
            err(
                at("start_after"),
                f"slot {spec.name!r}: Compute Engine cannot queue a request to start later: "
                "start_after needs api: tpu; on Compute Engine write start_at, or hold the "
                "slot when you want it",
            )
