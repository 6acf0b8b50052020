"""Intent edits for control over the controller: ``suspend`` and ``resume`` (all of it), and
``pause`` (one slot).

Same contract as ``intent.edits`` (change the round-trip tree only; the engine validates and
writes). ``Suspend`` sets ``settings.suspend: true``: the controller keeps observing, planning
and reporting and takes no action at all. ``Resume`` sets it back to ``false`` (the key is kept,
so the file says plainly that the controller acts). Neither is destructive by itself; what the
controller does once resumed is what the plan already shows. ``Pause`` sets a slot's own
``paused: true`` (``resume``: ``false``): nothing is created, deleted or set up for that slot
while what it holds stays held.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from reconciler.intent.edits import Edit, EditContext, child_map, set_key, slot_entry


def _set_suspend(ctx: EditContext, value: bool) -> None:
    settings = child_map(ctx.root, "settings")
    if set_key(settings, "suspend", value):
        ctx.note(
            "settings.suspend: true (the controller observes and plans, and does nothing)"
            if value
            else "settings.suspend: false (the controller acts on its plan again)"
        )
    else:
        ctx.note("the controller is already " + ("suspended" if value else "not suspended"))


@dataclass(frozen=True, slots=True)
class Suspend(Edit):
    """``settings.suspend: true``: the controller observes and plans, and does nothing."""

    kind: ClassVar[str] = "suspend"
    lab_wide: ClassVar[bool] = True

    def apply(self, ctx: EditContext) -> None:
        _set_suspend(ctx, True)


@dataclass(frozen=True, slots=True)
class Resume(Edit):
    """``settings.suspend: false``: the controller acts on its plan again."""

    kind: ClassVar[str] = "resume"
    lab_wide: ClassVar[bool] = True

    def apply(self, ctx: EditContext) -> None:
        _set_suspend(ctx, False)


@dataclass(frozen=True, slots=True)
class Pause(Edit):
    """Slot ``name``'s ``paused: true`` (``resume``: ``paused: false``)."""

    kind: ClassVar[str] = "pause"
    name: str
    resume: bool = False

    def apply(self, ctx: EditContext) -> None:
        entry = slot_entry(ctx, self.name)
        ctx.about(self.name)
        paused = not self.resume
        if set_key(entry, "paused", paused):
            ctx.note(
                f"{self.name!r}: paused: true (nothing is created, deleted or set up for it; "
                "what it holds stays held)"
                if paused
                else f"{self.name!r}: paused: false (the controller acts on it again)"
            )
        else:
            ctx.note(f"{self.name!r} is already " + ("paused" if paused else "not paused"))
