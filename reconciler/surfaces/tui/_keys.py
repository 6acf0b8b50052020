"""Which intent edit each key asks for: a pure mapping from (key, selected slot, frame, bucket)
to a ``Proposal`` (an ``Edit`` and how it must be confirmed) or a ``Refusal``.

The keys are the earlier TUI's; every one that changes something is an edit of desired.yaml
through ``IntentEditor`` (the app applies it off the UI thread), except ``x`` (close the tmux
window: ``intent.tmux``), ``t`` (the Tailscale key: the secret store) and ``s`` (the
clipboard), which the app does itself.

May: build ``Edit`` values, read a ``Frame``. May not: apply anything, do I/O, import textual.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from reconciler.surfaces.tui._frame import Frame, SlotRow

if TYPE_CHECKING:
    from reconciler.intent.engine import Edit

#: The race group ``B`` creates or replaces.
BUCKET_GROUP: Final = "tui-bucket"
#: Seconds within which the second press of a press-twice key counts.
TWICE_WINDOW: Final = 3.0


@dataclass(frozen=True, slots=True)
class Proposal:
    """An edit to apply. ``twice``: the prompt after the first press (the second press
    applies). ``ask``: a yes/no question before applying (a running TPU would be deleted).
    ``confirmed``: the edit may make the controller delete capacity, and the user agreed by
    the double press (or the question)."""

    edit: Edit
    twice: str | None = None
    ask: str | None = None
    confirmed: bool = False


def _edit(kind: str, args: dict[str, Any]) -> Edit:
    from reconciler.intent.engine import Edit  # the engine loads off the first frame's path

    return Edit(kind, args)


class Refusal(Exception):
    """The key cannot apply to this slot now; the message says why (shown in the footer)."""


def _slot(row: SlotRow | None) -> SlotRow:
    if row is None:
        raise Refusal("no slot selected")
    if not row.managed:
        raise Refusal(f"{row.name} is not in the file (unmanaged); add it to act on it")
    return row


def hold(row: SlotRow | None) -> Proposal:
    return Proposal(_edit("hold", {"name": _slot(row).name}))


def hold_all(frame: Frame) -> Proposal:
    """``a``: hold every managed slot that is not queued and not left to a race group."""
    names = [
        s.name
        for s in frame.slots
        if s.managed
        and not s.generated
        and s.race_group is None
        and s.want != "held"
        and s.state in ("NOT_QUEUED", "UNKNOWN")
    ]
    if not names:
        raise Refusal("every slot is already queued or held (race candidates are left alone)")
    return Proposal(_edit("hold_many", {"names": names}))


def toggle_bucket(bucket: Sequence[str], row: SlotRow | None) -> tuple[str, ...]:
    name = _slot(row).name
    if name in bucket:
        return tuple(n for n in bucket if n != name)
    return (*bucket, name)


def race_bucket(frame: Frame, bucket: Sequence[str]) -> Proposal:
    """``B``: the bucket's slots race in ``tui-bucket`` for one winner (replacing its
    candidates when it exists; dropped candidates are released, so that asks twice)."""
    known = [n for n in bucket if frame.slot(n) is not None]
    if not known:
        raise Refusal("the bucket is empty: press b on slots to put them in it")
    edit = _edit("race", {"group": BUCKET_GROUP, "slots": known, "count": 1, "exact": True})
    group = next((g for g in frame.races if g.name == BUCKET_GROUP), None)
    dropped = [c for c in group.candidates if c not in known] if group else []
    if dropped:
        return Proposal(
            edit,
            twice=f"press B again to replace {BUCKET_GROUP}: {', '.join(dropped)} are released",
            confirmed=True,
        )
    return Proposal(edit)


def release(row: SlotRow | None) -> Proposal:
    slot = _slot(row)
    if slot.want == "released":
        return Proposal(_edit("release", {"name": slot.name}))
    ask = None
    if slot.running:
        ask = f"{slot.name}'s TPU is {slot.state}: releasing deletes it. Release? (y/n)"
    return Proposal(
        _edit("release", {"name": slot.name}),
        twice=f"press d again to release {slot.name}",
        ask=ask,
        confirmed=True,
    )


def tmux_open(row: SlotRow | None) -> Proposal:
    return Proposal(_edit("setup", {"name": _slot(row).name, "tmux": True}))


def rerun_setup(row: SlotRow | None) -> Proposal:
    return Proposal(_edit("setup", {"name": _slot(row).name, "rerun": True}))


def tailscale_on(row: SlotRow | None) -> Proposal:
    return Proposal(_edit("setup", {"name": _slot(row).name, "tailscale": True}))


def restart_workload(row: SlotRow | None) -> Proposal:
    from reconciler.errors import EditRejected

    slot = _slot(row)
    try:
        edit = _edit("restart_workload", {"name": slot.name})
    except EditRejected:  # this install has no workload edits
        raise Refusal("workloads are not available in this version") from None
    return Proposal(
        edit,
        twice=f"press w again to restart the workload on {slot.name}",
    )


def close_tmux(row: SlotRow | None) -> str:
    """``x``: the prompt after the first press (the second closes the window)."""
    slot = _slot(row)
    if not slot.tmux_open:
        raise Refusal(f"{slot.name} has no open tmux window")
    return f"press x again to close the tmux window {slot.tmux_target or slot.name}"


def result_line(status: str, notes: Sequence[str], slots: Sequence[str]) -> str:
    """The footer's one line for an applied edit."""
    what = "; ".join(notes) if notes else "done"
    if status == "unchanged":
        return f"nothing changed: {what}"
    if status == "exists":
        return f"already done: {what}"
    return f"{what} — the controller acts at its next pass"
