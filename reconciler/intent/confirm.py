"""Confirming the deletes the delete guard holds: ``tpu-reconciler confirm``, MCP
``confirm_deletes``.

May: read the controller's status snapshot, write ``<state dir>/confirm.json`` (a lab member:
a request in ``<state dir>/inbox/``). May not: act on
the cloud (the controller deletes, at its next pass, exactly the deletes confirmed).

What is confirmed is the guarded set the snapshot shows (``plan.guard``, a
``model.status.GuardStatus``), named by its fingerprint: a caller that passes the fingerprint it
was shown is refused when the set has changed since, so nobody confirms deletes they did not
see. A later change that holds other deletes needs its own confirmation, and a confirmation
holds only under the intent it was shown with (any later edit of desired.yaml supersedes it) and
for ``core.control.CONFIRM_TTL``.

In a shared lab the confirming user is the one running this (a member's confirmation is a
request in the lab's inbox, a file that is theirs: ``adapters/confirm_file.write_request``): a
member may confirm only deletes of slots the lab's policy lets them change
(``model/trust.confirm_refusal``). This refuses up front, with ``NotYourSlot``, what the
snapshot shows to be someone else's; the controller applies the same rule to the request.
"""

from __future__ import annotations

import time
from typing import Any

from reconciler.adapters.confirm_file import write_confirmation
from reconciler.adapters.lab import read_policy
from reconciler.adapters.lab_layout import may_run
from reconciler.errors import EditRejected, NotYourSlot
from reconciler.intent.engine import IntentEditor
from reconciler.intent.views import read_snapshot
from reconciler.model.status import GuardStatus, StatusSnapshot
from reconciler.model.trust import ROOT_UID, confirm_refusal, slot_of_delete


def guarded(store: IntentEditor) -> GuardStatus | None:
    """The snapshot's guard (the deletes it holds), None when nothing waits."""
    return _guard_of(read_snapshot(store))


def refuse_unless_yours(store: IntentEditor) -> None:
    """``NotYourSlot`` now when the guarded deletes shown include someone else's slot: said
    before anyone is asked to confirm them (``confirm`` with no fingerprint prompts)."""
    snap = read_snapshot(store)
    guard = _guard_of(snap)
    if guard is not None:
        _check_may_confirm(store, snap, list(guard.deletes))


def _guard_of(snap: StatusSnapshot | None) -> GuardStatus | None:
    guard = snap.plan.guard if snap is not None and snap.plan is not None else None
    return guard if guard is not None and guard.deletes else None


def confirm_deletes(store: IntentEditor, fingerprint: str | None = None) -> dict[str, Any]:
    """Confirm the guarded deletes shown now; ``{"status": "confirmed" | "nothing", ...}``."""
    snap = read_snapshot(store)  # once: the guard and the intent it was shown under
    guard = _guard_of(snap)
    if guard is None:
        if fingerprint:
            raise EditRejected(
                f"no deletes wait for confirmation now (fingerprint {fingerprint} is not "
                "current): see `tpu-reconciler status`"
            )
        return {"status": "nothing", "note": "no deletes wait for confirmation"}
    if fingerprint and fingerprint != guard.fingerprint:
        raise EditRejected(
            f"the deletes waiting changed: they are now {guard.fingerprint}, not {fingerprint}; "
            "look again (`tpu-reconciler status`) and confirm what is shown"
        )
    deletes = list(guard.deletes)
    _check_may_confirm(store, snap, deletes)
    digest = snap.desired.digest if snap is not None else None
    token = write_confirmation(store.state, deletes, digest=digest, now=time.time())
    note = "the controller deletes exactly these at its next pass"
    if store.state.lab and not may_run(store.state):  # a member's: a request in the inbox
        note = (
            "the controller checks at its next pass that they are yours to confirm, then "
            "deletes exactly these (status and events say if it refused)"
        )
    return {
        "status": "confirmed",
        "fingerprint": token,
        "deletes": deletes,
        "slots": list(guard.slots),
        "note": note,
    }


def _check_may_confirm(
    store: IntentEditor, snap: StatusSnapshot | None, deletes: list[str]
) -> None:
    """``NotYourSlot`` when a slot among ``deletes`` is known (from the snapshot) to be one
    this user may not change; slots the snapshot does not show are left to the controller."""
    owners = {s.name: s.owner for s in snap.slots} if snap is not None else {}
    known = [d for d in deletes if slot_of_delete(d) in owners]
    actor = store.actor
    reason = confirm_refusal(
        read_policy(store.state),
        file_user=actor.user,
        trusted=actor.uid in (store.state.root.stat().st_uid, ROOT_UID),
        recorded_user=None,
        deletes=known,
        owners=owners,
    )
    if reason is not None:
        theirs = [owners[slot_of_delete(d)] for d in known]
        raise NotYourSlot(reason, owner=next((o for o in theirs if o and o != actor.user), "?"))
