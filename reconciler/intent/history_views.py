"""The capacity-history queries of a desired file's state: ``history`` (waits, lifetimes,
failures per place) and ``recommend`` (places ranked by expected time to capacity), as the
documents ``tpu-reconciler history --json`` / ``recommend --json`` print
(``runtime.history_reads``), read from the store's ``history.sqlite``.

May: read the history store. May not: write anything.
"""

from __future__ import annotations

from typing import Any

from reconciler.intent.engine import IntentEditor
from reconciler.runtime.history_reads import history_document, recommend_document


def history(
    store: IntentEditor,
    *,
    zone: str | None = None,
    accelerator: str | None = None,
    mode: str | None = None,
    since: float | None = None,
    api: str | None = None,
) -> dict[str, Any]:
    """``tpu-reconciler.history.v1`` of the store's history, filtered as given."""
    path = store.state.history
    return history_document(
        path, zone=zone, accelerator=accelerator, mode=mode, since=since, api=api
    )


def recommend(
    store: IntentEditor,
    accelerator: str,
    *,
    mode: str = "spot",
    count: int = 3,
    since: float | None = None,
    api: str | None = None,
) -> dict[str, Any]:
    """``tpu-reconciler.recommend.v1``: where ``accelerator`` comes up soonest."""
    path = store.state.history
    return recommend_document(path, accelerator, mode=mode, count=count, since=since, api=api)
