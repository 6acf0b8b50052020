"""Which intent edit each key asks for: a pure mapping from (key, selected slot, frame, bucket)
to a ``Proposal`` (an ``Edit`` and how it must be confirmed) or a ``Refusal``.

The keys are the earlier TUI's; every one that changes something is an edit of desired.yaml
through ``IntentEditor`` (the app applies it off the UI thread), except ``x`` (close the tmux
window: ``intent.tmux``), ``t`` (the Tailscale key: the secret store) and ``s`` (the
clipboard), which the app does itself.

May: build ``Edit`` values (``Hold``, ``Race``, ...), read a ``Frame``. May not: apply anything,
do I/O, import textual. The edit classes are imported inside the functions that build them:
``intent.edits`` (ruamel) loads off the first frame's path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from reconciler.surfaces.tui._frame import Frame, SlotRow

if TYPE_CHECKING:
    from reconciler.intent.edits import Edit

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


class Refusal(Exception):
    """The key cannot apply to this slot now; the message says why (shown in the footer)."""


def _slot(row: SlotRow | None) -> SlotRow:
    if row is None:
        raise Refusal("no slot selected")
    if not row.managed:
        raise Refusal(f"{row.name} is not in the file (unmanaged); add it to act on it")
    return row


def hold(row: SlotRow | None) -> Proposal:
    from reconciler.intent.edits import Hold

    return Proposal(Hold(_slot(row).name))


def hold_all(frame: Frame) -> Proposal:
    """``a``: hold every managed slot that is not queued and not left to a race group."""
    from reconciler.intent.edits import HoldMany

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
    return Proposal(HoldMany(tuple(names)))


def toggle_bucket(bucket: Sequence[str], row: SlotRow | None) -> tuple[str, ...]:
    name = _slot(row).name
    if name in bucket:
        return tuple(n for n in bucket if n != name)
    return (*bucket, name)


#: States of a slot whose queued resource exists: a race that another candidate wins cancels
#: it (a queued request loses its place in the queue, a running TPU is deleted).
QUEUED: Final = frozenset(
    {
        "ACCEPTED",
        "CREATING",
        "WAITING_FOR_RESOURCES",
        "WAITING",
        "PROVISIONING",
        "ACTIVE",
        "SUSPENDING",
        "SUSPENDED",
    }
)


def at_stake(row: SlotRow) -> bool:
    """A race may cancel this slot: it is held, or its request is queued or running."""
    return (row.want == "held" and row.race_group is None) or row.state in QUEUED


def _stake(row: SlotRow) -> str:
    held = ", held" if row.want == "held" and row.race_group is None else ""
    group = f", in race {row.race_group}" if row.race_group else ""
    return f"{row.name} ({row.state}{held}{group})"


def _candidates(frame: Frame, group: str) -> tuple[str, ...]:
    """The group's candidates as the file says them (the snapshot's until it is parsed)."""
    if frame.desired is not None:
        found = next((g for g in frame.desired.race_groups if g.name == group), None)
        return tuple(found.slots) if found is not None else ()
    race = next((g for g in frame.races if g.name == group), None)
    return race.candidates if race is not None else ()


def race_bucket(frame: Frame, bucket: Sequence[str]) -> Proposal:
    """``B``: the bucket's slots race in ``tui-bucket`` for one winner (replacing its
    candidates when it exists; dropped candidates are released).

    Refused when the bucket mixes accelerator types (one winner of one kind: a v4-8 and a
    v6e-8 are not the same capacity). When a slot in it is held or queued, the race may cancel
    it — a queued request loses its place, a running TPU is deleted, and a running candidate
    wins at once — so ``B`` then asks twice and then y/n, naming those slots and states (as
    ``d`` does for a running TPU)."""
    from reconciler.intent.edits_race import Race

    rows = [r for r in (frame.slot(n) for n in bucket) if r is not None]
    if not rows:
        raise Refusal("the bucket is empty: press b on slots to put them in it")
    kinds: dict[str, list[str]] = {}
    for row in rows:
        kinds.setdefault(row.accelerator or "?", []).append(row.name)
    if len(kinds) > 1:
        mixed = "; ".join(f"{kind}: {', '.join(names)}" for kind, names in kinds.items())
        raise Refusal(
            f"the bucket mixes accelerator types ({mixed}): a race keeps one winner of one "
            "kind; take the others out with b"
        )
    known = [r.name for r in rows]
    edit = Race(BUCKET_GROUP, tuple(known), count=1, exact=True)
    dropped = [c for c in _candidates(frame, BUCKET_GROUP) if c not in known]
    stakes = [r for r in rows if at_stake(r)]
    if not stakes and not dropped:
        return Proposal(edit)
    lines = [f"Race {len(known)} slot(s) in {BUCKET_GROUP} for 1 winner?"]
    if stakes:
        running = [r.name for r in rows if r.running]
        if running:
            lines.append(
                f"{', '.join(running)} already runs: it wins at once, and the race cancels "
                "every other candidate's request."
            )
        else:
            lines.append("The first to reach PROVISIONING wins; the others are cancelled.")
        lines.append("Held or queued now, so it may be cancelled:")
        lines.extend(f"  {_stake(r)}" for r in stakes)
    if dropped:
        lines.append(f"Dropped from {BUCKET_GROUP} and released: {', '.join(dropped)}")
    lines.append("Race? (y/n)")
    cancels = f"it may cancel {len(stakes)} held or queued slot(s)" if stakes else ""
    releases = f"{', '.join(dropped)} are released" if dropped else ""
    why = "; ".join(x for x in (cancels, releases) if x)
    return Proposal(
        edit,
        twice=f"press B again to race the bucket in {BUCKET_GROUP}: {why}",
        ask="\n".join(lines) if stakes else None,
        confirmed=True,
    )


def release(row: SlotRow | None) -> Proposal:
    from reconciler.intent.edits import Release

    slot = _slot(row)
    if slot.want == "released":
        return Proposal(Release(slot.name))
    ask = None
    if slot.running:
        ask = f"{slot.name}'s TPU is {slot.state}: releasing deletes it. Release? (y/n)"
    return Proposal(
        Release(slot.name),
        twice=f"press d again to release {slot.name}",
        ask=ask,
        confirmed=True,
    )


def tmux_open(row: SlotRow | None) -> Proposal:
    from reconciler.intent.edits import Setup

    return Proposal(Setup(_slot(row).name, tmux=True))


def rerun_setup(row: SlotRow | None) -> Proposal:
    from reconciler.intent.edits import Setup

    return Proposal(Setup(_slot(row).name, rerun=True))


def tailscale_on(row: SlotRow | None) -> Proposal:
    from reconciler.intent.edits import Setup

    return Proposal(Setup(_slot(row).name, tailscale=True))


def restart_workload(frame: Frame | None, row: SlotRow | None) -> Proposal:
    """``w``: a slot without a workload is refused at once (the file decides; until it is
    parsed, the snapshot's workload cell)."""
    from reconciler.intent.edits_workload import RestartWorkload

    slot = _slot(row)
    spec = frame.desired.slot(slot.name) if frame is not None and frame.desired else None
    has = spec.workload is not None if spec is not None else bool(slot.workload)
    if not has:
        raise Refusal(
            f"{slot.name} has no workload: nothing to restart (give it one with "
            f"`tpu-reconciler workload set {slot.name} --command ...`)"
        )
    return Proposal(
        RestartWorkload(slot.name),
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
