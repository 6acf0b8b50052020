"""Intent edits of race groups: ``Race`` (create or change one) and ``RaceZones`` (a new group
with one new candidate per zone, as ``recommend --apply`` writes it).

Same contract as ``intent.edits`` (change the round-trip tree only, explain with ``ctx.note``;
the engine validates the whole result and writes it). A candidate cannot carry ``want`` (its
group decides): ``Race`` removes that line and keeps its comment on the line before, and a note
names the comments about the slot that may no longer be true. Dropping a candidate or lowering
a group's count makes the controller delete capacity, so both need confirmation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from reconciler.errors import EditRejected
from reconciler.intent.edits import (
    AddSlot,
    Edit,
    EditContext,
    check,
    child_seq,
    del_key,
    group_index,
    leave_group,
    set_key,
    slot_entry,
    slot_index,
    unknown_slot,
)
from reconciler.intent.roundtrip import append_item
from reconciler.model import names
from reconciler.model.accelerators import default_api, family_of


@dataclass(frozen=True, slots=True)
class Race(Edit):
    """Race group ``group`` with ``count`` winners from ``slots``: exactly these candidates
    (``exact``), or these added to its candidates."""

    kind: ClassVar[str] = "race"
    group: str
    slots: tuple[str, ...]
    count: int
    exact: bool = True

    def apply(self, ctx: EditContext) -> None:
        group, count = self.group, self.count
        check(names.check_name, group)
        if not self.slots:
            raise EditRejected("a race group needs at least one candidate slot")
        if not 0 <= count <= 1000:
            raise EditRejected("count must be between 0 and 1000")
        if ctx.desired.slot(group) is not None:
            raise EditRejected(f"{group!r} is a slot name; choose another name for the race group")
        for name in self.slots:
            check(names.check_name, name)
            if ctx.desired.slot(name) is None:
                raise unknown_slot(ctx, name)
        wanted = list(dict.fromkeys(self.slots))
        ctx.about(*wanted)
        gi = group_index(ctx, group)
        before = list(ctx.root["race_groups"][gi]["slots"]) if gi is not None else []
        old_count = int(ctx.root["race_groups"][gi].get("count", 1)) if gi is not None else 0
        final = wanted if self.exact else before + [n for n in wanted if n not in before]
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
                leave_group(ctx, name)
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
                            f"{name!r}: kept its {which} {', '.join(map(repr, said))}, but it is "
                            f"no longer 'want: {spec.want}' (race group {group!r} decides): "
                            f"check {it}"
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


@dataclass(frozen=True, slots=True)
class RaceZones(Edit):
    """A new race group with one new candidate slot per zone (``recommend --apply``);
    ``apis``, when given, one per zone: the API of that candidate (written as ``api:`` when
    it is not the accelerator's default), so one zone may be raced on both APIs."""

    kind: ClassVar[str] = "race_zones"
    group: str
    accelerator: str
    zones: tuple[str, ...]
    mode: str | None = None
    count: int = 1
    max_run_duration: str | float | None = None  # mode flex-start: each candidate's run
    apis: tuple[str, ...] = ()

    def apply(self, ctx: EditContext) -> None:
        group, count = self.group, self.count
        check(names.check_name, group)
        if group_index(ctx, group) is not None or ctx.desired.slot(group) is not None:
            raise EditRejected(f"{group!r} already exists; choose a new race group name")
        if self.apis and len(self.apis) != len(self.zones):
            raise EditRejected("apis names one API per zone")
        usual = default_api(family_of(self.accelerator) or "")
        wanted = list(
            dict.fromkeys(zip(self.zones, self.apis or (usual,) * len(self.zones), strict=True))
        )
        if not wanted:
            raise EditRejected("a race group needs at least one zone")
        if not 1 <= count <= len(wanted):
            raise EditRejected(f"count must be between 1 and the {len(wanted)} zones")
        candidates = []
        for zone, api in wanted:
            AddSlot(
                zone=zone,
                accelerator=self.accelerator,
                mode=self.mode,
                max_run_duration=self.max_run_duration,
                api=None if api == usual else api,
            ).apply(ctx)
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
