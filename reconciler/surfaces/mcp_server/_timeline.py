"""MCP tool of the lab's timeline: ``timeline`` (read)."""

from __future__ import annotations

from typing import Any, Literal

from mcp.server.mcpserver import MCPServer

from reconciler.intent import timeline_views
from reconciler.intent.engine import IntentEditor
from reconciler.intent.usecases import by_name
from reconciler.surfaces.mcp_server._common import guard, own_tool


def register(server: MCPServer, store: IntentEditor) -> None:
    @own_tool(server, by_name("timeline"))
    def timeline(
        by: Literal["owner", "zone", "quota"] = "owner",
        since: str | None = None,
        until: str | None = None,
    ) -> dict[str, Any]:
        """Who holds what, when: every slot's held, queued and waiting spans (past from the
        capacity history, scheduled ends: hold_until, hold_for, flex-start runs, maintenance),
        grouped by owner, zone or quota. A slot waiting on a quota or a member's cap has an
        ``estimate``: its ``earliest_start`` in the quota's fair order (priority, fewest chips
        held, file order) given the scheduled ends, or ``never`` with the reason, and the
        history's ``expected_wait``. It is an estimate, as of the controller's last snapshot
        (``as_of``). since / until: a duration back / ahead ("12h", "2d") or an ISO time."""
        return guard(lambda: timeline_views.timeline(store, by=by, since=since, until=until))
