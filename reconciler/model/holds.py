"""Resolving the time and pause keys of slots, generators and race groups into ``HoldSpec``.

A key a slot (or generator) sets itself wins; otherwise a race candidate takes its group's.
``paused`` is true when the slot or its group says so. Problems come back as ``(key,
message)`` for the loader to place at ``file:line:col``. Pure.
"""

from __future__ import annotations

from typing import Protocol

from reconciler.model.desired import NO_HOLD, HoldSpec


class HoldKeys(Protocol):
    """What ``SlotModel``, ``GeneratorModel`` and ``RaceGroupModel`` have in common."""

    @property
    def start_at(self) -> float | None: ...
    @property
    def start_after(self) -> float | None: ...
    @property
    def hold_for(self) -> float | None: ...
    @property
    def hold_until(self) -> float | None: ...
    @property
    def paused(self) -> bool: ...


def problems(keys: HoldKeys) -> list[tuple[str, str]]:
    """Rules one block of keys must keep by itself."""
    out = []
    if keys.start_at is not None and keys.start_after is not None:
        out.append(("start_after", "give start_at or start_after, not both"))
    if (
        keys.start_at is not None
        and keys.hold_until is not None
        and keys.hold_until <= keys.start_at
    ):
        out.append(("hold_until", "hold_until is not after start_at: it would never be held"))
    return out


def resolve_hold(own: HoldKeys, group: HoldKeys | None) -> HoldSpec:
    def pick(name: str) -> float | None:
        value: float | None = getattr(own, name)
        if value is None and group is not None:
            value = getattr(group, name)
        return value

    start_at, start_after = own.start_at, own.start_after
    if start_at is None and start_after is None and group is not None:
        start_at, start_after = group.start_at, group.start_after
    spec = HoldSpec(
        start_at=start_at,
        start_after_seconds=int(start_after) if start_after else None,
        hold_for_seconds=pick("hold_for"),
        hold_until=pick("hold_until"),
        paused=own.paused or (group is not None and group.paused),
    )
    return NO_HOLD if spec == NO_HOLD else spec
