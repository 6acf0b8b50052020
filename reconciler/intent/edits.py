"""The intent edits themselves: each changes a ``Doc`` (desired.yaml being edited) in place.

May: change the round-trip tree, read the resolved ``Desired`` of the text before the edit,
refuse with ``EditRejected``. May not: do I/O, validate the whole result (the engine runs the
controller's own ``parse_desired`` on it afterwards), know who asked.

Every edit is a frozen dataclass deriving from ``Edit``: its fields are its arguments (the CLI,
MCP and TUI build it, so mypy checks every surface; the MCP tools take their parameters from
these fields), ``kind`` names it in results, the audit log and operation records, and
``apply(ctx)`` makes the change, explaining what it did with ``ctx.note(...)`` in words a user
reads. Semantics worth knowing:

- ``Hold`` / ``Release`` set ``want`` on a slot in ``slots:``. A race candidate is taken *out*
  of its group first (a candidate cannot carry ``want``); the group's count is lowered only as
  far as its remaining candidates force, and an emptied group is removed. Holding a candidate
  therefore never gives up a winner; releasing one may make the group race again.
- ``RemoveSlot`` deletes the slot's entry (and its race memberships): the slot becomes
  *unmanaged*, never deleted by the controller, unless ``settings.prune`` is on.
- ``Race`` (in ``edits_race``, with ``RaceZones``) creates or updates a race group. ``exact``
  replaces its candidates (removed ones get ``want: released``); otherwise the named slots are
  added to the existing candidates. A candidate's ``want`` line goes, but its comment is kept
  (on the line before), and a note names the comments about that slot that may no longer be
  true.
- ``Setup`` sets per-slot setup flags; ``rerun`` bumps the slot's setup ``generation``.
- ``TmuxAll`` turns tmux on in ``defaults.setup``; slots that say ``tmux: false`` keep it.
- Generated slots (from ``generate:``) have no entry of their own: per-slot edits of them are
  refused with the generator's line.

Anything that can make the controller delete capacity (release, lower a race count, drop a
candidate, remove a slot while ``prune`` is on) calls ``ctx.destructive(...)``, which refuses
unless the caller confirmed.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from reconciler.errors import EditRejected, NeedsConfirmation, UnsafeName
from reconciler.intent.roundtrip import (
    Doc,
    OutsideWindow,
    append_item,
    put_trailing,
    take_trailing,
)
from reconciler.model import flex, names
from reconciler.model.desired import MAX_SLICES, Desired
from reconciler.model.durations import parse_duration
from reconciler.model.messages import choices_text
from reconciler.model.vocabulary import (
    APIS,
    DEFAULT_MODE,
    DEFAULT_WANT,
    HELD,
    MODES,
    RELEASED,
    WANTS,
)


@dataclass
class EditContext:
    doc: Doc
    desired: Desired  # the file before this edit, resolved
    confirmed: bool = False
    notes: list[str] = field(default_factory=list)
    slots: list[str] = field(default_factory=list)  # the slots the edit is about

    def note(self, text: str) -> None:
        self.notes.append(text)

    def about(self, *slots: str) -> None:
        self.slots.extend(slots)

    def destructive(self, what: str) -> None:
        if not self.confirmed:
            raise NeedsConfirmation(f"{what}; confirm to go ahead (MCP: confirm=true, CLI: --yes)")

    @property
    def root(self) -> CommentedMap:
        root = self.doc.tree
        if not isinstance(root, CommentedMap):
            raise EditRejected("desired.yaml is not a mapping")
        return root


# --- tree helpers ------------------------------------------------------------------------------


def set_key(m: CommentedMap, key: str, value: Any) -> bool:
    """Set ``m[key]``; a new key goes last with the comments after ``m`` kept after it."""
    if key in m:
        if m[key] == value and type(m[key]) is type(value):
            return False
        m[key] = value
        return True
    tail = take_trailing(m) if m and not m.fa.flow_style() else None
    m[key] = value
    put_trailing(m, tail)
    return True


def del_key(m: CommentedMap, key: str) -> None:
    last = list(m)[-1] == key
    tail = take_trailing(m) if last and not m.fa.flow_style() else None
    del m[key]
    if m:
        put_trailing(m, tail)


def child_map(m: CommentedMap, key: str) -> CommentedMap:
    """``m[key]`` as a mapping, created empty when absent or null."""
    value = m.get(key)
    if isinstance(value, CommentedMap):
        return value
    if value is not None:
        raise EditRejected(f"{key!r} must be a mapping to be edited")
    new = CommentedMap()
    set_key(m, key, new)
    return new


def child_seq(m: CommentedMap, key: str) -> CommentedSeq:
    value = m.get(key)
    if isinstance(value, CommentedSeq):
        return value
    if value is not None:
        raise EditRejected(f"{key!r} must be a list to be edited")
    new = CommentedSeq()
    set_key(m, key, new)
    return new


def check(check: Callable[[object], str], value: object) -> str:
    try:
        return check(value)
    except UnsafeName as e:
        raise EditRejected(str(e)) from None


# --- finding slots and groups ----------------------------------------------------------------


def unknown_slot(ctx: EditContext, name: str) -> EditRejected:
    known = [s.name for s in ctx.desired.slots]
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return EditRejected(f"unknown slot {name!r} in {ctx.doc.source}{hint}")


def slot_index(ctx: EditContext, name: str) -> int:
    """Index of ``name`` in ``slots:``; refuses unknown and generated slots."""
    check(names.check_name, name)
    for i, entry in enumerate(ctx.root.get("slots") or []):
        if isinstance(entry, dict) and entry.get("name") == name:
            return i
    spec = ctx.desired.slot(name)
    if spec is not None and spec.generated:
        raise EditRejected(
            f"slot {name!r} is generated by a 'generate:' entry and has no entry of its own; "
            "change the generator, or replace it with explicit slots"
        )
    if spec is not None and ctx.doc.partial:
        raise OutsideWindow(name)
    raise unknown_slot(ctx, name)


def slot_entry(ctx: EditContext, name: str) -> CommentedMap:
    entry = ctx.root["slots"][slot_index(ctx, name)]
    assert isinstance(entry, CommentedMap)
    return entry


def group_index(ctx: EditContext, group: str) -> int | None:
    for i, entry in enumerate(ctx.root.get("race_groups") or []):
        if isinstance(entry, dict) and entry.get("name") == group:
            return i
    if ctx.doc.partial and any(g.name == group for g in ctx.desired.race_groups):
        raise OutsideWindow(group)
    return None


def leave_group(ctx: EditContext, name: str) -> str | None:
    """Take ``name`` out of its race group; returns the group's name (None: not racing)."""
    spec = ctx.desired.slot(name)
    group = spec.race_group if spec is not None else None
    gi = group_index(ctx, group) if group else None
    if group is None or gi is None:
        return None
    candidates = ctx.root["race_groups"][gi]["slots"]
    ctx.doc.delete_item(("race_groups", gi), "slots", list(candidates).index(name))
    ctx.note(f"{name!r} left race group {group!r}")
    entry = ctx.root["race_groups"][gi]
    left = list(entry["slots"])
    if not left:
        ctx.doc.delete_item((), "race_groups", gi)
        ctx.note(f"race group {group!r} had no other candidate and was removed")
        return group
    count = int(entry.get("count", 1))
    if count > len(left):
        entry["count"] = len(left)
        ctx.note(f"race group {group!r} now wants {len(left)} winner(s) from {left}")
    else:
        ctx.note(f"race group {group!r} still wants {count} winner(s) from {left}")
    return group


