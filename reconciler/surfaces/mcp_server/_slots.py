"""MCP edit tools of slots and race groups: want, membership, the file's slot list, polling.

Each tool is its use case's (``reconciler.intent.usecases``: name, deprecated aliases,
annotations) and its parameters come from the edit class (``_common.case_tool``);
``queue_slots``, which holds or races by its ``race`` flag, builds one of two edits and declares
its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio.to_thread
from mcp.server.mcpserver import MCPServer

from reconciler.intent.edits import AddSlot, Hold, HoldMany, Release, RemoveSlot, SetPoll
from reconciler.intent.edits_race import Race
from reconciler.intent.engine import IntentEditor
from reconciler.intent.tmux import stays_open_notes
from reconciler.intent.usecases import by_name
from reconciler.surfaces.mcp_server._common import (
    EditCall,
    OperationId,
    WaitSeconds,
    apply_edit,
    case_tool,
    close_tmux_window,
    guard,
    own_tool,
)


def register(server: MCPServer, store: IntentEditor) -> None:
    @case_tool(server, store, by_name("hold"))
    def hold(call: EditCall[Hold]) -> dict[str, Any]:
        """Hold a slot (want: held): the controller queues it and keeps it. A race candidate
        leaves its group (the group keeps racing for its other winners). wait_seconds: wait
        until it is ACTIVE."""
        return call.apply()

    @own_tool(server, by_name("queue_slots"))
    def queue_slots(
        names: list[str],
        operation_id: OperationId = None,
        race: bool = False,
        count: int = 1,
        group: str | None = None,
        wait_seconds: WaitSeconds = 0,
    ) -> dict[str, Any]:
        """Hold several slots; with race=true make them candidates of a race group instead
        (first `count` to win are kept, the rest cancelled). The group is `group`, else the
        one these slots already race in, else `race-<first name>`; existing candidates stay.
        wait_seconds: wait until held (or the group has its winners)."""
        if not race:
            return apply_edit(store, HoldMany(tuple(names)), operation_id, wait_seconds)
        chosen = group or _group_for(store, names)
        return apply_edit(
            store, Race(chosen, tuple(names), count, exact=False), operation_id, wait_seconds,
            hint=" (queue_slots never does that: use race)",
        )  # fmt: skip

    @case_tool(server, store, by_name("release"))
    async def release(call: EditCall[Release], close_tmux: bool = False) -> dict[str, Any]:
        """Release a slot (want: released): the controller deletes its queued resource and
        TPU. Needs confirm=true (ask the user). A race candidate leaves its group. The tmux
        window stays open unless close_tmux=true. wait_seconds: wait until NOT_QUEUED."""
        # Unconfirmed, the edit itself refuses (after checking the slot exists) and asks.
        out = await anyio.to_thread.run_sync(lambda: call.apply(hint=" (ask the user first)"))
        name = call.edit.name
        if close_tmux:
            out["tmux_closed"] = await close_tmux_window(store, name)
        else:
            out.setdefault("notes", []).extend(await stays_open_notes(store, name))
        return out

    @case_tool(server, store, by_name("add_slot"))
    def add_slot(call: EditCall[AddSlot]) -> dict[str, Any]:
        """Add a slot. Without a name it is named <mode>-<accelerator>-<zone code>-<index>
        (e.g. spot-v6e8-ew4a-1), with the first free index unless `index` is given. Mode
        flex-start needs max_run_duration (at most '7d', e.g. '6h'); renew=true queues a new
        run after each one ends."""
        return call.apply()

    @case_tool(server, store, by_name("race"))
    def race(call: EditCall[Race]) -> dict[str, Any]:
        """Create or replace a race group: exactly these candidates, `count` winners. Dropped
        candidates get want: released and lowering the count cancels extra winners: both
        need confirm=true. wait_seconds: wait until the group has its winners."""
        return call.apply()

    @case_tool(server, store, by_name("remove_slot"))
    def remove_slot(call: EditCall[RemoveSlot]) -> dict[str, Any]:
        """Remove a slot from desired.yaml: it becomes UNMANAGED (its TPU, if any, is shown
        and never deleted — unless settings.prune is on, which needs confirm=true)."""
        return call.apply()

    @case_tool(server, store, by_name("set_poll"))
    def set_poll(call: EditCall[SetPoll]) -> dict[str, Any]:
        """Change how often the controller polls: interval when steady, fast_interval while
        anything moves ('30s', '2m', or seconds)."""
        return call.apply()


def _group_for(store: IntentEditor, names: Sequence[str]) -> str:
    """The race group ``names`` already share, else ``race-<first name>``."""
    desired = guard(lambda: store.parse(store.read().decode("utf-8", "replace")))
    groups = {s.race_group for n in names if (s := desired.slot(n)) is not None}
    if len(groups) == 1 and None not in groups:
        return str(groups.pop())
    first = names[0] if names else "slots"
    return f"race-{first}"[:63].rstrip("-")
