"""What ``tpu-reconciler quota`` prints: each chip limit (its API's: ``tpu`` or ``compute``)
with its use and the slots waiting on it, then the creates the cloud refused for quota, in its
words, and the ones that can never fit. Text and JSON from a status
snapshot; pure (values in, text out).
"""

from __future__ import annotations

from typing import Any, Final

from reconciler.core.render import format_table
from reconciler.model.status import StatusSnapshot, encode

_HEADER = ("FAMILY", "MODE", "API", "WHERE", "USED", "LIMIT", "SOURCE", "WAITING")
#: ``quota --json``'s list per ``SlotQuotaStatus.state``.
_LISTS = {"waiting": "waiting", "refused": "refused", "never-fits": "never_fits"}
#: Those lists without a snapshot.
EMPTY: Final[dict[str, list[Any]]] = {name: [] for name in _LISTS.values()}


def quota_doc(snapshot: StatusSnapshot) -> dict[str, Any]:
    """``quota --json``: ``quotas`` (the snapshot's), ``waiting``, ``refused`` and
    ``never_fits`` per slot."""
    by_state: dict[str, list[dict[str, Any]]] = {name: [] for name in _LISTS.values()}
    for s in snapshot.slots:
        if s.quota is not None and s.quota.state in _LISTS:
            by_state[_LISTS[s.quota.state]].append({"slot": s.name, **encode(s.quota)})
    return {"quotas": [encode(q) for q in snapshot.quotas], **by_state}


def format_quota(snapshot: StatusSnapshot) -> str:
    seen = snapshot.observed_at is not None  # without an observation the use is not known
    rows = [
        (
            q.family,
            q.mode,
            q.api or "tpu",
            f"{q.scope} {q.place}",
            str(q.used) if seen else "?",
            str(q.chips),
            q.source if q.quota_id is None else f"{q.source} ({q.quota_id})",
            ", ".join(q.waiting) or "-",
        )
        for q in snapshot.quotas
    ]
    lines = [format_table(_HEADER, rows)] if rows else ["no chip limits (quotas: in desired.yaml)"]
    refused = [s for s in snapshot.slots if s.quota is not None and s.quota.state == "refused"]
    if refused:
        lines.append("")
        lines += [f"refused by the cloud: {s.name}: {s.quota.message}" for s in refused if s.quota]
    never = [s for s in snapshot.slots if s.quota is not None and s.quota.state == "never-fits"]
    if never:
        lines.append("")
        lines += [f"{s.name}: {s.quota.message}" for s in never if s.quota]
    waiting = [s for s in snapshot.slots if s.quota is not None and s.quota.state == "waiting"]
    if waiting:
        lines.append("")
        lines += [f"{s.name}: {s.quota.message}" for s in waiting if s.quota]
    if snapshot.note:
        lines.append(str(snapshot.note))
    return "\n".join(lines) + "\n"
