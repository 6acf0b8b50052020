"""``doctor``'s checks of what only some setups have, judged pure (facts in, a ``Check`` out):

- ``state_files``, in a shared lab's state directory only (``adapters/lab``): the files whose
  owner decides whether the controller believes them (``model/trust.py``). A ``known_hosts`` or
  ``memory.json`` owned by anyone but the controller's user (the state directory's owner) or
  root, or a symbolic link, is not used by the controller: a fail, with the fix. A
  ``confirm.json`` is its confirming member's on purpose; one whose recorded user is not its
  owner confirms nothing: a warning.
- ``cloud_quotas``, with ``settings.quota_source: cloud`` only: whether the Cloud Quotas API
  answered (``adapters/cloud_quotas``; its endpoint can be overridden, as the emulator's is).

A setup without them gets no such line, so its report is as before.

May: compute. May not: do I/O, print.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from reconciler.model.trust import ROOT_UID, foreign_file
from reconciler.runtime.doctor import Check, ok, skip

#: The controller's own files in the state directory, whose owner must be the controller's user.
OWN_FILES: Final = ("known_hosts", "memory.json")
CONFIRM: Final = "confirm.json"


@dataclass(frozen=True, slots=True)
class OwnedFacts:
    """One owner-checked file of the state directory, as found."""

    name: str  # known_hosts | memory.json | confirm.json
    path: str
    uid: int
    owner: str  # the user name of ``uid``
    link: bool = False  # a symbolic link (never followed)
    recorded_user: object = None  # confirm.json: the "user" its document names


def check_state_files(
    facts: Sequence[OwnedFacts], *, controller_uid: int, controller: str
) -> Check:
    """The owner rules of ``model/trust`` applied as the controller applies them (its user
    reads them: the state directory's owner and root are trusted, nobody else)."""
    trusted = frozenset({controller_uid, ROOT_UID})
    fails: list[tuple[str, str]] = []
    warns: list[tuple[str, str]] = []
    for f in facts:
        if f.link:
            fails.append((
                f"{f.path} is a symbolic link (made by {f.owner}), not the controller's file: "
                "it is not used",
                f"rm {f.path}",
            ))  # fmt: skip
        elif f.name == CONFIRM:
            if f.recorded_user is not None and f.recorded_user != f.owner:
                warns.append((
                    f"{f.path} names {f.recorded_user!r} but is owned by {f.owner}: it confirms "
                    "nothing",
                    f"rm {f.path}; the member who confirms runs `tpu-reconciler confirm` again",
                ))  # fmt: skip
        elif f.uid not in trusted:
            said = foreign_file(
                f.path, uid=f.uid, owner=f.owner, trusted=trusted, controller=controller
            )
            fails.append((
                said or f.path,
                f"rm {f.path}  (or, if you trust its content: sudo chown {controller} {f.path})",
            ))  # fmt: skip
    if fails or warns:
        found = fails or warns
        return Check(
            "state_files",
            "fail" if fails else "warn",
            "; ".join(detail for detail, _ in found),
            "; ".join(hint for _, hint in found),
        )
    names = [f.name + (f" (by {f.owner})" if f.name == CONFIRM else "") for f in facts]
    return ok(
        "state_files",
        f"{', '.join(names)}: the controller's own" if names else "none written yet",
    )


@dataclass(frozen=True, slots=True)
class QuotasFacts:
    endpoint: str
    limits: int | None = None  # chip limits read; None when the read failed
    error: str | None = None


QUOTAS_HINT: Final = (
    "enable the API (gcloud services enable cloudquotas.googleapis.com) and let the account "
    "read quotas (roles/cloudquotas.viewer), or set settings.quota_source: file"
)


def check_cloud_quotas(facts: QuotasFacts | None, blocked_by: str | None) -> Check:
    """``settings.quota_source: cloud``: the controller reads chip limits from this API."""
    if facts is None:
        return skip("cloud_quotas", f"not tried: {blocked_by or 'nothing to read'}")
    if facts.error is not None or facts.limits is None:
        return Check(
            "cloud_quotas",
            "fail",
            f"the Cloud Quotas API at {facts.endpoint} failed: {facts.error}",
            QUOTAS_HINT,
        )
    if facts.limits == 0:
        return Check(
            "cloud_quotas",
            "warn",
            f"the Cloud Quotas API at {facts.endpoint} answered with no Cloud TPU chip limit: "
            "only the file's quotas: hold creates back",
            QUOTAS_HINT.split(", or ")[0] + " if the project has TPU quota",
        )
    n = facts.limits
    return ok(
        "cloud_quotas",
        f"{n} Cloud TPU chip limit{'' if n == 1 else 's'} from the Cloud Quotas API at "
        f"{facts.endpoint}",
    )
