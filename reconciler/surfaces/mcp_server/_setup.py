"""MCP edit tools that (re)run node setup on a slot: bootstrap scripts, Tailscale. Each is a
``Setup`` edit with its flags fixed; the tool takes the slot's ``name``."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

from reconciler.intent.edits import Setup
from reconciler.intent.engine import IntentEditor
from reconciler.intent.usecases import by_name
from reconciler.surfaces.mcp_server._common import EditCall, case_tool


def register(server: MCPServer, store: IntentEditor) -> None:
    @case_tool(server, store, by_name("setup_vm"))
    def setup_vm(call: EditCall[Setup]) -> dict[str, Any]:
        """Run the setup scripts on the slot's node: bootstrap on and the setup generation
        bumped, so it runs again even if it ran before. wait_seconds: wait until done."""
        return call.apply()

    @case_tool(server, store, by_name("tailscale_setup"))
    def tailscale_setup(call: EditCall[Setup]) -> dict[str, Any]:
        """Join the slot's node to the tailnet: tailscale on, setup generation bumped."""
        return call.apply()
