"""What a slot on ``api: compute`` asks that Compute Engine cannot do, refused at its line by
``validate`` rather than at its first create:

- ``mode: reserved`` in a zone without a reservation named in ``settings.reservations``
  (Compute Engine consumes a *named* reservation: ``reservationAffinity`` SPECIFIC);
- ``start_after`` (Compute Engine has no queue that starts a request later; ``start_at`` is
  kept by the controller, which sends the create at that moment).

A released slot asks for nothing and is let be. Pure: values in, problems to ``err``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reconciler.model.accelerators import COMPUTE_API
from reconciler.model.desired import SlotSpec
from reconciler.model.load_ends import Err
from reconciler.model.load_salvage import Loc
from reconciler.model.vocabulary import RELEASED, RESERVED


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
        if spec.api != COMPUTE_API or spec.want == RELEASED or spec.name not in where:
            continue
        loc = where[spec.name]
        if spec.mode == RESERVED and spec.zone not in reservations:
            err(
                sibling(loc, "mode"),
                f"slot {spec.name!r}: mode: reserved on Compute Engine needs the reservation "
                f"to use in {spec.zone}: name it in settings.reservations "
                f"({spec.zone}: NAME)",
            )
        if spec.hold.start_after_seconds is not None:
            err(
                sibling(loc, "start_after"),
                f"slot {spec.name!r}: Compute Engine cannot queue a request to start later: "
                "start_after needs api: tpu; on Compute Engine write start_at, or hold the "
                "slot when you want it",
            )