# --- the edits ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Edit(ABC):
    """One intent edit: its arguments are the fields of a subclass, ``kind`` its name in
    results and records, ``apply`` the change. The engine applies any ``Edit`` by calling it."""

    kind: ClassVar[str]
    #: A lab-wide setting: in a lab it is the shared desired file's, never a member's
    #: (``intent/lab_files``).
    lab_wide: ClassVar[bool] = False

    @abstractmethod
    def apply(self, ctx: EditContext) -> None:
        """Change ``ctx.doc`` as this edit says; refuse with ``EditRejected``."""

    @property
    def args(self) -> dict[str, Any]:
        """The arguments, by field name (the result's and the audit record's ``args``)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def named(self) -> tuple[str, ...]:
        """The slot and race group names its arguments give (``name``, ``names``, ``group``,
        ``slots``): what it is about."""
        out: list[str] = []
        for key in ("name", "names", "group", "slots"):
            value = self.args.get(key)
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, tuple | list):
                out.extend(v for v in value if isinstance(v, str))
        return tuple(out)

    @property
    def fingerprint(self) -> str:
        """What an operation id is bound to: the kind and the arguments given (None means
        "the default" and is left out)."""
        args = {k: v for k, v in self.args.items() if v is not None}
        canonical = json.dumps([self.kind, args], sort_keys=True, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def summary(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.args.items() if v is not None)
        return f"{self.kind}({args})"


def _set_want(ctx: EditContext, name: str, want: str) -> None:
    slot_index(ctx, name)  # refuse unknown / generated before changing anything
    ctx.about(name)
    leave_group(ctx, name)
    entry = slot_entry(ctx, name)
    if set_key(entry, "want", want):
        ctx.note(f"{name!r}: want: {want}")
    else:
        ctx.note(f"{name!r} already has want: {want}")


@dataclass(frozen=True, slots=True)
class Hold(Edit):
    """``want: held`` for slot ``name`` (a race candidate leaves its group first)."""

    kind: ClassVar[str] = "hold"
    name: str

    def apply(self, ctx: EditContext) -> None:
        _set_want(ctx, self.name, HELD)


@dataclass(frozen=True, slots=True)
class HoldMany(Edit):
    """``Hold`` for each of ``names``, in one edit."""

    kind: ClassVar[str] = "hold_many"
    names: tuple[str, ...]

    def apply(self, ctx: EditContext) -> None:
        for name in self.names:
            Hold(name).apply(ctx)


@dataclass(frozen=True, slots=True)
class Release(Edit):
    """``want: released`` for slot ``name``: destructive unless it says so already."""

    kind: ClassVar[str] = "release"
    name: str

    def apply(self, ctx: EditContext) -> None:
        name = self.name
        slot_index(ctx, name)  # an unknown slot is refused before anything is asked
        spec = ctx.desired.slot(name)
        if spec is None or spec.want != "released":
            ctx.destructive(f"releasing {name!r} makes the controller delete its TPU if it has one")
        _set_want(ctx, name, RELEASED)


@dataclass(frozen=True, slots=True)
class AddSlot(Edit):
    """A new entry in ``slots:``; without a name, ``<mode>-<accelerator>-<zone code>-<index>``
    with the first free index (or ``index``)."""

    kind: ClassVar[str] = "add_slot"
    zone: str
    accelerator: str
    mode: str | None = None
    name: str | None = None
    want: str = DEFAULT_WANT
    index: int | None = None
    runtime_version: str | None = None
    slices: int = 1  # > 1: a multislice slot (written as `slices: N`)
    max_run_duration: str | float | None = None  # mode flex-start only (required there)
    renew: bool | None = None  # mode flex-start only
    api: str | None = None  # "tpu" or "compute" (written only when given: else the default)

    def apply(self, ctx: EditContext) -> None:
        zone, accelerator, mode, want = self.zone, self.accelerator, self.mode, self.want
        if self.api is not None and self.api not in APIS:
            raise EditRejected(f"invalid api {self.api!r}: expected {' or '.join(APIS)}")
        if not 1 <= self.slices <= MAX_SLICES:
            raise EditRejected(f"slices must be 1 to {MAX_SLICES}, not {self.slices}")
        check(names.check_zone, zone)
        check(names.check_accelerator, accelerator)
        defaults = ctx.root.get("defaults")
        default_mode = defaults.get("mode") if isinstance(defaults, dict) else None
        chosen_mode = mode or str(default_mode or DEFAULT_MODE)
        if chosen_mode not in MODES:
            raise EditRejected(f"invalid mode {chosen_mode!r}: expected {choices_text(MODES)}")
        _check_flex(chosen_mode, self.max_run_duration, self.renew)
        if want not in WANTS:
            raise EditRejected(f"invalid want {want!r}: expected {choices_text(WANTS)}")
        if self.runtime_version is not None:
            check(names.check_runtime_version, self.runtime_version)
        taken = {s.name for s in ctx.desired.slots} | {g.name for g in ctx.desired.race_groups}
        taken |= set(ctx.slots)  # added earlier in this edit (a race of one zone on two APIs)
        name, index = self.name, self.index
        if name is None:
            code = ctx.desired.zone_code(zone)
            if index is not None and index < 1:
                raise EditRejected("index must be 1 or more")
            for i in [index] if index is not None else range(1, 100_000):
                try:
                    name = names.slot_name(chosen_mode, accelerator, code, i)
                except UnsafeName as e:
                    raise EditRejected(f"cannot name the slot: {e}; give a name") from None
                if name not in taken:
                    break
        assert name is not None
        check(names.check_name, name)
        if name in taken:
            raise EditRejected(f"slot {name!r} already exists in {ctx.doc.source}")
        entry = CommentedMap()
        entry["name"] = name
        entry["zone"] = zone
        entry["accelerator"] = accelerator
        if mode is not None:
            entry["mode"] = mode
        if self.api is not None:
            entry["api"] = self.api
        if self.runtime_version is not None:
            entry["runtime_version"] = self.runtime_version
        if self.slices > 1:
            entry["slices"] = self.slices
        if self.max_run_duration is not None:
            entry["max_run_duration"] = self.max_run_duration
        if self.renew is not None:
            entry["renew"] = self.renew
        entry["want"] = want
        append_item(child_seq(ctx.root, "slots"), entry)
        ctx.about(name)
        ctx.note(f"added slot {name!r} ({chosen_mode} {accelerator} in {zone}), want: {want}")


def _check_flex(mode: str, max_run: str | float | None, renew: bool | None) -> None:
    """Refuse a new slot's flex-start keys that the schema would refuse (``model/flex``), in
    one line, before anything is written."""
    problem = flex.first_problem(mode, max_run, renew)
    if problem is not None:
        hint = ", e.g. max_run_duration: 6h" if mode == flex.MODE and max_run is None else ""
        raise EditRejected(problem + hint)


@dataclass(frozen=True, slots=True)
class RemoveSlot(Edit):
    """Slot ``name``'s entry removed: it becomes unmanaged (deleted only with ``prune``)."""

    kind: ClassVar[str] = "remove_slot"
    name: str

    def apply(self, ctx: EditContext) -> None:
        name = self.name
        index = slot_index(ctx, name)
        ctx.about(name)
        if ctx.desired.settings.prune:
            ctx.destructive(
                f"settings.prune is on: removing {name!r} makes the controller delete its TPU"
            )
        left = leave_group(ctx, name)
        ctx.doc.delete_item((), "slots", slot_index(ctx, name) if left else index)
        if ctx.desired.settings.prune:
            ctx.note(f"removed {name!r}; settings.prune is on, so the controller deletes its TPU")
        else:
            ctx.note(
                f"removed {name!r}: it is now UNMANAGED. The controller shows its TPU (if any) "
                "and never deletes it; to delete the TPU, release the slot instead"
            )


