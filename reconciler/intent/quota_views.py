"""Read-only view of chip quotas for MCP: each limit with its use and the slots waiting on it,
and the creates the cloud refused for quota in its words (the ``quota --json`` document,
from the controller's snapshot).

May: read the snapshot (through ``intent.views``). May not: edit.
"""

from __future__ import annotations

from typing import Any

from reconciler.core.quota_text import quota_doc
from reconciler.intent import views
from reconciler.intent.engine import IntentEditor


def quotas(store: IntentEditor) -> dict[str, Any]:
    snap = views.read_snapshot(store)
    body: dict[str, Any] = quota_doc(snap) if snap else {"quotas": [], "waiting": [], "refused": []}
    return views._doc(snapshot=views._snapshot_meta(store, snap), **body)
