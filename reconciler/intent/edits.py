"""The intent edits themselves: each changes a ``Doc`` (desired.yaml being edited) in place.

May: change the round-trip tree, read the resolved ``Desired`` of the text before the edit,
refuse with ``EditRejected``. May not: do I/O, validate the whole result (``intent.py`` runs
the controller's own ``parse_desired`` on it afterwards), know who asked.

Every edit is a plain function ``(ctx, **args) -> None`` registered in ``EDITS`` under its kind;
it explains what it did with ``ctx.note(...)`` in words a user reads. Semantics worth knowing:

- ``hold`` / ``release`` set ``want`` on a slot in ``slots:``. A race candidate is taken *out*
  of its group first (a candidate cannot carry ``want``); the group's count is lowered only as
  far as its remaining candidates force, and an emptied group is removed. Holding a candidate
  therefore never gives up a winner; releasing one may make the group race again.
- ``remove_slot`` deletes the slot's entry (and its race memberships): the slot becomes
  *unmanaged*, never deleted by the controller, unless ``settings.prune`` is on.
- ``race`` creates or updates a race group. ``exact`` replaces its candidates (removed ones get
  ``want: released``); otherwise the named slots are added to the existing candidates. A
  candidate's ``want`` line goes, but its comment is kept (on the line before), and a note
  names the comments about that slot that may no longer be true.
- ``setup`` sets per-slot setup flags; ``rerun`` bumps the slot's setup ``generation``.
- ``tmux_all`` turns tmux on in ``defaults.setup``; slots that say ``tmux: false`` keep it.
- Generated slots (from ``generate:``) have no entry of their own: per-slot edits of them are
  refused with the generator's line.

Anything that can make the controller delete capacity (release, lower a race count, drop a
candidate, remove a slot while ``prune`` is on) calls ``ctx.destructive(...)``, which refuses
unless the caller confirmed.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from reconciler.errors import EditRejected, NeedsConfirmation, UnsafeName
from reconciler.intent.roundtrip import Doc, append_item, put_trailing, take_trailing
from reconciler.model import names
from reconciler.model.desired import Desired
from reconciler.model.durations import parse_duration


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


def _check(check: Callable[[object], str], value: object) -> str:
    try:
        return check(value)
    except UnsafeName as e:
        raise EditRejected(str(e)) from None


# --- finding slots and groups ----------------------------------------------------------------


def _unknown(ctx: EditContext, name: str) -> EditRejected:
    known = [s.name for s in ctx.desired.slots]
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return EditRejected(f"unknown slot {name!r} in {ctx.doc.source}{hint}")


def slot_index(ctx: EditContext, name: str) -> int:
    """Index of ``name`` in ``slots:``; refuses unknown and generated slots."""
    _check(names.check_name, name)
    for i, entry in enumerate(ctx.root.get("slots") or []):
        if isinstance(entry, dict) and entry.get("name") == name:
            return i
    spec = ctx.desired.slot(name)
    if spec is not None and spec.generated:
        raise EditRejected(
            f"slot {name!r} is generated by a 'generate:' entry and has no entry of its own; "
            "change the generator, or replace it with explicit slots"
        )
    raise _unknown(ctx, name)


def slot_entry(ctx: EditContext, name: str) -> CommentedMap:
    entry = ctx.root["slots"][slot_index(ctx, name)]
    assert isinstance(entry, CommentedMap)
    return entry


def group_index(ctx: EditContext, group: str) -> int | None:
    for i, entry in enumerate(ctx.root.get("race_groups") or []):
        if isinstance(entry, dict) and entry.get("name") == group:
            return i
    return None


def _leave_group(ctx: EditContext, name: str) -> str | None:
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


def _set_want(ctx: EditContext, name: str, want: str) -> None:
    slot_index(ctx, name)  # refuse unknown / generated before changing anything
    ctx.about(name)
    _leave_group(ctx, name)
    entry = slot_entry(ctx, name)
    if set_key(entry, "want", want):
        ctx.note(f"{name!r}: want: {want}")
    else:
        ctx.note(f"{name!r} already has want: {want}")


def hold(ctx: EditContext, *, name: str) -> None:
    _set_want(ctx, name, "held")


def hold_many(ctx: EditContext, *, names: list[str]) -> None:
    for name in names:
        hold(ctx, name=name)


def release(ctx: EditContext, *, name: str) -> None:
    slot_index(ctx, name)  # an unknown slot is refused before anything is asked
    spec = ctx.desired.slot(name)
    if spec is None or spec.want != "released":
        ctx.destructive(f"releasing {name!r} makes the controller delete its TPU if it has one")
    _set_want(ctx, name, "released")


def add_slot(
    ctx: EditContext,
    *,
    zone: str,
    accelerator: str,
    mode: str | None = None,
    name: str | None = None,
    want: str = "held",
    index: int | None = None,
    runtime_version: str | None = None,
) -> None:
    _check(names.check_zone, zone)
    _check(names.check_accelerator, accelerator)
    defaults = ctx.root.get("defaults")
    default_mode = defaults.get("mode", "spot") if isinstance(defaults, dict) else "spot"
    chosen_mode = mode or str(default_mode)
    if chosen_mode not in names.MODE_PREFIX:
        raise EditRejected(f"invalid mode {chosen_mode!r}: expected spot, on-demand or reserved")
    if want not in ("held", "released"):
        raise EditRejected(f"invalid want {want!r}: expected held or released")
    if runtime_version is not None:
        _check(names.check_runtime_version, runtime_version)
    taken = {s.name for s in ctx.desired.slots} | {g.name for g in ctx.desired.race_groups}
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
    _check(names.check_name, name)
    if name in taken:
        raise EditRejected(f"slot {name!r} already exists in {ctx.doc.source}")
    entry = CommentedMap()
    entry["name"] = name
    entry["zone"] = zone
    entry["accelerator"] = accelerator
    if mode is not None:
        entry["mode"] = mode
    if runtime_version is not None:
        entry["runtime_version"] = runtime_version
    entry["want"] = want
    append_item(child_seq(ctx.root, "slots"), entry)
    ctx.about(name)
    ctx.note(f"added slot {name!r} ({chosen_mode} {accelerator} in {zone}), want: {want}")


def remove_slot(ctx: EditContext, *, name: str) -> None:
    index = slot_index(ctx, name)
    ctx.about(name)
    if ctx.desired.settings.prune:
        ctx.destructive(
            f"settings.prune is on: removing {name!r} makes the controller delete its TPU"
        )
    ctx.doc.delete_item((), "slots", slot_index(ctx, name) if _leave_group(ctx, name) else index)
    if ctx.desired.settings.prune:
        ctx.note(f"removed {name!r}; settings.prune is on, so the controller deletes its TPU")
    else:
        ctx.note(
            f"removed {name!r}: it is now UNMANAGED. The controller shows its TPU (if any) and "
            "never deletes it; to delete the TPU, release the slot instead"
        )


def race(ctx: EditContext, *, group: str, slots: list[str], count: int, exact: bool = True) -> None:
    _check(names.check_name, group)
    if not slots:
        raise EditRejected("a race group needs at least one candidate slot")
    if not 0 <= count <= 1000:
        raise EditRejected("count must be between 0 and 1000")
    if ctx.desired.slot(group) is not None:
        raise EditRejected(f"{group!r} is a slot name; choose another name for the race group")
    for name in slots:
        _check(names.check_name, name)
        if ctx.desired.slot(name) is None:
            raise _unknown(ctx, name)
    wanted = list(dict.fromkeys(slots))
    ctx.about(*wanted)
    gi = group_index(ctx, group)
    before = list(ctx.root["race_groups"][gi]["slots"]) if gi is not None else []
    old_count = int(ctx.root["race_groups"][gi].get("count", 1)) if gi is not None else 0
    final = wanted if exact else before + [n for n in wanted if n not in before]
    dropped = [n for n in before if n not in final]
    if count > len(final):
        raise EditRejected(f"count {count} is more than the {len(final)} candidates {final}")
    if gi is not None and count < old_count:
        ctx.destructive(
            f"lowering race group {group!r} from {old_count} to {count} winner(s) makes the "
            "controller delete the extra winners"
        )
    if dropped:
        ctx.destructive(f"dropping {dropped} from race group {group!r} releases them")
    # Candidates leave other groups and lose their own 'want' (the group decides).
    for name in final:
        spec = ctx.desired.slot(name)
        if spec is not None and spec.race_group not in (None, group):
            _leave_group(ctx, name)
    for name in final:
        spec = ctx.desired.slot(name)
        if spec is not None and not spec.generated:
            entry = slot_entry(ctx, name)
            if "want" in entry:
                said = _comments_about(ctx, name)
                ctx.note(f"{name!r}: removed 'want: {entry['want']}' (the group decides now)")
                _drop_want(entry)
                if said:
                    which, it = ("comment", "it") if len(said) == 1 else ("comments", "them")
                    ctx.note(
                        f"{name!r}: kept its {which} {', '.join(map(repr, said))}, but it is no "
                        f"longer 'want: {spec.want}' (race group {group!r} decides): check {it}"
                    )
    gi = group_index(ctx, group)
    if gi is None:
        new = CommentedMap()
        new["name"] = group
        new["count"] = count
        new["slots"] = CommentedSeq(final)
        append_item(child_seq(ctx.root, "race_groups"), new)
        ctx.note(f"created race group {group!r}: {count} winner(s) from {final}")
    else:
        for name in dropped:
            entry = ctx.root["race_groups"][gi]
            ctx.doc.delete_item(("race_groups", gi), "slots", list(entry["slots"]).index(name))
            set_key(slot_entry(ctx, name), "want", "released")
            ctx.note(f"{name!r} left race group {group!r}: want: released")
        entry = ctx.root["race_groups"][gi]
        for name in final:
            if name not in entry["slots"]:
                append_item(entry["slots"], name)
        set_key(entry, "count", count)
        ctx.note(f"race group {group!r}: {count} winner(s) from {final}")


def _inline(m: CommentedMap, key: str) -> str | None:
    """The comment at the end of ``key``'s line, if any."""
    slots = m.ca.items.get(key)
    token = slots[2] if slots and len(slots) > 2 else None
    if token is None or not str(token.value).startswith("#"):
        return None
    return str(token.value).split("\n", 1)[0].rstrip()


