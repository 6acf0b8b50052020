"""Read-only view of chip quotas for MCP and ``tpu-reconciler quota``: each limit with its use
and the slots waiting on it, the creates the cloud refused for quota in its words and those that
can never fit (the ``quota --json`` document, from the controller's snapshot), as JSON or text.

May: read the snapshot (through ``intent.views``). May not: edit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reconciler.core.json_text import indented
from reconciler.core.quota_text import EMPTY, format_quota, quota_doc
from reconciler.model.status import StatusSnapshot

if TYPE_CHECKING:  # ``quota`` on the CLI prints a snapshot: the edit engine stays unloaded
    from reconciler.intent.engine import IntentEditor

QUOTA_SCHEMA = "tpu-reconciler.quota.v1"


def quotas(store: IntentEditor) -> dict[str, Any]:
    from reconciler.intent import views

    snap = views.read_snapshot(store)
    body: dict[str, Any] = quota_doc(snap) if snap else {"quotas": [], **EMPTY}
    return views._doc(snapshot=views._snapshot_meta(store, snap), **body)


def quota_text(snapshot: StatusSnapshot, *, as_json: bool = False) -> str:
    """``tpu-reconciler quota``'s output for ``snapshot``, each line ending in a newline: the
    table, or (``as_json``) the ``quota --json`` document."""
    if as_json:
        return indented({"schema_version": QUOTA_SCHEMA, **quota_doc(snapshot)}) + "\n"
    return format_quota(snapshot)