@dataclass(frozen=True, slots=True)
class Setup(Edit):
    """Slot ``name``'s setup flags (None leaves one as it is); ``rerun`` bumps its setup
    ``generation`` so setup runs again on the same node."""

    kind: ClassVar[str] = "setup"
    name: str
    bootstrap: bool | None = None
    tailscale: bool | None = None
    tmux: bool | None = None
    rerun: bool = False
    at_boot: bool | None = None  # the scripts in the node's startup-script metadata

    def apply(self, ctx: EditContext) -> None:
        name = self.name
        entry = slot_entry(ctx, name)
        ctx.about(name)
        flags = {"bootstrap": self.bootstrap, "tailscale": self.tailscale, "tmux": self.tmux}
        flags["at_boot"] = self.at_boot
        if all(v is None for v in flags.values()) and not self.rerun:
            raise EditRejected("nothing to change: give a setup flag or ask for a re-run")
        block = child_map(entry, "setup")
        for key, value in flags.items():
            if value is not None and set_key(block, key, value):
                ctx.note(f"{name!r}: setup.{key}: {'true' if value else 'false'}")
        if self.rerun:
            generation = int(block.get("generation", 0)) + 1
            set_key(block, "generation", generation)
            ctx.note(
                f"{name!r}: setup.generation: {generation} (setup runs again on the same node)"
            )


