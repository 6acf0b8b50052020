"""Intent edits for control over the controller: ``suspend`` and ``resume``.

Same contract as ``intent.edits`` (change the round-trip tree only; the engine validates and
writes). ``suspend`` sets ``settings.suspend: true``: the controller keeps observing, planning
and reporting and takes no action at all. ``resume`` sets it back to ``false`` (the key is kept,
so the file says plainly that the controller acts). Neither is destructive by itself; what the
controller does once resumed is what the plan already shows.
"""

from __future__ import annotations

from collections.abc import Callable

from reconciler.intent.edits import EditContext, child_map, set_key


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


def suspend(ctx: EditContext) -> None:
    _set_suspend(ctx, True)


def resume(ctx: EditContext) -> None:
    _set_suspend(ctx, False)


EDITS: dict[str, Callable[..., None]] = {"suspend": suspend, "resume": resume}
