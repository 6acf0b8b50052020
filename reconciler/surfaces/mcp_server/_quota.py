"""MCP tool of chip quotas: ``quota`` (read)."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

from reconciler.intent import quota_views
from reconciler.intent.engine import IntentEditor
from reconciler.intent.usecases import by_name
from reconciler.surfaces.mcp_server._common import guard, own_tool


def register(server: MCPServer, store: IntentEditor) -> None:
    @own_tool(server, by_name("quota"))
    def quotas() -> dict[str, Any]:
        """Chip limits (the file's quotas:, and the cloud's with quota_source: cloud), the
        chips counted under each, the slots whose create waits on it ("waiting for quota:
        64/64 spot v6e chips in europe-west4-a"), and creates the cloud refused for quota in
        its words. To wait on fewer, release a slot or raise the limit in desired.yaml."""
        return guard(lambda: quota_views.quotas(store))
