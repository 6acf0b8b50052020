"""A shared lab's policy: who administers it and whether members may edit each other's slots.

The policy file (``<state dir>/policy.yaml``, written by ``service install --shared`` and owned
by the controller's user) is parsed by ``adapters/lab.py``; this module turns its document into
a ``Policy`` and decides, for one edit, whether a user may change what another user owns.

Fail closed: a policy that cannot be read, is not owned by the controller's user, is writable
by others or is malformed becomes ``Policy.broken(why)``: nobody is an administrator and nobody
may edit another's slot (their own stay editable, so a broken file never traps capacity).

Pure: values in, values out; no file is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from reconciler.errors import UnsafeName
from reconciler.model import names

#: The keys a policy document may have; anything else is a typo and fails closed.
KEYS: Final = ("admins", "edit_others", "caps")


@dataclass(frozen=True, slots=True)
class Policy:
    admins: frozenset[str] = frozenset()
    edit_others: bool = False  # whether a member may edit a slot another member owns
    #: Per-owner limits as written (not enforced here; the planner's quota rules read them).
    caps: Mapping[str, Any] = field(default_factory=dict)
    problem: str | None = None  # why the file could not be used (then nothing is granted)
    shared: bool = True  # False: one user's private state directory, nothing to enforce

    @classmethod
    def private(cls) -> Policy:
        """A state directory one user owns: owners are recorded, never enforced."""
        return cls(edit_others=True, shared=False)

    @classmethod
    def broken(cls, problem: str) -> Policy:
        """Fail closed: no administrator, no edit of another's slot."""
        return cls(problem=problem)


def policy_from_document(doc: object) -> Policy:
    """The ``Policy`` a parsed policy file says; ``Policy.broken`` with the reason when it is
    malformed (an empty file is the strictest policy, not an error)."""
    if doc is None:
        return Policy()
    if not isinstance(doc, Mapping):
        return Policy.broken("the policy file is not a mapping")
    unknown = sorted(str(k) for k in doc if k not in KEYS)
    if unknown:
        return Policy.broken(f"unknown key(s) in the policy file: {', '.join(unknown)}")
    admins = doc.get("admins") or []
    if not isinstance(admins, list):
        return Policy.broken("admins must be a list of user names")
    try:
        checked = frozenset(names.check_user(a) for a in admins)
    except UnsafeName as e:
        return Policy.broken(f"admins: {e}")
    edit_others = doc.get("edit_others", False)
    if not isinstance(edit_others, bool):
        return Policy.broken("edit_others must be true or false")
    caps = doc.get("caps") or {}
    if not isinstance(caps, Mapping):
        return Policy.broken("caps must be a mapping of user name to limits")
    return Policy(admins=checked, edit_others=edit_others, caps=dict(caps))


def refusal(policy: Policy, user: str, owner: str | None, what: str) -> str | None:
    """Why ``user`` may not edit ``what`` (a slot or race group, named for the message), owned
    by ``owner``; None when they may. Unowned things and one's own are always editable."""
    if owner is None or owner == user or not policy.shared:
        return None
    if policy.problem is not None:
        return (
            f"{what} belongs to {owner}; the lab policy cannot be used ({policy.problem}), "
            f"so only {owner} may change it"
        )
    if user in policy.admins or policy.edit_others:
        return None
    admins = ", ".join(sorted(policy.admins)) or "none named"
    return (
        f"{what} belongs to {owner}, not to {user}; only {owner} or a lab admin "
        f"({admins}) may change it"
    )
