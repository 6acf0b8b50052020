"""The logs use case: the last lines a slot's workload printed on each of its workers, read
where the controller's snapshot says it runs (``intent.log_target``) through the controller's
own runner wiring (the same SSH user, key and pinned host keys: ``runtime.setup.LiveSetup``).

May: read the snapshot and desired.yaml, read logs over SSH. May not: change anything.
"""

from __future__ import annotations

from typing import Any

from reconciler.errors import ViewError
from reconciler.intent import views
from reconciler.intent.engine import IntentEditor
from reconciler.intent.log_target import target_of
from reconciler.runtime.setup import LiveSetup


async def tail(store: IntentEditor, name: str, *, worker: int | None, lines: int) -> dict[str, Any]:
    """``{name, run_id, lines: [{worker, attempt, text}]}``; ``ViewError`` when the slot has no
    node to read from (with the reason), any ``ReconcilerError`` of the reading as it is."""
    target = target_of(views.read_snapshot(store), name)
    if target.node is None:
        raise ViewError(target.reason or f"{name}: no node to read logs from")
    desired = store.parse(store.read().decode("utf-8", "replace"))
    live = LiveSetup(store.path, store.state)
    out: list[dict[str, Any]] = []
    try:
        runner = await live.workload_runner(desired)
        stream = runner.logs(
            target.node, name, worker=worker, attempt=None, lines=lines, follow=False,
            run_id=target.run_id,
        )  # fmt: skip
        async for line in stream:
            out.append({"worker": line.worker, "attempt": line.attempt, "text": line.text})
    finally:
        await live.aclose()
    return {"name": name, "run_id": target.run_id, "lines": out}
