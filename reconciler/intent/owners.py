"""Who makes an intent edit, whether they may, and the ``owner:`` it leaves in desired.yaml.

The engine (``intent/engine.py``) calls ``check`` and ``stamp`` on every edit, from the CLI,
MCP or TUI alike. The user is the Unix user running the process (``current_actor``: the
effective uid), never an argument: no surface can claim to be someone else.

- ``check``: every slot the edit is about (``EditContext.slots``) and the race group it names
  must be unowned, the user's own, or editable by them under the lab's policy
  (``model/policy.refusal``); otherwise ``NotYourSlot`` names the owner and nothing is written.
- ``stamp``: in a shared lab's state directory, or once desired.yaml names any owner, a slot or
  race group the edit creates or touches that has no owner gets ``owner: <user>``. A slot that
  leaves an owned race group keeps that group's owner (an admin's edit never takes a slot
  over). A single user's file without owners stays free of them.

May: read the effective uid and the password database. May not: do other I/O (the engine reads
the policy, ``adapters/lab.read_policy``), print.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ruamel.yaml.comments import CommentedMap

from reconciler.adapters.lab import user_name
from reconciler.errors import NotYourSlot
from reconciler.intent.edits import Edit, EditContext, set_key
from reconciler.model.desired import Desired
from reconciler.model.policy import Policy, refusal

if TYPE_CHECKING:  # the status model stays off an edit's imports
    from reconciler.model.status import StatusSnapshot


@dataclass(frozen=True, slots=True)
class Actor:
    """The Unix user making an edit."""

    user: str
    uid: int


def current_actor() -> Actor:
    uid = os.geteuid()
    return Actor(user_name(uid), uid)


def _named_groups(edit: Edit, desired: Desired) -> Iterator[tuple[str, str | None]]:
    """(race group, its owner) for each existing group the edit names (``group`` or ``name``)."""
    args = edit.args
    wanted = {args.get("group"), args.get("name")} - {None}
    for group in desired.race_groups:
        if group.name in wanted:
            yield group.name, group.owner


def check(ctx: EditContext, edit: Edit, actor: Actor, policy: Policy) -> None:
    """Refuse with ``NotYourSlot`` when the edit touches what another user owns and the policy
    does not let ``actor`` change it."""
    before = ctx.desired
    owned = [(f"race group {g!r}", owner) for g, owner in _named_groups(edit, before)]
    for name in dict.fromkeys(ctx.slots):
        spec = before.slot(name)
        owned.append((f"slot {name!r}", spec.owner if spec is not None else None))
    for what, owner in owned:
        reason = refusal(policy, actor.user, owner, what)
        if reason is not None:
            assert owner is not None
            raise NotYourSlot(reason, owner=owner)


def owners_named(desired: Desired) -> bool:
    return any(s.owner for s in desired.slots) or any(g.owner for g in desired.race_groups)


def stamp(ctx: EditContext, edit: Edit, actor: Actor, policy: Policy) -> None:
    """``owner: <user>`` on what the edit made or touched and nobody owns yet (see above)."""
    before = ctx.desired
    if not policy.shared and not owners_named(before):
        return
    root = ctx.root
    args = edit.args
    named = {args.get("group"), args.get("name")} - {None}
    owned_members: set[str] = set()
    for entry in root.get("race_groups") or []:
        if not isinstance(entry, CommentedMap):
            continue
        if entry.get("name") in named and entry.get("owner") is None:
            set_key(entry, "owner", actor.user)
            ctx.note(f"race group {entry.get('name')!r}: owner: {actor.user}")
        if entry.get("owner") is not None:
            owned_members.update(str(s) for s in entry.get("slots") or [])
    touched = set(ctx.slots)
    for entry in root.get("slots") or []:
        if not isinstance(entry, CommentedMap):
            continue
        name = entry.get("name")
        if name not in touched or entry.get("owner") is not None or name in owned_members:
            continue
        spec = before.slot(str(name))
        owner = spec.owner if spec is not None and spec.owner else actor.user
        set_key(entry, "owner", owner)
        ctx.note(f"{name!r}: owner: {owner}")


def owned_views(
    desired: Desired | None,
    snapshot: StatusSnapshot | None,
    slots: list[dict[str, Any]],
    race_groups: list[dict[str, Any]],
    owner: str | None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The MCP ``list_slots`` rows with ``owner`` on the owned ones (from desired.yaml, else
    the snapshot), and with ``owner`` given only that user's rows and the race groups that
    have one of them among their candidates (as ``core/owners.only_owner`` for ``status``)."""
    known = {s.name: s.owner for s in snapshot.slots if s.owner} if snapshot else {}
    if desired is not None:
        known = {s.name: s.owner for s in desired.slots if s.owner}
    for view in slots:
        if view.get("name") in known:
            view["owner"] = known[view["name"]]
    if owner is None:
        return slots, race_groups
    kept = [v for v in slots if v.get("owner") == owner]
    names = {v["name"] for v in kept}
    groups = [g for g in race_groups if names.intersection(g.get("candidates") or ())]
    return kept, groups