def _comments_about(ctx: EditContext, name: str) -> list[str]:
    """The comments that describe slot ``name``'s entry: the full-line ones right above it,
    the one on its first line and the one on its ``want:`` line."""
    seq = ctx.root.get("slots")
    index = slot_index(ctx, name)
    entry = seq[index]
    lines = ctx.doc.text.splitlines()
    first = seq.lc.item(index)[0]
    above: list[str] = []
    for line in reversed(lines[:first]):
        if not line.strip().startswith("#"):
            break
        above.insert(0, line.strip())
    said = list(above)
    if entry.fa.flow_style():  # ``- {name: ..., want: held}  # ...``: after the mapping
        head = lines[first] if first < len(lines) else ""
        tail = head[head.rfind("}") + 1 :] if "}" in head else ""
        if "#" in tail:
            said.append(tail[tail.index("#") :].rstrip())
    else:
        said += [c for c in (_inline(entry, "name"), _inline(entry, "want")) if c]
    return said


def _drop_want(entry: CommentedMap) -> None:
    """Delete ``want``, keeping the comment on its line (on the line before it)."""
    comment = None if entry.fa.flow_style() else _inline(entry, "want")
    keys = list(entry)
    before = keys[keys.index("want") - 1] if keys.index("want") > 0 else None
    del_key(entry, "want")
    if comment is None or before is None:
        return
    slots = entry.ca.items.get(before)
    token = slots[2] if slots and len(slots) > 2 else None
    if token is None:
        width = len(before) + 2 + len(str(entry[before]))
        entry.yaml_add_eol_comment(comment, before, column=entry.lc.col + width + 2)
        return
    value = str(token.value)
    cut = value.find("\n")
    head, tail = (value, "") if cut < 0 else (value[:cut], value[cut:])
    token.value = (f"{head.rstrip()}  {comment}" if head.strip() else comment) + tail


