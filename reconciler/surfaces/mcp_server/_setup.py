"""MCP edit tools that (re)run node setup on a slot: bootstrap scripts, Tailscale. Each is a
``Setup`` edit with its flags fixed; the tool takes the slot's ``name``."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

from reconciler.intent.edits import Setup
from reconciler.intent.engine import IntentEditor
from reconciler.surfaces.mcp_server._common import EDIT_AGAIN, EditCall, edit_tool


def register(server: MCPServer, store: IntentEditor) -> None:
    @edit_tool(server, store, Setup, EDIT_AGAIN, fixed={"bootstrap": True, "rerun": True},
               only=("name",))  # fmt: skip
    def setup_vm(call: EditCall[Setup]) -> dict[str, Any]:
        """Run the setup scripts on the slot's node: bootstrap on and the setup generation
        bumped, so it runs again even if it ran before. wait_seconds: wait until done."""
        return call.apply()

    @edit_tool(server, store, Setup, EDIT_AGAIN, fixed={"tailscale": True, "rerun": True},
               only=("name",))  # fmt: skip
    def tailscale_setup(call: EditCall[Setup]) -> dict[str, Any]:
        """Join the slot's node to the tailnet: tailscale on, setup generation bumped."""
        return call.apply()
