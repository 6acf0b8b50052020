"""Read-only view of chip quotas for MCP: each limit with its use and the slots waiting on it,
the creates the cloud refused for quota in its words and those that can never fit (the
``quota --json`` document, from the controller's snapshot).

May: read the snapshot (through ``intent.views``). May not: edit.
"""

from __future__ import annotations

from typing import Any

from reconciler.core.quota_text import EMPTY, quota_doc
from reconciler.intent import views
from reconciler.intent.engine import IntentEditor


def quotas(store: IntentEditor) -> dict[str, Any]:
    snap = views.read_snapshot(store)
    body: dict[str, Any] = quota_doc(snap) if snap else {"quotas": [], **EMPTY}
    return views._doc(snapshot=views._snapshot_meta(store, snap), **body)