def race_zones(
    ctx: EditContext,
    *,
    group: str,
    accelerator: str,
    zones: list[str],
    mode: str | None = None,
    count: int = 1,
) -> None:
    """A new race group with one new candidate slot per zone (``recommend --apply``)."""
    _check(names.check_name, group)
    if group_index(ctx, group) is not None or ctx.desired.slot(group) is not None:
        raise EditRejected(f"{group!r} already exists; choose a new race group name")
    wanted = list(dict.fromkeys(zones))
    if not wanted:
        raise EditRejected("a race group needs at least one zone")
    if not 1 <= count <= len(wanted):
        raise EditRejected(f"count must be between 1 and the {len(wanted)} zones")
    candidates = []
    for zone in wanted:
        add_slot(ctx, zone=zone, accelerator=accelerator, mode=mode)
        candidates.append(ctx.slots[-1])
    for entry in child_seq(ctx.root, "slots"):
        if isinstance(entry, CommentedMap) and entry.get("name") in candidates:
            del_key(entry, "want")  # the group decides
    new = CommentedMap()
    new["name"] = group
    new["count"] = count
    new["slots"] = CommentedSeq(candidates)
    append_item(child_seq(ctx.root, "race_groups"), new)
    ctx.note(f"created race group {group!r}: {count} winner(s) from {candidates}")