@dataclass(frozen=True, slots=True)
class TmuxAll(Edit):
    """``defaults.setup.tmux: true``; slots that say ``tmux: false`` themselves keep it."""

    kind: ClassVar[str] = "tmux_all"
    lab_wide: ClassVar[bool] = True

    def apply(self, ctx: EditContext) -> None:
        block = child_map(child_map(ctx.root, "defaults"), "setup")
        if block.get("tmux") is False:
            set_key(block, "tmux", True)
            ctx.note("defaults.setup.tmux: true (every ACTIVE slot gets a tmux window)")
        else:
            ctx.note("tmux is already on by default")
        opted_out = [s.name for s in ctx.desired.slots if s.setup.tmux is False]
        own = {s.name for s in ctx.desired.slots if not s.generated}
        kept = [n for n in opted_out if n in own and _own_tmux(ctx, n) is False]
        if kept:
            ctx.note(f"slots that say 'tmux: false' keep it (use tmux_open to change): {kept}")


def _own_tmux(ctx: EditContext, name: str) -> object:
    block = slot_entry(ctx, name).get("setup")
    return block.get("tmux") if isinstance(block, dict) else None


@dataclass(frozen=True, slots=True)
class SetPoll(Edit):
    """``settings.poll_interval`` (``interval``) and ``fast_poll_interval``: '30s', '2m' or
    seconds; None leaves one as it is."""

    kind: ClassVar[str] = "set_poll"
    lab_wide: ClassVar[bool] = True
    interval: str | float | None = None
    fast_interval: str | float | None = None

    def apply(self, ctx: EditContext) -> None:
        if self.interval is None and self.fast_interval is None:
            raise EditRejected("nothing to change: give an interval or a fast interval")
        settings = child_map(ctx.root, "settings")
        pairs = (("poll_interval", self.interval), ("fast_poll_interval", self.fast_interval))
        for key, value in pairs:
            if value is None:
                continue
            try:
                parse_duration(value)
            except ValueError as e:
                raise EditRejected(f"settings.{key}: {e}") from None
            if set_key(settings, key, value):
                ctx.note(f"settings.{key}: {value}")