def setup(
    ctx: EditContext,
    *,
    name: str,
    bootstrap: bool | None = None,
    tailscale: bool | None = None,
    tmux: bool | None = None,
    rerun: bool = False,
) -> None:
    entry = slot_entry(ctx, name)
    ctx.about(name)
    flags = {"bootstrap": bootstrap, "tailscale": tailscale, "tmux": tmux}
    if all(v is None for v in flags.values()) and not rerun:
        raise EditRejected("nothing to change: give a setup flag or ask for a re-run")
    block = child_map(entry, "setup")
    for key, value in flags.items():
        if value is not None and set_key(block, key, value):
            ctx.note(f"{name!r}: setup.{key}: {'true' if value else 'false'}")
    if rerun:
        generation = int(block.get("generation", 0)) + 1
        set_key(block, "generation", generation)
        ctx.note(f"{name!r}: setup.generation: {generation} (setup runs again on the same node)")


def tmux_all(ctx: EditContext) -> None:
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


def set_poll(
    ctx: EditContext,
    *,
    interval: str | float | None = None,
    fast_interval: str | float | None = None,
) -> None:
    if interval is None and fast_interval is None:
        raise EditRejected("nothing to change: give an interval or a fast interval")
    settings = child_map(ctx.root, "settings")
    for key, value in (("poll_interval", interval), ("fast_poll_interval", fast_interval)):
        if value is None:
            continue
        try:
            parse_duration(value)
        except ValueError as e:
            raise EditRejected(f"settings.{key}: {e}") from None
        if set_key(settings, key, value):
            ctx.note(f"settings.{key}: {value}")


EDITS: dict[str, Callable[..., None]] = {
    "hold": hold,
    "hold_many": hold_many,
    "release": release,
    "add_slot": add_slot,
    "remove_slot": remove_slot,
    "race": race,
    "race_zones": race_zones,
    "setup": setup,
    "tmux_all": tmux_all,
    "set_poll": set_poll,
}
